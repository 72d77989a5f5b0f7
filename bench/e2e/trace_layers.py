#!/usr/bin/env python3
"""The GPU's own spans inside the steps of an engine trace (`train --trace FILE.json[.gz]`) against
the machine probe's layer: per step after the first, the forward and the recompute + backward of a
decoder layer (median over the layers, milliseconds), the head, and their sums; with PLAN_LOG (the
`slideformer plan` log of the same run) the probe's layer forward and backward for the step's
tokens and the step's spans / the probe's. This is the prediction's compute term seen from inside
the step: where a layer runs slower in a step than in the probe, the GPU-bound prediction is short
by that much.
usage: python3 bench/e2e/trace_layers.py TRACE.json[.gz] [PLAN_LOG]
"""
import re, statistics, sys

from replay_predictions import probe_layer
from trace_file import events_of, step_spans

COMPUTE = 1


def main():
    events = events_of(sys.argv[1])
    steps = step_spans(events)
    probe = None
    if len(sys.argv) > 2:
        layer = probe_layer(open(sys.argv[2]).read())
        if layer:
            tokens, f, b = layer
            probe = (f * tokens / 1e3, b * tokens / 1e3)
    for s in steps[1:]:
        t0, t1 = s["ts"], s["ts"] + s["dur"]
        fwd, bwd, head = [], [], 0.0
        for e in events:
            if e.get("ph") != "X" or e.get("tid") != COMPUTE or not t0 <= e["ts"] < t1:
                continue
            name, ms = e["name"], e["dur"] / 1e3
            if re.fullmatch(r"forward L\d+", name):
                fwd.append(ms)
            elif re.fullmatch(r"backward L\d+", name):
                bwd.append(ms)
            elif name == "head":
                head += ms
        if not fwd or not bwd:
            continue
        line = (f"{s['name']}: layer forward {statistics.median(fwd):.2f} ms, recompute + backward "
                f"{statistics.median(bwd):.2f} ms (medians of {len(fwd)} / {len(bwd)}); all layers "
                f"{sum(fwd) + sum(bwd):.1f} ms, head {head:.1f} ms")
        if probe:
            line += (f"; the probe's layer {probe[0]:.2f} / {probe[1]:.2f} ms (the step's / the "
                     f"probe's: {statistics.median(fwd) / probe[0]:.3f} / "
                     f"{statistics.median(bwd) / probe[1]:.3f})")
        print(line)


if __name__ == "__main__":
    main()
