#!/usr/bin/env bash
# The fixed GPU-resident layers: CUDA tests; 1024x8 at 70 GiB (prediction); 1024x64 at 24 GiB with
# and without clipping, same call.
set -uo pipefail
R=$OUT/res10; mkdir -p $R
B=.dev/e2e
{ nvidia-smi -L; nproc; free -g; } > $R/machine.txt
work() {
  timeout 100 $B/sf_cuda_tests --gtest_filter='CudaResidentLayers*:NoAllocationInStep*' > $R/cuda_tests.log 2>&1
  tail -3 $R/cuda_tests.log > $R/cuda_tests_tail.txt
  OUT=$R/e2e BIN=$B STEPS=4 GPU_MEM=70GiB bash bench/e2e/run.sh 1024x8 > $R/e2e_70_auto.txt 2>&1
  OUT=$R/e2e BIN=$B STEPS=3 CLIP=1.0 bash bench/e2e/run.sh 1024x64 > $R/e2e_clip1.txt 2>&1
  OUT=$R/e2e BIN=$B STEPS=3 bash bench/e2e/run.sh 1024x64 > $R/e2e_clip0.txt 2>&1
}
export -f work; export R B
timeout 400 bash -c work
tar czf $OUT/res10.tgz -C $OUT res10 && rm -rf $R
