#!/usr/bin/env bash
# GPUDirect Storage against io_uring for the activation checkpoints on the GPU machine (issue 15
# item 2): the Llama-3.1-8B layer shape (LAYERS layers, default 8) at 1024 x 16 with every layer's
# checkpoint on the local disk and no state there, three runs — nvme_gds off (pinned slots +
# io_uring), on (cuFile; compatibility mode without nvidia-fs), auto (both paths measured at start
# in the directory, the faster taken) — each printing its step times and the measured I/O.
# libcufile comes from SF_CUFILE_LIB, else the first libcufile.so.0 on the machine.
# usage: BIN=dir OUT=dir [LAYERS=8] [NVME_DIR=/tmp/sf_gds] [STEPS=3] bash bench/nvme/gds_h200.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
bin=${BIN:?BIN=dir}
out=${OUT:?OUT=dir}
work=/dev/shm/sf_gds_${LAYERS:-8}
nvme_dir=${NVME_DIR:-/tmp/sf_gds}
mkdir -p "$out" "$work" "$nvme_dir"
export SF_CUFILE_LIB=${SF_CUFILE_LIB:-$(find / -name libcufile.so.0 -not -path "/proc/*" 2>/dev/null | head -1)}
{ echo "SF_CUFILE_LIB=$SF_CUFILE_LIB"; ls /proc/driver/nvidia-fs 2>&1; df -h "$nvme_dir";
  findmnt -T "$nvme_dir"; } >"$out/gds_env.txt" 2>&1
[ -f "$work/model/config.json" ] ||
  python3 bench/e2e/make_inputs.py "$work/model" "$work/data.jsonl" "${LAYERS:-8}" >"$out/gds_model.txt" 2>&1
for mode in off on auto; do
  "$bin/slideformer" train --model "$work/model" --data "$work/data.jsonl" --steps "${STEPS:-3}" \
    --batch-size 16 --cutoff-len 1024 --lr 1e-5 --gpu-memory 24GiB --backend cuda --no-cache \
    --no-save --logging-steps 1 --nvme-dir "$nvme_dir" --nvme-layers 0 --nvme-checkpoints on \
    --nvme-gds "$mode" >"$out/gds_$mode.log" 2>&1
  echo "nvme_gds $mode: rc $?; $(grep -E '^checkpoint paths' "$out/gds_$mode.log")"
  grep -E "^step [0-9]|NVMe I/O|timing:|GPUDirect|error" "$out/gds_$mode.log" | head -12
done
