#!/usr/bin/env bash
# Call P1 (an H200 for the control, needs_h200: it takes ~106 GiB; on an H100 the rest runs and
# the control says it was not run; carry .dev/e2e: slideformer and sf_cuda_tests of this HEAD,
# stripped):
#  1. the CUDA golden cases, the optimizer's tests, NoAllocationInStep, the resident layers;
#  2. the issue's five at 24 GiB with this HEAD: `plan` now prints the plan `train` allocates
#     (engine_plan_request with the device's use once the backend exists, as train's engine
#     takes it), so run.sh's "predicted device" is that plan's figure against NVML's peak;
#  3. the PyTorch control at 1024x8 in the same call.
# The checkpoint is synced to disk before the probe: on 2026-12-07 the probe measured right
# after make_inputs wrote it gave host memcpy 52.5 GB/s against 90.1 three minutes later.
set -uo pipefail
R=$OUT/p1; mkdir -p $R
B=.dev/e2e
{ nvidia-smi -L; nproc; free -g; } > $R/machine.txt
timeout 90 $B/sf_cuda_tests \
  --gtest_filter='*CudaGolden*:CudaOptimizer*:*NoAllocation*:*CudaResident*' > $R/cuda_tests.log 2>&1
[ -f /tmp/sf_e2e/model/config.json ] ||
  timeout 120 python3 bench/e2e/make_inputs.py /tmp/sf_e2e/model /tmp/sf_e2e/data.jsonl 32 \
    > $R/make_inputs.log 2>&1
sync; sleep 5
five() { OUT=$R/e2e BIN=$B STEPS=4 bash bench/e2e/run.sh ${CONFIGS:-} > $R/e2e_24.txt 2>&1; }
export -f five; export R B CONFIGS
timeout ${FIVE_LIMIT:-300} bash -c five
if [ "$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)" -ge 130000 ]; then
  timeout 110 python3 bench/e2e/torch_control.py /tmp/sf_e2e/model 1024x8 4 > $R/torch_1024x8.txt 2>&1
else
  echo "not run: the control needs ~106 GiB, this GPU has less" > $R/torch_1024x8.txt
fi
tar czf $OUT/p1.tgz -C $OUT p1 && rm -rf $R
