#!/usr/bin/env bash
# 1) CUDA tests of the GPU-resident layers (tracking, no allocation in steps, golden devopt);
# 2) 8B 1024x8 and 1024x64 at --gpu-memory 70GiB: auto (embedding, head, layers 0-18) against
#    --device-optimizer all (embedding and head only) — the same budget, same call; 1024x8 at 24 GiB;
# 3) 1024x64 with clipping at 24 GiB (does it fit the host now); 4) a trace of 1024x32 at 24 GiB.
set -uo pipefail
R=$OUT/res9; mkdir -p $R/traces
B=.dev/e2e
{ nvidia-smi -L; nproc; free -g; } > $R/machine.txt
work() {
  timeout 150 $B/sf_cuda_tests --gtest_filter='CudaResidentLayers*:NoAllocationInStep*:*CudaGolden*W2_micro_devopt*:CudaOptimizer*' > $R/cuda_tests.log 2>&1
  tail -3 $R/cuda_tests.log > $R/cuda_tests_tail.txt
  OUT=$R/e2e BIN=$B STEPS=4 GPU_MEM=70GiB bash bench/e2e/run.sh 1024x8 1024x64 > $R/e2e_70_auto.txt 2>&1
  mkdir -p $R/all; OUT=$R/all BIN=$B STEPS=4 GPU_MEM=70GiB EXTRA="--device-optimizer all" bash bench/e2e/run.sh 1024x8 1024x64 > $R/e2e_70_all.txt 2>&1
  OUT=$R/e2e BIN=$B STEPS=4 bash bench/e2e/run.sh 1024x8 > $R/e2e_24.txt 2>&1
  OUT=$R/e2e BIN=$B STEPS=4 CLIP=1.0 bash bench/e2e/run.sh 1024x64 > $R/e2e_clip1.txt 2>&1
  OUT=$R/e2e BIN=$B STEPS=4 TRACE_DIR=$R/traces bash bench/e2e/run.sh 1024x32 > $R/e2e_traced.txt 2>&1
  for t in $R/traces/*.json; do python3 bench/e2e/trace_gaps.py $t --top 25 > ${t%.json}.gaps.txt 2>&1; gzip $t; done
}
export -f work; export R B
timeout 585 bash -c work
tar czf $OUT/res9.tgz -C $OUT res9 && rm -rf $R
