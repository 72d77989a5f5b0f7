#!/usr/bin/env bash
# Call C2 (any GPU, after C1 on the same warm machine): the AdamW-bound 8k and 16k steps clipped
# and unclipped in one call, six steps each (C1's three gave one steady step), for item 7's
# clipped ≥ 0.9× the unclipped rate.
set -uo pipefail
R=$OUT/c2; mkdir -p $R
B=.dev/e2e; S0=$SECONDS
for run in 0:1024x8 1:1024x8 0:1024x16 1:1024x16; do
  clip=${run%%:*}; cfg=${run#*:}; left=$((540 - (SECONDS - S0)))
  [ $left -gt 75 ] && timeout $((left - 15)) env OUT=$R/e2e BIN=$B STEPS=6 CLIP=$clip \
    GPU_MEM=24GiB bash bench/e2e/run.sh $cfg >> $R/e2e_24.txt 2>&1
done
tar czf $OUT/c2.tgz -C $OUT c2 && rm -rf $R
