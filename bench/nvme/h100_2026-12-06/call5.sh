#!/usr/bin/env bash
# A model whose 12 B/param exceed the machine (48 layers of the 8B shape, 11.5B) at 1024x8 with
# what the machine has: the new plan (m, v first), then the old (--nvme-masters 48), same call.
set -uo pipefail
R=$OUT/res5; mkdir -p $R
B=.dev/e2e
{ nvidia-smi -L; nproc; free -g; } > $R/machine.txt
work() {
  rm -rf /dev/shm/sf_e2e_32 /tmp/sf_nvme/*
  BIN=$B OUT=$R/new LAYERS=48 STEPS=2 timeout 260 bash bench/nvme/run_h200.sh 1024x8 > $R/new_summary.txt 2>&1
  rm -rf /tmp/sf_nvme/*
  BIN=$B OUT=$R/old LAYERS=48 STEPS=2 EXTRA="--nvme-masters 48" timeout 290 bash bench/nvme/run_h200.sh 1024x8 > $R/old_summary.txt 2>&1
}
export -f work; export R B
timeout 570 bash -c work
tar czf $OUT/res5.tgz -C $OUT res5 && rm -rf $R
