#!/usr/bin/env bash
# Call A (any GPU; rebuild and carry .dev/e2e first: `strip -o .dev/e2e/slideformer
# build/slideformer`, the same for sf_cuda_tests; copy this file into .dev/e2e).
# 1) The GPU-resident layers with clipping on CUDA (CudaResidentLayers' clip 1.0 cases have not
#    run on a GPU): if they pass, the plan may take layers with clipping too (plan.cpp, make_plan's
#    layer loop: `&& !r.clipping`); then time 1024x8 and 1024x16 at 70 GiB with CLIP=1.0, auto
#    against EXTRA="--device-optimizer all", in the call after (the CLI has no other way to ask
#    for layers with clipping).
# 2) Why 1024x8 at 70 GiB runs 1.18-1.20x its prediction: traces with 0, 3 (the plan's) and 6
#    held units. A model of the step by hand (every AdamW at the rate under copies, the AdamW idle
#    from the last held update to the first ring gradient) gives 1.39 s for 3 held (1.37 measured)
#    and ~1.2 s for 6; the predictor says 1.146 / 1.161 (it runs ring updates after the GPU's end
#    at the uncontended rate). The traces say which is right.
set -uo pipefail
R=$OUT/a; mkdir -p $R/traces
B=.dev/e2e
{ nvidia-smi -L; nproc; free -g; } > $R/machine.txt
work() {
  timeout 150 $B/sf_cuda_tests --gtest_filter='CudaResidentLayers*:NoAllocationInStep*:*CudaGolden*W2_micro_devopt*' > $R/cuda_tests.log 2>&1
  tail -3 $R/cuda_tests.log > $R/cuda_tests_tail.txt
  for held in 0 3 6; do
    mkdir -p $R/held$held
    OUT=$R/held$held BIN=$B STEPS=4 GPU_MEM=70GiB TRACE_DIR=$R/traces EXTRA="--held-gradients $held" \
      bash bench/e2e/run.sh 1024x8 > $R/e2e_70_held$held.txt 2>&1
    mv $R/traces/1024x8_70GiB_clip0.json $R/traces/held$held.json
  done
  for t in $R/traces/*.json; do python3 bench/e2e/trace_gaps.py $t --top 25 > ${t%.json}.gaps.txt 2>&1; gzip $t; done
}
export -f work; export R B
timeout 585 bash -c work
tar czf $OUT/a.tgz -C $OUT a && rm -rf $R
