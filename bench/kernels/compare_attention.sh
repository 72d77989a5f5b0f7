#!/usr/bin/env bash
# Attention fwd+bwd against torch SDPA's cuDNN backend, alternating the two programs ROUNDS times
# on the same GPU (one round = bench_attention --quick, then peers.py attention), then the median
# of each row over the rounds and our time ÷ torch's. Ours is the backend's path ("read": lengths
# read back from the device, one sync a call) and the dense graph with lengths given on the host;
# torch's rows: contiguous [B, H, S, D] (the ratio's denominator) and the [B, S, H, D] views
# transformers' attention hands SDPA.
# Usage: BIN=build ROUNDS=3 bash bench/kernels/compare_attention.sh   (logs to $OUT when set)
set -uo pipefail
cd "$(dirname "$0")/../.."
bin=${BIN:-build}
rounds=${ROUNDS:-3}
log=${OUT:-/tmp}/compare_attention.log
: >"$log"
for r in $(seq "$rounds"); do
  "$bin/bench_attention" --quick 2>&1 | grep -E '^(device|cuDNN \((dense|read)\) fwd\+bwd)' | sed "s/^/round $r ours  /" >>"$log"
  PYTHONUNBUFFERED=1 python3 bench/kernels/peers.py attention 2>&1 | grep -E '^(device|torch SDPA cuDNN.*fwd\+bwd)' | sed "s/^/round $r torch /" >>"$log"
done
cat "$log"
python3 - "$log" <<'PY'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    m = re.match(r"round \d+ (ours|torch) +(.*?fwd\+bwd) +(\d+x\d+) .*? ([\d.]+) ms", line)
    if m:
        rows.setdefault((m.group(3), m.group(1) + " " + m.group(2).strip()), []).append(float(m.group(4)))
for shape in sorted({k[0] for k in rows}, key=lambda s: int(s.split("x")[1])):
    peers = {name: v for (s, name), v in rows.items() if s == shape and name.startswith("torch")}
    if "torch torch SDPA cuDNN fwd+bwd" not in peers:
        continue
    t = statistics.median(peers["torch torch SDPA cuDNN fwd+bwd"])
    print(f"{shape}: torch SDPA cuDNN fwd+bwd (contiguous [B, H, S, D]) median {t:.3f} ms")
    for (s, name), v in sorted(rows.items()):
        if s == shape and name != "torch torch SDPA cuDNN fwd+bwd":
            m = statistics.median(v)
            print(f"  {name:32s} median {m:.3f} ms  (rounds: {', '.join(f'{x:.3f}' for x in v)})  = {m / t:.3f}x torch")
PY
