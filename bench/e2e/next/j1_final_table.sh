#!/usr/bin/env bash
# Call J1 (an H200, needs_h200: the control takes ~106 GiB; carry .dev/e2e: slideformer,
# bench_adamw, sf_cuda_tests and bench_upload of this HEAD, stripped, and .dev/e2e/old/slideformer
# of 34fa1ab, before a ring piece was read once and before clipped units were summed on the GPU):
#  1. the CUDA golden cases (the clipped ones now form each host unit's Σ g² on the GPU before its
#     D2H), the optimizer's tests (sum_squares of BF16), NoAllocationInStep, the resident layers;
#  2. bench_adamw: a ring piece's update with Σ g² in a pass of its own against in the step;
#  3. the five at 24 GiB with this HEAD, then the PyTorch control at 1024x8.
set -uo pipefail
R=$OUT/j1; mkdir -p $R
B=.dev/e2e
{ nvidia-smi -L; nproc; free -g; } > $R/machine.txt
timeout 90 $B/sf_cuda_tests \
  --gtest_filter='*CudaGolden*:CudaOptimizer*:*NoAllocation*:*CudaResident*' > $R/cuda_tests.log 2>&1
timeout 40 $B/bench_adamw 512 16 0 bf16 > $R/adamw.txt 2>&1
five() { OUT=$R/e2e BIN=$B STEPS=4 bash bench/e2e/run.sh ${CONFIGS:-} > $R/e2e_24.txt 2>&1; }
export -f five; export R B CONFIGS
timeout ${FIVE_LIMIT:-300} bash -c five
timeout 110 python3 bench/e2e/torch_control.py /tmp/sf_e2e/model 1024x8 4 > $R/torch_1024x8.txt 2>&1
tar czf $OUT/j1.tgz -C $OUT j1 && rm -rf $R
