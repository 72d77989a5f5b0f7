#!/usr/bin/env bash
# Call N1 (any GPU; ≈ 250 s on a fresh machine; carry .dev/e2e: slideformer of this HEAD,
# stripped): the one prediction outside the 15 % on 2026-12-07 evening is 1024x8 clipped
# at 1.0 (1.17: steps of 1.83 s first, 2.33 s after). Its trace says where the steps after the
# first go. Then the same with 11 and 15 layers' m and v written later: a host ceiling from the
# probe's passes alone (replayed in docs/perf.md, not landed) would have the plan take 11, the
# current prediction takes 15.
set -uo pipefail
R=$OUT/n1; mkdir -p $R/traces
B=.dev/e2e
[ -f /tmp/sf_e2e/model/config.json ] ||
  timeout 100 python3 bench/e2e/make_inputs.py /tmp/sf_e2e/model /tmp/sf_e2e/data.jsonl 32 \
    > $R/make_inputs.log 2>&1
timeout ${LIMIT:-130} env OUT=$R/clip BIN=$B STEPS=4 CLIP=1.0 TRACE_DIR=$R/traces \
  bash bench/e2e/run.sh 1024x8 > $R/e2e_clip.txt 2>&1
for later in 11 15; do
  timeout 100 env OUT=$R/later$later BIN=$B STEPS=4 CLIP=1.0 EXTRA="--moments-later $later" \
    bash bench/e2e/run.sh 1024x8 >> $R/e2e_clip_later.txt 2>&1
done
for t in $R/traces/*.json; do
  [ -f "$t" ] || continue
  timeout 20 python3 bench/e2e/trace_gaps.py $t --top 15 > ${t%.json}.gaps.txt 2>&1
  timeout 20 python3 bench/e2e/trace_adam.py $t > ${t%.json}.adam.txt 2>&1
  gzip $t
done
tar czf $OUT/n1.tgz -C $OUT n1 && rm -rf $R
