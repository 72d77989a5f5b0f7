#!/usr/bin/env bash
# 1) GDS against io_uring (udev record by hand; file registered before unlink);
# 2) e2e 8B at 24 GiB: 1024x64 (host peak with the held share weighed), 1024x8 and 1024x16 (prediction).
set -uo pipefail
R=$OUT/res7; mkdir -p $R
B=.dev/e2e
{ nvidia-smi -L; nproc; free -g; } > $R/machine.txt
gds() {
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
  BIN=$B OUT=$R/gds LAYERS=8 STEPS=3 timeout 120 bash bench/nvme/gds_h200.sh > $R/gds_summary.txt 2>&1
  cp /tmp/cufile.log $R/gds/ 2>/dev/null; cp cufile.log $R/gds/ 2>/dev/null
  ls -la /tmp/sf_gds > $R/gds/left_in_dir.txt 2>&1
  rm -rf /dev/shm/sf_gds_8
}
e2e() {
  OUT=$R/e2e BIN=$B STEPS=4 bash bench/e2e/run.sh 1024x64 1024x8 1024x16 > $R/e2e_24.txt 2>&1
}
export -f gds e2e; export R B
timeout 135 bash -c gds
timeout 420 bash -c e2e
tar czf $OUT/res7.tgz -C $OUT res7 && rm -rf $R
