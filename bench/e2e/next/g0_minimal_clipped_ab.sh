#!/usr/bin/env bash
# Call G0 (the least that measures the two-pass clipped update; any machine, carry .dev/e2e): the
# AdamW's halves alone, then 1024x32 clipped at 24 GiB with the plan's choice of m and v written
# later and with none (--moments-later 0), same call, 3 steps each.
set -uo pipefail
R=$OUT/g0; mkdir -p $R
B=.dev/e2e
{ nvidia-smi -L; nproc; free -g; } > $R/machine.txt
timeout 30 $B/bench_adamw 256 16 0 bf16 > $R/adamw_halves.txt 2>&1
work() {
  OUT=$R/later BIN=$B STEPS=3 CLIP=1.0 LAYERS=${LAYERS:-32} bash bench/e2e/run.sh 1024x32 > $R/e2e_clip_later.txt 2>&1
  OUT=$R/none BIN=$B STEPS=3 CLIP=1.0 EXTRA="--moments-later 0" bash bench/e2e/run.sh 1024x32 \
    > $R/e2e_clip_none.txt 2>&1
}
export -f work; export R B
timeout ${LIMIT:-190} bash -c work
tar czf $OUT/g0.tgz -C $OUT g0 && rm -rf $R
