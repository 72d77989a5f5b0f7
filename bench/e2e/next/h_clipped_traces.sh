#!/usr/bin/env bash
# Call H (an H100 or H200; carry .dev/e2e): where the clipped step's time goes with the update in
# two passes. Traces of 1024x32 and 1024x16 clipped at 24 GiB with the plan's split
# (moments_later), and of 1024x16 with none, read by trace_adam.py (each kind of AdamW span: rate and when in the step) and
# trace_gaps.py; then 1024x8 clipped, split against none, and unclipped, untraced.
set -uo pipefail
R=$OUT/h; mkdir -p $R/traces
B=.dev/e2e
{ nvidia-smi -L; nproc; free -g; } > $R/machine.txt
work() {
  for run in ${TRACED:-1024x32:later 1024x16:later 1024x16:none}; do
    cfg=${run%:*}; arm=${run#*:}; x=""; [ $arm = none ] && x="--moments-later 0"
    OUT=$R/$arm BIN=$B STEPS=4 CLIP=1.0 TRACE_DIR=$R/traces EXTRA="$x" bash bench/e2e/run.sh $cfg \
      >> $R/e2e_traced.txt 2>&1
    t=$R/traces/${cfg}_$arm.json; mv $R/traces/${cfg}_24GiB_clip1.0.json $t
    python3 bench/e2e/trace_adam.py $t > ${t%.json}.adam.txt 2>&1
    python3 bench/e2e/trace_gaps.py $t --top 15 > ${t%.json}.gaps.txt 2>&1; gzip $t
  done
  for cfg in ${CONFIGS:-1024x8}; do
    OUT=$R/later BIN=$B STEPS=4 CLIP=1.0 bash bench/e2e/run.sh $cfg >> $R/e2e_clip_later.txt 2>&1
    OUT=$R/none BIN=$B STEPS=4 CLIP=1.0 EXTRA="--moments-later 0" bash bench/e2e/run.sh $cfg \
      >> $R/e2e_clip_none.txt 2>&1
    OUT=$R/unclipped BIN=$B STEPS=4 bash bench/e2e/run.sh $cfg >> $R/e2e_unclipped.txt 2>&1
  done
}
export -f work; export R B CONFIGS TRACED
timeout ${LIMIT:-330} bash -c work
tar czf $OUT/h.tgz -C $OUT h && rm -rf $R
