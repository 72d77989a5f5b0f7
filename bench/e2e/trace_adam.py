#!/usr/bin/env python3
"""The CPU AdamW's rate inside the steps of an engine trace (`train --trace FILE.json[.gz]`).

Each AdamW span carries the parameters it updated (its `bytes` argument). Per step after the first
this prints the AdamW's parameters, busy seconds and rate, split by how much of each span a DMA
(H2D or D2H) ran beside it: spans with DMA on for at least half their length against the rest; the
AdamW track's idle time within the step; and when the GPU's last span of the step ended, with the
AdamW done after it and its rate; then per kind of span (the ring's pieces, held units, the clipped
pass's whole units or masters alone, the moments written later): parameters, busy seconds, rate and
when in the step (from the step's first span on any track) the first began and the last ended. The planner's constants (CPU AdamW alone / while copies run) are
what these rates are compared with.
usage: python3 bench/e2e/trace_adam.py TRACE.json[.gz]
"""
import collections, sys

from trace_file import events_of

COMPUTE, H2D, CKPT_D2H, GRAD_D2H, ADAM = 1, 2, 3, 4, 5


def covered(intervals, t0, t1):
    """Length of [t0, t1] covered by the union of the (sorted) intervals."""
    total, cur0, cur1 = 0.0, None, None
    for a, b in intervals:
        if b <= t0:
            continue
        if a >= t1:
            break
        a, b = max(a, t0), min(b, t1)
        if cur1 is None or a > cur1:
            if cur1 is not None:
                total += cur1 - cur0
            cur0, cur1 = a, b
        else:
            cur1 = max(cur1, b)
    if cur1 is not None:
        total += cur1 - cur0
    return total


def main():
    path = sys.argv[1]
    events = events_of(path)
    by_step = collections.defaultdict(lambda: collections.defaultdict(list))
    for e in events:
        if e.get("ph") != "X":
            continue
        step = e.get("args", {}).get("step")
        if step is None:
            continue
        span = (e["ts"], e["ts"] + e["dur"], e.get("args", {}).get("bytes", 0))
        by_step[step][e["tid"]].append(span)
        if e["tid"] == ADAM:  # by kind: "AdamW unit 3 (clipped, master)" -> "clipped, master"
            name = e.get("name", "")
            by_step[step]["kind " + (name[name.find("(") + 1:-1] if "(" in name else "ring")].append(span)
    steps = sorted(by_step)
    for s in steps[1:]:
        tr = by_step[s]
        dma = sorted((a, b) for t in (H2D, CKPT_D2H, GRAD_D2H) for a, b, _ in tr.get(t, []))
        adam = sorted(tr.get(ADAM, []))
        if not adam:
            continue
        t_step0 = min(a for t in tr for a, _, _ in tr[t] if not isinstance(t, str))
        gpu_end = max((b for a, b, _ in tr.get(COMPUTE, [])), default=0.0)
        groups = {"with DMA": [0, 0.0], "alone": [0, 0.0], "after the GPU": [0, 0.0]}
        for a, b, n in adam:
            d = b - a
            key = "with DMA" if d > 0 and covered(dma, a, b) >= 0.5 * d else "alone"
            groups[key][0] += n
            groups[key][1] += d
            if a >= gpu_end:
                groups["after the GPU"][0] += n
                groups["after the GPU"][1] += d
        span = adam[-1][1] - adam[0][0]
        busy = covered([(a, b) for a, b, _ in adam], adam[0][0], adam[-1][1])
        total_n = sum(n for _, _, n in adam)
        parts = [f"step {s}: AdamW {total_n / 1e9:.3f} G params, busy {busy / 1e6:.3f} s of "
                 f"{span / 1e6:.3f} s ({total_n / busy / 1e3:.2f} G/s busy)"]
        for k, (n, d) in groups.items():
            if d > 0:
                parts.append(f"{k}: {n / 1e9:.3f} G in {d / 1e6:.3f} s = {n / d / 1e3:.2f} G/s")
        for k in sorted(t for t in tr if isinstance(t, str)):
            spans = sorted(tr[k])
            n = sum(x for _, _, x in spans)
            d = sum(b - a for a, b, _ in spans)
            if d > 0:
                parts.append(f"{k[5:]}: {n / 1e9:.3f} G in {d / 1e6:.3f} s = {n / d / 1e3:.2f} G/s, "
                             f"{(spans[0][0] - t_step0) / 1e6:.3f}-{(spans[-1][1] - t_step0) / 1e6:.3f} s")
        print("; ".join(parts))


if __name__ == "__main__":
    main()
