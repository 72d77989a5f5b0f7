#!/usr/bin/env bash
# Call G3 (the machine of J1/G2, still warm): the five at --gpu-memory 12GiB, and 8192x8 at 24 GiB
# and 12 GiB (the "fixed for any batch").
set -uo pipefail
R=$OUT/g3; mkdir -p $R
B=.dev/e2e
work() {
  OUT=$R/e2e BIN=$B STEPS=3 GPU_MEM=12GiB bash bench/e2e/run.sh ${CONFIGS:-} > $R/e2e_12.txt 2>&1
  OUT=$R/e2e BIN=$B STEPS=3 bash bench/e2e/run.sh 8192x8 > $R/e2e_8192x8_24.txt 2>&1
  OUT=$R/e2e BIN=$B STEPS=3 GPU_MEM=12GiB bash bench/e2e/run.sh 8192x8 > $R/e2e_8192x8_12.txt 2>&1
}
export -f work; export R B CONFIGS
timeout ${LIMIT:-570} bash -c work
tar czf $OUT/g3.tgz -C $OUT g3 && rm -rf $R
