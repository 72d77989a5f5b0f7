#!/usr/bin/env bash
# Session 30 call 1 (H200): CudaResidentLayers with clip 1.0, then B1 (the five at 24 GiB + the control).
set -uo pipefail
R=$OUT/c1; mkdir -p $R
B=.dev/e2e
{ nvidia-smi -L; nproc; free -g; git log -1 --format=%H 2>/dev/null; } > $R/machine.txt
work() {
  timeout 90 $B/sf_cuda_tests --gtest_filter='CudaResidentLayers*:NoAllocationInStep*:*CudaGolden*W2_micro_devopt*' > $R/cuda_tests.log 2>&1
  tail -3 $R/cuda_tests.log > $R/cuda_tests_tail.txt
  OUT=$R/e2e BIN=$B STEPS=4 bash bench/e2e/run.sh > $R/e2e_24.txt 2>&1
  timeout 200 python3 bench/e2e/torch_control.py /tmp/sf_e2e/model 1024x8 4 > $R/torch_1024x8.txt 2>&1
}
export -f work; export R B
timeout 580 bash -c work
tar czf $OUT/c1.tgz -C $OUT c1 && rm -rf $R
