#!/usr/bin/env bash
# Call K (any H100 or H200; carry .dev/e2e: this HEAD's slideformer, stripped): at 1024x16 with
# exact clipping at 1.0 the plan now splits the head's m and v too, and that plan ran 1.6 % and
# 3.5 % slower than the old one's (layers 0-31 only) in calls J2 and J3 (2026-12-07). The three
# splits in one call, alternating twice: the plan's choice (-1), the 32 layers alone (32), none
# (0); then a trace of the plan's choice (where the 16k step goes: the prediction is 1.19-1.33
# short there).
set -uo pipefail
R=$OUT/k; mkdir -p $R/traces
B=.dev/e2e
{ nvidia-smi -L; nproc; free -g; } > $R/machine.txt
work() {
  for round in 1 2; do
    for later in -1 32 0; do
      OUT=$R/later$later BIN=$B STEPS=5 CLIP=1.0 EXTRA="--moments-later $later" \
        bash bench/e2e/run.sh 1024x16 >> $R/e2e_later$later.txt 2>&1
    done
  done
  OUT=$R/traced BIN=$B STEPS=4 CLIP=1.0 TRACE_DIR=$R/traces bash bench/e2e/run.sh 1024x16 \
    > $R/e2e_traced.txt 2>&1
  for t in $R/traces/*.json; do
    python3 bench/e2e/trace_adam.py $t > ${t%.json}.adam.txt 2>&1
    python3 bench/e2e/trace_gaps.py $t --top 15 > ${t%.json}.gaps.txt 2>&1; gzip $t
  done
}
export -f work; export R B
timeout ${LIMIT:-480} bash -c work
tar czf $OUT/k.tgz -C $OUT k && rm -rf $R
