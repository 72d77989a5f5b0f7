#!/usr/bin/env bash
# Call Q1 (any GPU; carry .dev/e2e of this HEAD): the layers on the device where the head does not
# fit (clipping at 24 GiB), and the libraries' growth counted in the plan.
#  1. the CUDA tests: CudaResidentLayers now has layers 0-1 on the device with the head on the host
#     and two host layers' m and v later; the golden cases, the optimizer's, NoAllocationInStep;
#  2. 1024x16 and 1024x8 clipped at 24 GiB: the plan takes layer 0 beside the embedding (C2 on
#     2026-12-07 late: the embedding alone, 6,715 and 3,818 tok/s); NVML's peak against the plan's
#     device figure, now with 256 MiB for the libraries' growth (predicted ≈ 1.00, was 0.982-0.991).
set -uo pipefail
R=$OUT/q1; mkdir -p $R
B=.dev/e2e; S0=$SECONDS
timeout 90 $B/sf_cuda_tests \
  --gtest_filter='*CudaGolden*:CudaOptimizer*:*NoAllocation*:*CudaResident*' > $R/cuda_tests.log 2>&1
[ -f /tmp/sf_e2e/model/config.json ] ||
  timeout 120 python3 bench/e2e/make_inputs.py /tmp/sf_e2e/model /tmp/sf_e2e/data.jsonl 32 \
    > $R/make_inputs.log 2>&1
for cfg in ${CONFIGS:-1024x16 1024x8}; do
  left=$((${LIMIT:-420} - (SECONDS - S0)))
  [ $left -gt 60 ] && timeout $((left - 10)) env OUT=$R/e2e BIN=$B STEPS=4 CLIP=1 GPU_MEM=24GiB \
    bash bench/e2e/run.sh $cfg >> $R/e2e_24_clip1.txt 2>&1
done
tar czf $OUT/q1.tgz -C $OUT q1 && rm -rf $R
