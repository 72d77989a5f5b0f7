#!/usr/bin/env bash
# Call J1 (an H200, needs_h200: the control takes ~106 GiB; carry .dev/e2e: slideformer,
# sf_cuda_tests and bench_layer of this HEAD, stripped):
#  1. the CUDA golden cases, the optimizer's tests, NoAllocationInStep, the resident layers (the
#     Σ g² slots of device and held units now shared, DeviceParts, e1acdb1: not yet run on a GPU);
#  2. bench_layer: the probe's layer timing after 0-8 s back to back, the SM clock and power
#     sampled beside it (in J3's trace a step's layer ran 4 % / 12 % slower than the cold probe);
#  3. the five at 24 GiB with this HEAD (the probe now times a hot layer), then the
#     PyTorch control at 1024x8.
set -uo pipefail
R=$OUT/j1; mkdir -p $R
B=.dev/e2e
{ nvidia-smi -L; nproc; free -g; } > $R/machine.txt
timeout 90 $B/sf_cuda_tests \
  --gtest_filter='*CudaGolden*:CudaOptimizer*:*NoAllocation*:*CudaResident*' > $R/cuda_tests.log 2>&1
[ -f /tmp/sf_e2e/model/config.json ] ||
  timeout 120 python3 bench/e2e/make_inputs.py /tmp/sf_e2e/model /tmp/sf_e2e/data.jsonl 32 \
    > $R/make_inputs.log 2>&1
sleep 10  # the GPU cools
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader,nounits -lms 100 \
  > $R/bench_layer.smi.txt &
smi=$!
timeout 90 $B/bench_layer /tmp/sf_e2e/model 16384 1024 > $R/bench_layer.txt 2>&1
kill $smi
five() { OUT=$R/e2e BIN=$B STEPS=4 bash bench/e2e/run.sh ${CONFIGS:-} > $R/e2e_24.txt 2>&1; }
export -f five; export R B CONFIGS
timeout ${FIVE_LIMIT:-300} bash -c five
if [ "$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)" -ge 130000 ]; then
  timeout 110 python3 bench/e2e/torch_control.py /tmp/sf_e2e/model 1024x8 4 > $R/torch_1024x8.txt 2>&1
else
  echo "not run: the control needs ~106 GiB, this GPU has less" > $R/torch_1024x8.txt
fi
tar czf $OUT/j1.tgz -C $OUT j1 && rm -rf $R
