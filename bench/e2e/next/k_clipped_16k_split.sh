#!/usr/bin/env bash
# Call K (any H100 or H200; carry .dev/e2e: this HEAD's slideformer, stripped): with exact clipping
# at 1.0 the plans of calls J2 and J3 (2026-12-07) split the head's m and v too, and at 16k that
# plan ran 1.6 % and 3.5 % slower than the old binary's (layers 0-31 only). The prediction of
# ab5a242 (post-norm passes sharing the host's ceiling with the uploads) chooses the layers alone
# again, at 16k and 32k. Measured here, alternating twice: 33 units (the layers and the head),
# 32 (the layers: now the plan's choice), 0 (none), at 1024x16 and 1024x32; then a trace of
# 1024x16 with the plan's choice (the prediction is 1.19-1.33 short there).
set -uo pipefail
R=$OUT/k; mkdir -p $R/traces
B=.dev/e2e
{ nvidia-smi -L; nproc; free -g; } > $R/machine.txt
work() {
  for round in 1 2; do
    for cfg in ${CONFIGS:-1024x16 1024x32}; do
      for later in 33 32 0; do
        OUT=$R/later$later BIN=$B STEPS=5 CLIP=1.0 EXTRA="--moments-later $later" \
          bash bench/e2e/run.sh $cfg >> $R/e2e_later$later.txt 2>&1
      done
    done
  done
  OUT=$R/traced BIN=$B STEPS=4 CLIP=1.0 TRACE_DIR=$R/traces bash bench/e2e/run.sh 1024x16 \
    > $R/e2e_traced.txt 2>&1
  for t in $R/traces/*.json; do
    python3 bench/e2e/trace_adam.py $t > ${t%.json}.adam.txt 2>&1
    python3 bench/e2e/trace_gaps.py $t --top 15 > ${t%.json}.gaps.txt 2>&1; gzip $t
  done
}
export -f work; export R B CONFIGS
timeout ${LIMIT:-570} bash -c work
tar czf $OUT/k.tgz -C $OUT k && rm -rf $R
