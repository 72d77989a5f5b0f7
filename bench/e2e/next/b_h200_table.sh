#!/usr/bin/env bash
# Calls B1-B3 (an H200 machine: `run` with kind nvidia-h200; copy into .dev/e2e, carry .dev/e2e):
# issue 12's table on the machine of its targets, the PyTorch control in the same run.
#   PART=1 (done 2026-12-06, bench/e2e/h200_2026-12-06/call1; docs/perf.md):
#           the five configurations at --gpu-memory 24GiB, then the control at 1024x8 (all on the
#           GPU: bf16 weights, gradients, AdamW states, HF checkpointing; ~70 GB, needs the H200).
#   PART=2: the same five at 12GiB, and 8192x8 at 24GiB and 12GiB.
#   PART=3: the five with clipping at 1.0 (24GiB), against PART=1's unclipped in the same call:
#           1024x16 and 1024x32 again unclipped.
set -uo pipefail
P=${PART:-1}
R=$OUT/b$P; mkdir -p $R
B=.dev/e2e
{ nvidia-smi -L; nproc; free -g; } > $R/machine.txt
work() {
  case $PART in
    1) OUT=$R/e2e BIN=$B STEPS=4 bash bench/e2e/run.sh > $R/e2e_24.txt 2>&1
       timeout 200 python3 bench/e2e/torch_control.py /tmp/sf_e2e/model 1024x8 4 > $R/torch_1024x8.txt 2>&1 ;;
    2) OUT=$R/e2e BIN=$B STEPS=3 GPU_MEM=12GiB bash bench/e2e/run.sh > $R/e2e_12.txt 2>&1
       OUT=$R/e2e BIN=$B STEPS=3 bash bench/e2e/run.sh 8192x8 > $R/e2e_8192x8_24.txt 2>&1
       OUT=$R/e2e BIN=$B STEPS=3 GPU_MEM=12GiB bash bench/e2e/run.sh 8192x8 > $R/e2e_8192x8_12.txt 2>&1 ;;
    3) OUT=$R/e2e BIN=$B STEPS=4 CLIP=1.0 bash bench/e2e/run.sh > $R/e2e_clip.txt 2>&1
       OUT=$R/e2e BIN=$B STEPS=4 bash bench/e2e/run.sh 1024x16 1024x32 > $R/e2e_unclipped.txt 2>&1 ;;
  esac
}
export -f work; export R B PART=$P
timeout 585 bash -c work
tar czf $OUT/b$P.tgz -C $OUT b$P && rm -rf $R
