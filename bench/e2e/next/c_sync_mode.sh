#!/usr/bin/env bash
# Call C (any GPU; rebuild and carry .dev/e2e: slideformer and sf_cuda_tests, stripped). Host waits
# that spin (CUDA's default, ours too) against blocking ones (SF_CUDA_SYNC=blocking): 1024x8 and
# 1024x16 at 24 GiB, each arm with its own machine-constant cache, traced at 8k (the CPU AdamW's
# rate inside the step: bench/e2e/trace_adam.py), and the CUDA resident-layer and golden tests. If
# blocking wins, make it the default (src/backend/cuda/cuda_backend.cu, set_sync_mode).
set -uo pipefail
R=$OUT/c; mkdir -p $R/traces
B=.dev/e2e
{ nvidia-smi -L; nproc; free -g; lscpu | grep -E "^CPU\(s\)|Thread|Core|Socket|NUMA"; } > $R/machine.txt
work() {
  timeout 60 $B/sf_cuda_tests --gtest_filter='CudaResidentLayers*:NoAllocationInStep*:*CudaGolden*W2_micro*' > $R/cuda_tests.log 2>&1
  tail -3 $R/cuda_tests.log > $R/cuda_tests_tail.txt
  for cfg in 1024x8 1024x16; do
    for mode in spin blocking; do
      mkdir -p $R/$mode
      tr=""; [ $cfg = 1024x8 ] && tr=$R/traces
      SF_CUDA_SYNC=$mode SLIDEFORMER_MACHINE_FILE=/tmp/sf_e2e/machine_$mode.json OUT=$R/$mode BIN=$B STEPS=4 TRACE_DIR=$tr \
        bash bench/e2e/run.sh $cfg >> $R/e2e_$mode.txt 2>&1
      [ -n "$tr" ] && mv $R/traces/${cfg}_24GiB_clip0.json $R/traces/${mode}_$cfg.json
    done
  done
  for t in $R/traces/*.json; do python3 bench/e2e/trace_adam.py $t > ${t%.json}.adam.txt 2>&1; python3 bench/e2e/trace_gaps.py $t --top 10 > ${t%.json}.gaps.txt 2>&1; gzip $t; done
}
export -f work; export R B
timeout 330 bash -c work
tar czf $OUT/c.tgz -C $OUT c && rm -rf $R
