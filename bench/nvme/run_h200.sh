#!/usr/bin/env bash
# The NVMe tier on the GPU machine (issue 15): the disk, then the Llama-3.1-8B shape at the
# configurations given (default 1024x16) with its state partly on the local disk under a host
# budget, through bench/e2e/run.sh. The checkpoint and data go to /dev/shm so the 64 GB disk holds
# the tier's scratch file alone; the train log reports the disk's rates (measured in the run) and
# the step's disk floor next to the step time.
# usage: BIN=dir OUT=dir [HOST_MEM=48GiB] [LAYERS=32] [NVME_DIR=/tmp/sf_nvme] [STEPS=2]
#        bash bench/nvme/run_h200.sh 1024x16 ...
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:?OUT=dir}
nvme_dir=${NVME_DIR:-/tmp/sf_nvme}
mkdir -p "$out" "$nvme_dir"
{ df -h / /tmp /dev/shm "$nvme_dir"; free -g; findmnt -T "$nvme_dir"; } >"$out/disk.txt" 2>&1
extra="--nvme-dir $nvme_dir ${HOST_MEM:+--host-memory $HOST_MEM} ${EXTRA:-}"
WORK=${WORK:-/dev/shm/sf_e2e_${LAYERS:-32}} EXTRA="$extra" STEPS=${STEPS:-2} OUT="$out" \
  bash bench/e2e/run.sh "${@:-1024x16}"
