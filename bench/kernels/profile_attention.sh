#!/usr/bin/env bash
# Where the attention time goes, kernel by kernel: ncu (clocks left alone, one metric, so one pass
# a kernel) over `bench_attention --profile NSEQxS` (our dense cuDNN graph, fwd+bwd three times)
# with plan timing off (SF_CUDNN_TUNE=0: the heuristics' first plan, which is what tuning picks
# today) and over torch_sdpa_once.py (torch SDPA's cuDNN backend, the same), then each program's kernels
# with their mean duration and the per-iteration sum. Needs a GPU where ncu reads counters.
# Usage: BIN=build SHAPE=2x8192 bash bench/kernels/profile_attention.sh   (logs to $OUT when set)
set -uo pipefail
cd "$(dirname "$0")/../.."
bin=${BIN:-build}
shape=${SHAPE:-2x8192}
log=${OUT:-/tmp}
ncu_run() { ncu --clock-control none --csv --metrics gpu__time_duration.sum "$@"; }
SF_CUDNN_TUNE=0 ncu_run "$bin/bench_attention" --profile "$shape" >"$log/ncu_ours.csv" 2>"$log/ncu_ours.err"
ncu_run --profile-from-start off python3 bench/kernels/torch_sdpa_once.py "${shape%x*}" "${shape#*x}" >"$log/ncu_torch.csv" 2>"$log/ncu_torch.err"
python3 - "$log/ncu_ours.csv" "$log/ncu_torch.csv" <<'PY'
import csv, io, sys
from collections import OrderedDict

def kernels(path):
    text = open(path, errors="replace").read()
    start = text.find('"ID"')
    if start < 0:
        print(f"{path}: no ncu table (see the .err file next to it)")
        return OrderedDict()
    out = OrderedDict()
    for row in csv.DictReader(io.StringIO(text[start:])):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        scale = {"ns": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3, "nsecond": 1e-3}
        us = float(row["Metric Value"].replace(",", "")) * scale.get(row["Metric Unit"], 1.0)
        name = row["Kernel Name"]
        name = name if len(name) < 90 else name[:87] + "..."
        out.setdefault(name, []).append(us)
    return out

for label, path in (("ours", sys.argv[1]), ("torch", sys.argv[2])):
    ks = kernels(path)
    total = sum(sum(v) for v in ks.values())
    print(f"== {label}: {sum(len(v) for v in ks.values())} kernels, {total / 3:.1f} us per fwd+bwd (3 iterations)")
    for name, v in sorted(ks.items(), key=lambda kv: -sum(kv[1])):
        print(f"  {len(v):4d} x {sum(v) / len(v):9.2f} us  {name}")
PY
