#!/usr/bin/env bash
# Call J3 (an H100 when no H200 starts; carry .dev/e2e as for J1): the five at 24 GiB with
# this HEAD (no control: it needs ~106 GiB), then exact clipping at 1.0, 1024x32 and 1024x16,
# this HEAD (new, each held unit's Σ g² formed on the GPU) against 34fa1ab (old, its own constants'
# cache), new first, alternating twice: call J2 had new 3 % slower at 32k clipped from one run each;
# then a trace of the new 1024x32 clipped.
set -uo pipefail
R=$OUT/j3; mkdir -p $R/traces
B=.dev/e2e
{ nvidia-smi -L; nproc; free -g; } > $R/machine.txt
work() {
  OUT=$R/e2e BIN=$B STEPS=4 bash bench/e2e/run.sh > $R/e2e_24.txt 2>&1
  for item in ${ITEMS:-1.0:1024x32 1.0:1024x16 1.0:1024x32}; do
    clip=${item%%:*}; cfg=${item#*:}
    for arm in new old; do
      b=$B; m=/tmp/sf_e2e/machine.json
      [ $arm = old ] && { b=$B/old; m=/tmp/sf_e2e/machine_old.json; }
      OUT=$R/$arm BIN=$b STEPS=5 CLIP=$clip SLIDEFORMER_MACHINE_FILE=$m \
        bash bench/e2e/run.sh $cfg >> $R/e2e_$arm.txt 2>&1
    done
  done
  OUT=$R/traced BIN=$B STEPS=4 CLIP=1.0 TRACE_DIR=$R/traces bash bench/e2e/run.sh 1024x32 \
    > $R/e2e_traced.txt 2>&1
  for t in $R/traces/*.json; do
    python3 bench/e2e/trace_gaps.py $t --top 15 > ${t%.json}.gaps.txt 2>&1; gzip $t
  done
}
export -f work; export R B ITEMS
timeout ${LIMIT:-540} bash -c work
tar czf $OUT/j3.tgz -C $OUT j3 && rm -rf $R
