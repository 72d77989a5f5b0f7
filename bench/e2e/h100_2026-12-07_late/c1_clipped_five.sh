#!/usr/bin/env bash
# Call C1 (any GPU, after P3 on the same warm machine: its unclipped five at 24 GiB are the
# reference, measured minutes before on this host): the five at 24 GiB with exact
# clipping at 1.0 (item 7: ≥ 0.9× the unclipped rates), the HEAD's binary (carry .dev/e2e).
set -uo pipefail
R=$OUT/c1; mkdir -p $R
B=.dev/e2e
[ -f /tmp/sf_e2e/model/config.json ] ||
  timeout 120 python3 bench/e2e/make_inputs.py /tmp/sf_e2e/model /tmp/sf_e2e/data.jsonl 32 \
    > $R/make_inputs.log 2>&1
S0=$SECONDS
for cfg in ${CONFIGS:-1024x16 1024x32 1024x8 1024x64 2048x32}; do
  left=$((540 - (SECONDS - S0)))
  [ $left -gt 75 ] && timeout $((left - 15)) env OUT=$R/e2e BIN=$B STEPS=3 CLIP=1 GPU_MEM=24GiB \
    bash bench/e2e/run.sh $cfg >> $R/e2e_24_clip1.txt 2>&1
done
tar czf $OUT/c1.tgz -C $OUT c1 && rm -rf $R
