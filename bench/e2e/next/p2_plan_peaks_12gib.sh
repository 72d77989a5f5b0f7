#!/usr/bin/env bash
# Call P2 (the machine of P1, warm, or a fresh one: then the CUDA tests and the checkpoint first;
# carry .dev/e2e): the five and 8192x8 at 12 GiB, where
# `plan`'s device peak was 5.3 % (1024x16, H100) and 5.5 % (1024x64, H200) above NVML's before
# it printed the engine's plan (the device's use taken once the backend exists, before the probe,
# as train's engine takes it); then `plan` once more for 1024x16 with the constants cached (no
# probe): the same plan.
set -uo pipefail
R=$OUT/p2; mkdir -p $R
B=.dev/e2e; S0=$SECONDS; left() { echo $((560 - (SECONDS - S0))); }
if [ ! -f /tmp/sf_e2e/model/config.json ]; then
  { nvidia-smi -L; nproc; free -g; } > $R/machine.txt
  timeout 90 $B/sf_cuda_tests \
    --gtest_filter='*CudaGolden*:CudaOptimizer*:*NoAllocation*:*CudaResident*' > $R/cuda_tests.log 2>&1
  timeout 120 python3 bench/e2e/make_inputs.py /tmp/sf_e2e/model /tmp/sf_e2e/data.jsonl 32 \
    > $R/make_inputs.log 2>&1
  sync; sleep 5
fi
for cfg in 1024x16 1024x64 1024x8 1024x32 2048x32 8192x8; do
  [ $(left) -gt 70 ] && timeout $(( $(left) - 10 )) env OUT=$R/e2e12 BIN=$B STEPS=3 GPU_MEM=12GiB \
    bash bench/e2e/run.sh $cfg >> $R/e2e_12.txt 2>&1
done
SLIDEFORMER_MACHINE_FILE=/tmp/sf_e2e/machine.json $B/slideformer plan --model /tmp/sf_e2e/model \
  --data /tmp/sf_e2e/data.jsonl --steps 3 --batch-size 16 --cutoff-len 1024 --lr 1e-5 \
  --max-grad-norm 0 --gpu-memory 12GiB --backend cuda --no-cache --no-save > $R/plan_cached_1024x16.log 2>&1
tar czf $OUT/p2.tgz -C $OUT p2 && rm -rf $R
