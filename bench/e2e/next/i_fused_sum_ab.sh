#!/usr/bin/env bash
# Call I (an H100 or H200; carry .dev/e2e: this HEAD's slideformer, bench_adamw and sf_cuda_tests,
# bench_upload, stripped, and in .dev/e2e/old those of 34fa1ab, before the ring's Σ g² moved into the step):
#  1. bench_adamw: a ring piece's update with Σ g² in a pass of its own against in the step;
#  1b. bench_upload: fp32 DMA cast on the GPU against bf16 converted on the host, alone and beside
#      the AdamW (issue 12 item 2's "measure both"), with 4 and 8 converting threads;
#  2. the CUDA golden cases and optimizer tests with this HEAD (the worker's new path on CUDA);
#  3. unclipped 1024x8 and 1024x16 at 24 GiB, old then new, each with its own constants' cache,
#     alternating, as far as the time goes; then a trace of 1024x16 clipped with the plan's split.
set -uo pipefail
R=$OUT/i; mkdir -p $R/traces
B=.dev/e2e
{ nvidia-smi -L; nproc; free -g; } > $R/machine.txt
timeout 40 $B/bench_adamw 512 16 0 bf16 > $R/adamw.txt 2>&1
timeout 60 $B/bench_upload 2048 4 > $R/upload.txt 2>&1
timeout 60 $B/bench_upload 2048 8 >> $R/upload.txt 2>&1
timeout 60 $B/sf_cuda_tests --gtest_filter='*CudaGolden*:CudaOptimizer*:*NoAllocation*' \
  > $R/cuda_tests.log 2>&1
work() {
  for cfg in ${CONFIGS:-1024x8 1024x16 1024x8}; do
    for arm in old new; do
      b=$B; [ $arm = old ] && b=$B/old
      OUT=$R/$arm BIN=$b STEPS=4 SLIDEFORMER_MACHINE_FILE=/tmp/sf_e2e/machine_$arm.json \
        bash bench/e2e/run.sh $cfg >> $R/e2e_$arm.txt 2>&1
    done
  done
  OUT=$R/clip BIN=$B STEPS=4 CLIP=1.0 TRACE_DIR=$R/traces SLIDEFORMER_MACHINE_FILE=/tmp/sf_e2e/machine_new.json \
    bash bench/e2e/run.sh 1024x16 >> $R/e2e_clip_traced.txt 2>&1
  for t in $R/traces/*.json; do
    python3 bench/e2e/trace_adam.py $t > ${t%.json}.adam.txt 2>&1
    python3 bench/e2e/trace_gaps.py $t --top 15 > ${t%.json}.gaps.txt 2>&1; gzip $t
  done
}
export -f work; export R B CONFIGS
timeout ${LIMIT:-280} bash -c work
tar czf $OUT/i.tgz -C $OUT i && rm -rf $R
