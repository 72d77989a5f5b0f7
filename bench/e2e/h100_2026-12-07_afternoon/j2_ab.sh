#!/usr/bin/env bash
# Call J2 (the machine of J1, still warm: /tmp/sf_e2e holds the checkpoint and this HEAD's
# constants): bench_upload (issue 12 item 2's "measure both": the fp32 DMA cast on the GPU against
# bf16 converted on the host, alone and beside the AdamW, 4 and 8 converting threads); then 34fa1ab
# (old, its own constants' cache) against this HEAD (new), alternating: unclipped 1024x8 and
# 1024x16 (a ring piece read once), clipped 1024x16 and 1024x32 (each host unit's Σ g² formed on
# the GPU), 24 GiB, as far as the time goes.
set -uo pipefail
R=$OUT/j2; mkdir -p $R
B=.dev/e2e
timeout 50 $B/bench_upload 2048 4 > $R/upload.txt 2>&1
timeout 50 $B/bench_upload 2048 8 >> $R/upload.txt 2>&1
work() {
  for item in ${ITEMS:-0:1024x8 0:1024x16 1.0:1024x16 1.0:1024x32}; do
    clip=${item%%:*}; cfg=${item#*:}
    for arm in old new; do
      b=$B; m=/tmp/sf_e2e/machine.json
      [ $arm = old ] && { b=$B/old; m=/tmp/sf_e2e/machine_old.json; }
      OUT=$R/$arm BIN=$b STEPS=4 CLIP=$clip SLIDEFORMER_MACHINE_FILE=$m \
        bash bench/e2e/run.sh $cfg >> $R/e2e_$arm.txt 2>&1
    done
  done
}
export -f work; export R B ITEMS
timeout ${LIMIT:-480} bash -c work
tar czf $OUT/j2.tgz -C $OUT j2 && rm -rf $R
