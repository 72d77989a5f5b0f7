#!/usr/bin/env bash
# `slideformer plan` for the 24B / 70B / 123B shapes of bench/nvme/make_configs.py on a
# hypothetical host (256 GiB of memory, a 7 GB/s NVMe, a 24 GiB GPU), on this machine's backend:
# the layer's rate is measured here (on the GPU machine: the H200's), the disk's is given.
# usage: BIN=dir OUT=dir [SEQxBATCH=1024x16] bash bench/nvme/plan_large.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:?OUT=dir}
cfg=${CFG_DIR:-/tmp/sf_large_configs}
mkdir -p "$out"
python3 bench/nvme/make_configs.py "$cfg"
sb=${SEQxBATCH:-1024x16}
for name in mistral-24b llama-70b mistral-123b; do
  "${BIN:-build}/slideformer" plan --model "$cfg/$name" --data "$cfg/data.jsonl" \
    --batch-size "${sb#*x}" --cutoff-len "${sb%x*}" --gpu-memory 24GiB --host-memory 256GiB \
    --nvme-bandwidth 7 --max-grad-norm 0 --no-cache --no-save --backend cuda \
    >"$out/plan_$name.log" 2>&1
  echo "$name: rc=$? $(grep -E "predicted step" "$out/plan_$name.log" | head -1)"
done
