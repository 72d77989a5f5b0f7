#!/usr/bin/env bash
# Call A (any GPU; rebuild and carry .dev/e2e: strip -o .dev/e2e/slideformer build/slideformer):
# (1) traces of 1024x8 at 24 GiB with the plan's
# held share and with every gradient through the ring (the CPU AdamW's rate inside a step, with and
# without DMA beside it: bench/e2e/trace_adam.py); (2) exact clipping against unclipped, same call,
# 1024x16 at 24 GiB; (3) GPU-resident layers with clipping: 1024x8 at 70 GiB, clip 1.0,
# the plan's share (auto: layers now too) against --device-optimizer all (the embedding and head).
set -uo pipefail
R=$OUT/a; mkdir -p $R/traces
B=.dev/e2e
{ nvidia-smi -L; nproc; free -g; } > $R/machine.txt
work() {
  mkdir -p $R/tr $R/tr0
  OUT=$R/tr BIN=$B STEPS=4 TRACE_DIR=$R/traces bash bench/e2e/run.sh 1024x8 > $R/e2e_1024x8_traced.txt 2>&1
  mv $R/traces/1024x8_24GiB_clip0.json $R/traces/held_auto.json
  OUT=$R/tr0 BIN=$B STEPS=4 TRACE_DIR=$R/traces EXTRA="--held-gradients 0" bash bench/e2e/run.sh 1024x8 > $R/e2e_1024x8_traced_held0.txt 2>&1
  mv $R/traces/1024x8_24GiB_clip0.json $R/traces/held0.json
  for t in $R/traces/*.json; do python3 bench/e2e/trace_adam.py $t > ${t%.json}.adam.txt 2>&1; python3 bench/e2e/trace_gaps.py $t --top 15 > ${t%.json}.gaps.txt 2>&1; gzip $t; done
  OUT=$R/e2e BIN=$B STEPS=3 CLIP=1.0 bash bench/e2e/run.sh 1024x16 > $R/e2e_clip.txt 2>&1
  OUT=$R/e2e BIN=$B STEPS=3 bash bench/e2e/run.sh 1024x16 > $R/e2e_unclipped.txt 2>&1
  OUT=$R/e2e BIN=$B STEPS=4 GPU_MEM=70GiB CLIP=1.0 bash bench/e2e/run.sh 1024x8 > $R/e2e_70_clip_auto.txt 2>&1
  mkdir -p $R/all
  OUT=$R/all BIN=$B STEPS=4 GPU_MEM=70GiB CLIP=1.0 EXTRA="--device-optimizer all" bash bench/e2e/run.sh 1024x8 > $R/e2e_70_clip_all.txt 2>&1
}
export -f work; export R B
timeout 400 bash -c work
tar czf $OUT/a.tgz -C $OUT a && rm -rf $R
