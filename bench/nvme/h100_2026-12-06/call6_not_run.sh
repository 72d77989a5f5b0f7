#!/usr/bin/env bash
# 1) GDS against io_uring for the NVMe checkpoints (udev record by hand; file registered before
#    unlink); 2) plan_large with m, v first.
set -uo pipefail
R=$OUT/res6; mkdir -p $R
B=.dev/e2e
{ nvidia-smi -L; nproc; free -g; } > $R/machine.txt
work() {
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
  BIN=$B OUT=$R/gds LAYERS=8 STEPS=3 timeout 110 bash bench/nvme/gds_h200.sh > $R/gds_summary.txt 2>&1
  cp /tmp/cufile.log $R/gds/ 2>/dev/null; cp cufile.log $R/gds/ 2>/dev/null
  ls -la /tmp/sf_gds > $R/gds/left_in_dir.txt 2>&1
  rm -rf /dev/shm/sf_gds_8
  [ -n "${LARGE:-}" ] && BIN=$B OUT=$R/large timeout 110 bash bench/nvme/plan_large.sh > $R/plans.txt 2>&1
}
export -f work; export R B
timeout 130 bash -c work
tar czf $OUT/res6.tgz -C $OUT res6 && rm -rf $R
