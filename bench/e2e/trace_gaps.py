#!/usr/bin/env python3
"""Where a step's GPU idles, from an engine trace (`train --trace FILE.json[.gz]`).

For each step after the first: the compute stream's busy time, and every gap between two compute
spans (and before the first / after the last within the step) attributed to the span that
follows it — the work the stream was waiting to start — grouped by phase (forward, head,
backward, embedding/AdamW, step boundary). Also, for each gap, what the other tracks were doing
meanwhile (H2D loads or restores, CPU AdamW), so a gap reads as "the forward of L5 waited
4.1 ms while H2D loaded L5".
usage: python3 bench/e2e/trace_gaps.py TRACE.json[.gz] [--top N]
"""
import collections, re, sys

from trace_file import events_of, step_spans

TRACKS = {1: "compute", 2: "H2D", 3: "checkpoint D2H", 4: "gradient D2H", 5: "CPU AdamW", 6: "engine"}


def phase(name):
    if name.startswith("forward"):
        return "forward"
    if name.startswith("backward"):
        return "backward"
    if "head" in name:
        return "head"
    return name.split(" L")[0]


def overlap(spans, t0, t1):
    """Names (and busy ms) of the spans on a track that overlap [t0, t1]."""
    busy = 0.0
    names = []
    for s in spans:
        a, b = max(s["ts"], t0), min(s["ts"] + s["dur"], t1)
        if b > a:
            busy += b - a
            names.append(s["name"])
    return busy, names


def main():
    path = sys.argv[1]
    top = int(sys.argv[sys.argv.index("--top") + 1]) if "--top" in sys.argv else 8
    events = events_of(path)
    steps = step_spans(events)
    by_track = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and e.get("tid", 0) != 0:
            by_track[e["tid"]].append(e)
    for spans in by_track.values():
        spans.sort(key=lambda e: e["ts"])
    for st in steps[1:]:
        t0, t1 = st["ts"], st["ts"] + st["dur"]
        comp = [e for e in by_track[1] if t0 <= e["ts"] < t1]
        busy = sum(min(e["ts"] + e["dur"], t1) - e["ts"] for e in comp)
        gaps = []
        prev_end = t0
        prev_name = "step start"
        for e in comp:
            if e["ts"] > prev_end:
                gaps.append((e["ts"] - prev_end, prev_end, e["ts"], prev_name, e["name"]))
            prev_end = max(prev_end, e["ts"] + e["dur"])
            prev_name = e["name"]
        if t1 > prev_end:
            gaps.append((t1 - prev_end, prev_end, t1, prev_name, "step end"))
        idle = sum(g[0] for g in gaps)
        print(f"{st['name']}: {st['dur'] / 1e3:.1f} ms, compute busy {busy / 1e3:.1f} ms "
              f"({100 * busy / st['dur']:.1f} %), idle {idle / 1e3:.1f} ms in {len(gaps)} gaps")
        per_phase = collections.Counter()
        for g in gaps:
            per_phase[phase(g[4])] += g[0]
        print("  idle before: " + ", ".join(f"{k} {v / 1e3:.1f} ms"
                                             for k, v in per_phase.most_common()))
        for dur, a, b, before, after in sorted(gaps, reverse=True)[:top]:
            side = []
            for tid in (2, 5):
                ob, names = overlap(by_track[tid], a, b)
                if ob > 0:
                    side.append(f"{TRACKS[tid]} busy {100 * ob / dur:.0f} % "
                                f"({', '.join(sorted(set(re.sub(r' [0-9]+$', '', n) for n in names))[:3])})")
            print(f"    {dur / 1e3:7.2f} ms after '{before}' before '{after}'"
                  + ("; " + "; ".join(side) if side else ""))


if __name__ == "__main__":
    main()
