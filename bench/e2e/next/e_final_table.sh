#!/usr/bin/env bash
# Call E (an H200: the control needs ~106 GiB; carry .dev/e2e: slideformer of this HEAD, stripped):
# the five at 24 GiB with the thread pool's chunks and the overlapped start-up, then the
# PyTorch control (everything on the GPU) at 1024x8 in the same call.
set -uo pipefail
R=$OUT/e; mkdir -p $R
B=.dev/e2e
{ nvidia-smi -L; nproc; free -g; } > $R/machine.txt
# The AdamW's halves (the clipped update's master pass and moments pass) against the whole, alone.
timeout 60 $B/bench_adamw 512 16 0 bf16 > $R/adamw_halves.txt 2>&1
# CONFIGS: a subset where device time is short (call D measured 1024x8, 1024x16, 1024x32 with
# this binary).
five() { OUT=$R/e2e BIN=$B STEPS=4 bash bench/e2e/run.sh ${CONFIGS:-} > $R/e2e_24.txt 2>&1; }
export -f five; export R B CONFIGS
timeout ${FIVE_LIMIT:-290} bash -c five
timeout 120 python3 bench/e2e/torch_control.py /tmp/sf_e2e/model 1024x8 4 > $R/torch_1024x8.txt 2>&1
# With time left (TRACED=1): 1024x64 traced, where the GPU-bound step's 0.7 s over its prediction goes.
if [ "${TRACED:-0}" = 1 ]; then
  mkdir -p $R/traced $R/traces
  timeout 90 bash -c 'OUT=$R/traced BIN=$B STEPS=3 TRACE_DIR=$R/traces bash bench/e2e/run.sh 1024x64 > $R/e2e_64_traced.txt 2>&1'
  for t in $R/traces/*.json; do
    [ -f "$t" ] || continue
    python3 bench/e2e/trace_gaps.py $t --top 15 > ${t%.json}.gaps.txt 2>&1; gzip $t
  done
fi
tar czf $OUT/e.tgz -C $OUT e && rm -rf $R
