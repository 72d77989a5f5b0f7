#!/usr/bin/env bash
# Call G1 (an H200: the control needs ~106 GiB; carry .dev/e2e: slideformer, bench_adamw and
# sf_cuda_tests of this HEAD, stripped):
#  1. the AdamW's halves alone (the clipped update's master pass and moments pass, bench_adamw);
#  2. the CUDA golden cases with every host unit's m and v written later (moments_later), and the
#     CUDA optimizer's tests;
#  3. the five at 24 GiB, then the PyTorch control (everything on the GPU) at 1024x8.
set -uo pipefail
R=$OUT/g1; mkdir -p $R
B=.dev/e2e
{ nvidia-smi -L; nproc; free -g; } > $R/machine.txt
timeout 60 $B/bench_adamw 512 16 0 bf16 > $R/adamw_halves.txt 2>&1
timeout 90 $B/sf_cuda_tests --gtest_filter='*CudaGolden*_micro_later*:CudaOptimizer*' \
  > $R/cuda_tests.log 2>&1
five() { OUT=$R/e2e BIN=$B STEPS=4 bash bench/e2e/run.sh ${CONFIGS:-} > $R/e2e_24.txt 2>&1; }
export -f five; export R B CONFIGS
timeout ${FIVE_LIMIT:-300} bash -c five
timeout 110 python3 bench/e2e/torch_control.py /tmp/sf_e2e/model 1024x8 4 > $R/torch_1024x8.txt 2>&1
tar czf $OUT/g1.tgz -C $OUT g1 && rm -rf $R
