#!/usr/bin/env bash
# NVMe tier: m and v first (new auto plan) against whole state per layer (--nvme-masters = layers,
# the old plan), 16 layers of the 8B shape at 32 GiB host, same call; and the CUDA exactness check.
set -uo pipefail
R=$OUT/res3; mkdir -p $R
B=.dev/e2e
{ nvidia-smi -L; nproc; free -g; } > $R/machine.txt
work() {
  SLIDEFORMER=$B/slideformer timeout 120 bash tests/train/check_nvme_cuda.sh > $R/check_nvme_cuda.log 2>&1
  echo "rc $?" >> $R/check_nvme_cuda.log
  BIN=$B OUT=$R/new LAYERS=16 HOST_MEM=32GiB STEPS=2 timeout 200 bash bench/nvme/run_h200.sh 1024x16 > $R/new_summary.txt 2>&1
  BIN=$B OUT=$R/old LAYERS=16 HOST_MEM=32GiB STEPS=2 EXTRA="--nvme-masters 16" timeout 200 bash bench/nvme/run_h200.sh 1024x16 > $R/old_summary.txt 2>&1
}
export -f work; export R B
timeout 560 bash -c work
tar czf $OUT/res3.tgz -C $OUT res3 && rm -rf $R
