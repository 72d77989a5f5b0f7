#!/usr/bin/env bash
# Call P3 (any GPU; a fresh machine gets the CUDA tests and the checkpoint first; carry .dev/e2e):
# `plan` now prints the plan `train` allocates (the device's use taken once the backend exists,
# before the probe, as train's engine takes it). Under 12 GiB, where `plan`'s device peak was
# 5.3 % (1024x16, H100) and 5.5 % (1024x64, H200) above NVML's, then the five under 24 GiB, as
# many as the call's 520 s hold; then `plan` once more with the constants cached (no probe); last,
# plan and train of a small model with the checkpoints on NVMe, nvme_gds auto.
# After P1 on the same machine, warm: RUNS="12GiB:1024x16 12GiB:1024x64 12GiB:8192x8 12GiB:1024x8
# 12GiB:1024x32 12GiB:2048x32" (P1 ran the five at 24 GiB).
set -uo pipefail
R=$OUT/p3; mkdir -p $R
B=.dev/e2e; S0=$SECONDS; left() { echo $((520 - (SECONDS - S0))); }
if [ ! -f /tmp/sf_e2e/model/config.json ]; then
  { nvidia-smi -L; nproc; free -g; } > $R/machine.txt
  timeout 90 $B/sf_cuda_tests \
    --gtest_filter='*CudaGolden*:CudaOptimizer*:*NoAllocation*:*CudaResident*' > $R/cuda_tests.log 2>&1
  timeout 120 python3 bench/e2e/make_inputs.py /tmp/sf_e2e/model /tmp/sf_e2e/data.jsonl 32 \
    > $R/make_inputs.log 2>&1
  sync; sleep 5
fi
for run in ${RUNS:-12GiB:1024x16 12GiB:1024x64 24GiB:1024x8 12GiB:8192x8 24GiB:1024x64 \
                  24GiB:1024x16 24GiB:1024x32 24GiB:2048x32 12GiB:1024x8}; do
  cap=${run%%:*}; cfg=${run#*:}
  [ $(left) -gt 75 ] && timeout $(( $(left) - 15 )) env OUT=$R/e2e_$cap BIN=$B STEPS=3 GPU_MEM=$cap \
    bash bench/e2e/run.sh $cfg >> $R/e2e_$cap.txt 2>&1
done
SLIDEFORMER_MACHINE_FILE=/tmp/sf_e2e/machine.json timeout 30 $B/slideformer plan \
  --model /tmp/sf_e2e/model --data /tmp/sf_e2e/data.jsonl --steps 3 --batch-size 16 \
  --cutoff-len 1024 --lr 1e-5 --max-grad-norm 0 --gpu-memory 12GiB --backend cuda --no-cache \
  --no-save > $R/plan_cached_1024x16.log 2>&1
# `plan` with an NVMe tier and nvme_gds auto measures the checkpoints' two paths as train does:
# train's "plan:" block is then plan's (a small model: the check is the plan, not the speed)
N=/tmp/sf_nvme; mkdir -p $N/scratch
timeout 60 $B/slideformer init-model --out $N/m --layers 4 --hidden 512 --heads 8 --kv-heads 4 \
  --intermediate 1024 --vocab 128256 > $R/nvme_gds.log 2>&1
A="--model $N/m --data /tmp/sf_e2e/data.jsonl --steps 2 --batch-size 4 --cutoff-len 1024 \
  --lr 1e-5 --backend cuda --no-cache --no-save --nvme-dir $N/scratch --nvme-layers 2 \
  --nvme-checkpoints on --nvme-gds auto --machine-file $N/machine.json"
timeout 60 $B/slideformer plan $A > $R/nvme_gds.plan.log 2>&1
timeout 60 $B/slideformer train $A > $R/nvme_gds.train.log 2>&1
tar czf $OUT/p3.tgz -C $OUT p3 && rm -rf $R
