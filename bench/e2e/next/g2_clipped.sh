#!/usr/bin/env bash
# Call G2 (the machine of J1, still warm: /tmp/sf_e2e holds the checkpoint and the constants):
# exact clipping at 1.0, 24 GiB: the five with the plan's choice of m and v written later
# (moments_later; at 16k and 32k now the layers alone), each traced; then 1024x16 with the head's
# m and v written later too (--moments-later 33: J2's and J3's plan there), and 1024x16 and
# 1024x32 with none (--moments-later 0). The unclipped figures to divide by are J1's.
set -uo pipefail
R=$OUT/g2; mkdir -p $R/traces
B=.dev/e2e
work() {
  OUT=$R/later BIN=$B STEPS=4 CLIP=1.0 TRACE_DIR=$R/traces bash bench/e2e/run.sh ${CONFIGS:-} \
    > $R/e2e_clip_later.txt 2>&1
  OUT=$R/later33 BIN=$B STEPS=4 CLIP=1.0 EXTRA="--moments-later 33" \
    bash bench/e2e/run.sh 1024x16 > $R/e2e_clip_later33.txt 2>&1
  OUT=$R/none BIN=$B STEPS=4 CLIP=1.0 EXTRA="--moments-later 0" \
    bash bench/e2e/run.sh ${NONE_CONFIGS:-1024x16 1024x32} > $R/e2e_clip_none.txt 2>&1
}
export -f work; export R B CONFIGS NONE_CONFIGS
timeout ${LIMIT:-560} bash -c work
for t in $R/traces/*.json; do
  [ -f "$t" ] || continue
  timeout 30 python3 bench/e2e/trace_gaps.py $t --top 15 > ${t%.json}.gaps.txt 2>&1
  gzip $t
done
tar czf $OUT/g2.tgz -C $OUT g2 && rm -rf $R
