#!/usr/bin/env bash
# Call E (an H200: the control needs ~106 GiB; carry .dev/e2e: slideformer of this HEAD, stripped):
# the five at 24 GiB with the thread pool's chunks and the overlapped start-up, then the
# PyTorch control (everything on the GPU) at 1024x8 in the same call, then 1024x8 at 12 GiB.
set -uo pipefail
R=$OUT/e; mkdir -p $R
B=.dev/e2e
{ nvidia-smi -L; nproc; free -g; } > $R/machine.txt
five() { OUT=$R/e2e BIN=$B STEPS=4 bash bench/e2e/run.sh > $R/e2e_24.txt 2>&1; }
export -f five; export R B
timeout 330 bash -c five
timeout 130 python3 bench/e2e/torch_control.py /tmp/sf_e2e/model 1024x8 4 > $R/torch_1024x8.txt 2>&1
timeout 60 bash -c 'OUT=$R/e2e BIN=$B STEPS=3 GPU_MEM=12GiB bash bench/e2e/run.sh 1024x8 > $R/e2e_12.txt 2>&1'
tar czf $OUT/e.tgz -C $OUT e && rm -rf $R
