#!/usr/bin/env bash
# Call G2h (an H100 or H200 machine, whichever starts; carry .dev/e2e): the clipped update in two
# passes (moments_later, the plan's choice) against none (--moments-later 0) and the same
# configuration unclipped, same call, 24 GiB; with the AdamW's halves alone and the CUDA golden
# cases with every host unit's m and v written later. After 1024x32: 1024x8 unclipped with the
# held share of the plan (a quarter), half and three quarters of the host units (the AdamW idles
# in the forward at 8k; each quarter costs ~3.3 GiB of host), then 1024x16 and 2048x32 as far as
# the time goes.
set -uo pipefail
R=$OUT/g2h; mkdir -p $R
B=.dev/e2e
{ nvidia-smi -L; nproc; free -g; } > $R/machine.txt
timeout 60 $B/bench_adamw 512 16 0 bf16 > $R/adamw_halves.txt 2>&1
timeout 60 $B/sf_cuda_tests --gtest_filter='*CudaGolden*_micro_later*:CudaOptimizer*' \
  > $R/cuda_tests.log 2>&1
held() {
  for h in ${HELD_ARMS:--1 16 24}; do
    OUT=$R/held$h BIN=$B STEPS=4 EXTRA="--held-gradients $h" bash bench/e2e/run.sh 1024x8 \
      >> $R/e2e_1024x8_held.txt 2>&1
  done
}
work() {
  for cfg in ${CONFIGS:-1024x32 held 1024x16 2048x32}; do
    if [ $cfg = held ]; then held; continue; fi
    OUT=$R/later BIN=$B STEPS=4 CLIP=1.0 bash bench/e2e/run.sh $cfg >> $R/e2e_clip_later.txt 2>&1
    OUT=$R/none BIN=$B STEPS=4 CLIP=1.0 EXTRA="--moments-later 0" \
      bash bench/e2e/run.sh $cfg >> $R/e2e_clip_none.txt 2>&1
    [ $cfg = 2048x32 ] || OUT=$R/unclipped BIN=$B STEPS=4 bash bench/e2e/run.sh $cfg \
      >> $R/e2e_unclipped.txt 2>&1
  done
}
export -f work held; export R B CONFIGS HELD_ARMS
timeout ${LIMIT:-330} bash -c work
tar czf $OUT/g2h.tgz -C $OUT g2h && rm -rf $R
