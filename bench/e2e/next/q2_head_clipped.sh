#!/usr/bin/env bash
# Call Q2 (any GPU; carry .dev/e2e of this HEAD): with clipping a GPU-resident unit keeps its
# gradient in bf16 (the head's beside its state, as a layer's), so under 24 GiB the clipped 8k and
# 16k plans hold the head beside the embedding (M 8192), 32k layers 0-1 and 64k layer 0 (no head).
#  1. the CUDA tests: AdamW from a bf16 gradient bit-identical with the CPU's; the golden cases
#     with clipping and a GPU-resident share; CudaResidentLayers (clipped: bf16 kept gradients);
#  2. 1024x16 and 1024x8 clipped and unclipped alternating at 24 GiB (C2, 2026-12-07 late: clipped
#     / unclipped 0.862 and 0.918; predicted now from C2's constants 16k 2.374 -> 2.256 s, 8k
#     2.007 -> 1.884 s); then 1024x64 and 1024x32 clipped. NVML against the plan's device figure,
#     now with 256 MiB for the libraries' growth.
#     Session 40: the slots' gradient and stages inside the outer gradients (CudaSlotsInOuter in
#     the tests; layer 0 on the device at M 8192), and unclipped `train` weighs micro-batches below
#     8192 (weigh_micro_batch): at 8k and 16k M 2048 takes layers 0-1 onto the device and the freed
#     host bytes hold layers 19-31 / 12-31 (predicted from C2's constants 1.959 -> 1.699 s and
#     2.120 -> 1.842 s). Each unclipped run has its pair with `--micro-batch-tokens 8192` (M given: nothing
#     weighed), a run entry's third field (CLIP:CONFIG:M).
set -uo pipefail
R=$OUT/q2; mkdir -p $R
B=.dev/e2e; S0=$SECONDS
timeout 90 $B/sf_cuda_tests \
  --gtest_filter='*CudaGolden*:CudaOptimizer*:*NoAllocation*:*CudaResident*:CudaSlotsInOuter*' > $R/cuda_tests.log 2>&1
tail -3 $R/cuda_tests.log
[ -f /tmp/sf_e2e/model/config.json ] ||
  timeout 120 python3 bench/e2e/make_inputs.py /tmp/sf_e2e/model /tmp/sf_e2e/data.jsonl 32 \
    > $R/make_inputs.log 2>&1
for run in ${RUNS:-1:1024x16 0:1024x16 0:1024x16:8192 1:1024x8 0:1024x8 0:1024x8:8192 1:1024x64}; do
  IFS=: read -r clip cfg m <<< "$run"; left=$((${LIMIT:-540} - (SECONDS - S0)))
  [ $left -gt 75 ] && timeout $((left - 10)) env OUT=$R/e2e BIN=$B STEPS=${STEPS:-5} CLIP=$clip \
    GPU_MEM=24GiB ${m:+EXTRA="--micro-batch-tokens $m" TAG=m$m} bash bench/e2e/run.sh $cfg \
    >> $R/e2e_24.txt 2>&1
done
cat $R/e2e_24.txt
tar czf $OUT/q2.tgz -C $OUT q2 && rm -rf $R
