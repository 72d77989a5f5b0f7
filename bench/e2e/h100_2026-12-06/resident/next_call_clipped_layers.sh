#!/usr/bin/env bash
# Next session (rebuild binaries first): the GPU-resident layers with clipping on CUDA (tests),
# and timed: 1024x8 and 1024x16 at 70 GiB with clipping, auto (layers) against all (outer only).
set -uo pipefail
R=$OUT/res12; mkdir -p $R
B=.dev/e2e
{ nvidia-smi -L; nproc; free -g; } > $R/machine.txt
work() {
  timeout 120 $B/sf_cuda_tests --gtest_filter='CudaResidentLayers*:NoAllocationInStep*:*CudaGolden*W2_micro_devopt*' > $R/cuda_tests.log 2>&1
  tail -3 $R/cuda_tests.log > $R/cuda_tests_tail.txt
  OUT=$R/e2e BIN=$B STEPS=4 GPU_MEM=70GiB CLIP=1.0 bash bench/e2e/run.sh 1024x8 1024x16 > $R/e2e_70_auto_clip.txt 2>&1
  mkdir -p $R/all; OUT=$R/all BIN=$B STEPS=4 GPU_MEM=70GiB CLIP=1.0 EXTRA="--device-optimizer all" bash bench/e2e/run.sh 1024x8 1024x16 > $R/e2e_70_all_clip.txt 2>&1
}
export -f work; export R B
timeout 560 bash -c work
tar czf $OUT/res12.tgz -C $OUT res12 && rm -rf $R
