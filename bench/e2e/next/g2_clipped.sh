#!/usr/bin/env bash
# Call G2 (the machine of J1, still warm: /tmp/sf_e2e holds the checkpoint and the constants):
# exact clipping at 1.0, 24 GiB: the five with the plan's choice of m and v written later
# (moments_later), then 1024x16, 1024x32 and 2048x32 with none (--moments-later 0), same call.
# The unclipped figures to divide by are J1's (same machine).
set -uo pipefail
R=$OUT/g2; mkdir -p $R
B=.dev/e2e
work() {
  OUT=$R/later BIN=$B STEPS=4 CLIP=1.0 bash bench/e2e/run.sh ${CONFIGS:-} > $R/e2e_clip_later.txt 2>&1
  OUT=$R/none BIN=$B STEPS=4 CLIP=1.0 EXTRA="--moments-later 0" \
    bash bench/e2e/run.sh ${NONE_CONFIGS:-1024x32 1024x16 2048x32} > $R/e2e_clip_none.txt 2>&1
}
export -f work; export R B CONFIGS NONE_CONFIGS
timeout ${LIMIT:-560} bash -c work
tar czf $OUT/g2.tgz -C $OUT g2 && rm -rf $R
