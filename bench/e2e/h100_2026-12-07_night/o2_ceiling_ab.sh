#!/usr/bin/env bash
# Call O2 (any GPU; ≈ 400 s on a fresh machine; carry .dev/e2e: slideformer of the HEAD of main,
# stripped, and .dev/e2e/pa/slideformer: the same with the host's ceiling taken from the probe's
# passes alone, branch ceiling-passes). The clipped 1024x8 was predicted 1.17 short on
# 2026-12-07 evening; replayed, the passes' ceiling brings it to 1.13 and may split fewer layers.
#  1. 1024x8 clipped with main's binary, traced (where the steps after the first go);
#  2. main's and the passes' binary alternating at 1024x8 clipped, then once each at 1024x16
#     clipped: each run's own measured / predicted, and each plan's split;
#  3. 8192x8 at 24 GiB unclipped (main's), where time is left.
set -uo pipefail
R=$OUT/o2; mkdir -p $R/traces
B=.dev/e2e
END=${END_S:-560}
left() { echo $((END - SECONDS)); }
{ nvidia-smi -L; nproc; free -g; } > $R/machine.txt
[ -f /tmp/sf_e2e/model/config.json ] ||
  timeout 150 python3 bench/e2e/make_inputs.py /tmp/sf_e2e/model /tmp/sf_e2e/data.jsonl 32 \
    > $R/make_inputs.log 2>&1
timeout $(( $(left) - 20 )) env OUT=$R/main BIN=$B STEPS=4 CLIP=1.0 TRACE_DIR=$R/traces \
  bash bench/e2e/run.sh 1024x8 >> $R/e2e_main.txt 2>&1
echo "after the trace: $(left) s left" >> $R/stages.txt
for cfg in 1024x8 1024x8 1024x16; do
  for arm in pa main; do
    [ $(left) -gt 60 ] || break 2
    bin=$B; [ $arm = pa ] && bin=$B/pa
    timeout $(( $(left) - 15 )) env OUT=$R/$arm BIN=$bin STEPS=4 CLIP=1.0 \
      bash bench/e2e/run.sh $cfg >> $R/e2e_$arm.txt 2>&1
  done
done
echo "after the A/B: $(left) s left" >> $R/stages.txt
[ $(left) -gt 75 ] && timeout $(( $(left) - 10 )) env OUT=$R/e2e BIN=$B STEPS=3 \
  bash bench/e2e/run.sh 8192x8 > $R/e2e_8192x8_24.txt 2>&1
echo "at the end: $(left) s left" >> $R/stages.txt
for t in $R/traces/*.json; do
  [ -f "$t" ] || continue
  timeout 20 python3 bench/e2e/trace_gaps.py $t --top 15 > ${t%.json}.gaps.txt 2>&1
  timeout 20 python3 bench/e2e/trace_adam.py $t > ${t%.json}.adam.txt 2>&1
  timeout 20 python3 bench/e2e/trace_layers.py $t $R/main/$(basename ${t%.json}).plan.log \
    > ${t%.json}.layers.txt 2>&1
  gzip $t
done
tar czf $OUT/o2.tgz -C $OUT o2 && rm -rf $R
