#!/usr/bin/env bash
# The NVMe configuration: 8B (32 layers) at 1024x16, --host-memory 48GiB: the new plan (m, v
# first) and the old one (--nvme-masters 32: whole state per layer) in the same call.
set -uo pipefail
R=$OUT/res4; mkdir -p $R
B=.dev/e2e
{ nvidia-smi -L; nproc; free -g; } > $R/machine.txt
work() {
  rm -rf /tmp/sf_e2e /dev/shm/sf_gds_8 /tmp/sf_nvme/* /tmp/sf_gds
  BIN=$B OUT=$R/new HOST_MEM=48GiB STEPS=2 timeout 230 bash bench/nvme/run_h200.sh 1024x16 > $R/new_summary.txt 2>&1
  BIN=$B OUT=$R/old HOST_MEM=48GiB STEPS=2 EXTRA="--nvme-masters 32" timeout 300 bash bench/nvme/run_h200.sh 1024x16 > $R/old_summary.txt 2>&1
}
export -f work; export R B
timeout 570 bash -c work
tar czf $OUT/res4.tgz -C $OUT res4 && rm -rf $R
