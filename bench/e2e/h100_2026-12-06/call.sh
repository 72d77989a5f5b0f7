#!/usr/bin/env bash
# One call: CUDA tests (state pieces), e2e 1024x16 + 1024x32 at 24 GiB (host peaks), the NVMe probe's
# mixed rate through `plan`, then GDS with a udev record made by hand.
set -uo pipefail
R=$OUT/res; mkdir -p $R
B=.dev/e2e
nvidia-smi -L > $R/machine.txt; nproc >> $R/machine.txt; free -g >> $R/machine.txt
work() {
  rm -rf /dev/shm/sf_e2e_16 /tmp/sf_nvme/*
  timeout 120 $B/sf_cuda_tests --gtest_filter='*CudaGolden*devopt*:CudaOptimizer*:NoAllocationInStep*' > $R/cuda_tests.log 2>&1
  tail -5 $R/cuda_tests.log > $R/cuda_tests_tail.txt
  OUT=$R/e2e BIN=$B STEPS=4 bash bench/e2e/run.sh 1024x16 1024x32 > $R/e2e_24.txt 2>&1
  mkdir -p /tmp/sf_nvme
  timeout 60 $B/slideformer plan --model /tmp/sf_e2e/model --data /tmp/sf_e2e/data.jsonl --batch-size 16 \
    --cutoff-len 1024 --max-grad-norm 0 --gpu-memory 24GiB --backend cuda --host-memory 48GiB \
    --nvme-dir /tmp/sf_nvme > $R/nvme_plan.txt 2>&1
  {
    src=$(findmnt -no SOURCE -T /tmp); fstype=$(findmnt -no FSTYPE -T /tmp)
    echo "mount source $src type $fstype; uid $(id -u)"
    for name in $(basename "$src") $(lsblk -no PKNAME "$src" 2>/dev/null); do
      mm=$(cat /sys/class/block/$name/dev 2>/dev/null) || continue
      mkdir -p /run/udev/data
      printf 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=%s\n' "$fstype" > /run/udev/data/b$mm
      echo "wrote /run/udev/data/b$mm for $name"; cat /run/udev/data/b$mm
    done
  } > $R/gds_udev.txt 2>&1
  BIN=$B OUT=$R/gds LAYERS=8 STEPS=3 timeout 170 bash bench/nvme/gds_h200.sh > $R/gds_summary.txt 2>&1
  cp /tmp/cufile.log $R/gds/ 2>/dev/null; cp cufile.log $R/gds/ 2>/dev/null
}
export -f work; export R B
timeout 550 bash -c work
tar czf $OUT/res.tgz -C $OUT res && rm -rf $R
