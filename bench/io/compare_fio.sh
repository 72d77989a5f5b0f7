#!/usr/bin/env bash
# compare_fio.sh BENCH_NVME DIR [GiB] [depths...]: the NVMe store's probe (bench_nvme) and its peer,
# fio with the io_uring engine (O_DIRECT, 1 MiB sequential writes then reads of the same file, one
# job), at each queue depth, alternated, in one run. fio is not a build dependency: install it
# for this comparison only (apt-get install fio).
set -euo pipefail
bench=$1 dir=$2 gib=${3:-2}
shift $(( $# >= 3 ? 3 : $# ))
depths=("$@")
[ ${#depths[@]} -gt 0 ] || depths=(1 4 32)
echo "# $(date -u +%FT%TZ) $(uname -r) $(nproc) CPUs; dir $dir: $(df -hT "$dir" | tail -1)"
for qd in "${depths[@]}"; do
  "$bench" "$dir" "$gib" "$qd"
  for rw in write read; do
    fio --name=peer --directory="$dir" --filename=fio_peer.tmp --ioengine=io_uring --direct=1 \
        --rw="$rw" --bs=1M --iodepth="$qd" --size="${gib}G" --numjobs=1 --output-format=terse \
        --terse-version=3 | awk -F';' -v qd="$qd" -v rw="$rw" \
        '{bw = (rw == "read") ? $7 : $48; printf "fio io_uring qd %s %s: %.2f GB/s\n", qd, rw, bw * 1024 / 1e9}'
  done
  rm -f "$dir/fio_peer.tmp"
done
