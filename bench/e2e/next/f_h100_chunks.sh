#!/usr/bin/env bash
# Call F (an H100 machine; carry .dev/e2e as for call D): the thread pool's chunks against static
# shares on the machine kind whose probe measured the AdamW beside copies lowest (2.2-2.5 G
# params/s): 1024x8 at 24 GiB, the old binary then the new, each with its own constants.
set -uo pipefail
R=$OUT/f; mkdir -p $R
B=.dev/e2e
{ nvidia-smi -L; nproc; free -g; } > $R/machine.txt
ab() {
  for arm in static_spin dynamic_spin; do
    bin=$B; [ $arm = static_spin ] && bin=$B/old
    mkdir -p $R/$arm
    SLIDEFORMER_MACHINE_FILE=/tmp/sf_e2e/machine_$arm.json OUT=$R/$arm BIN=$bin STEPS=4 \
      bash bench/e2e/run.sh 1024x8 >> $R/e2e_$arm.txt 2>&1
  done
}
export -f ab; export R B
timeout 140 bash -c ab
tar czf $OUT/f.tgz -C $OUT f && rm -rf $R
