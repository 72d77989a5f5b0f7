#!/usr/bin/env bash
# The NVMe tier on the CUDA backend (the CPU backend's bit-identity is tested in ctest:
# EngineNvme.*): a tiny Llama with the bundled GPT-2 tokenizer trains 6 steps with every state in
# host memory, then again with the Adam m and v of 3 of its 4 layers and the master weights of
# the bottom one in --nvme-dir (NVME_DIR, default a fresh directory under /tmp). The losses and
# gradient norms (full precision, metrics.jsonl) and the saved checkpoints (weights and optimizer
# state) must be bit-identical (without clipping the activation checkpoints go to the disk too).
# Needs a GPU; exits 77 (skipped) without one.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${SLIDEFORMER:-build/slideformer}
nvidia-smi -L >/dev/null 2>&1 || { echo "skipped: no GPU"; exit 77; }
work=$(mktemp -d)
scratch=${NVME_DIR:-$work/nvme}
mkdir -p "$scratch"
trap 'rm -rf "$work"' EXIT
"$bin" init-model --out "$work/m" --arch llama --hidden 128 --layers 4 --heads 4 --kv-heads 2 \
  --intermediate 344 --tokenizer assets/tokenizers/gpt2 >/dev/null
args=(--model "$work/m" --data assets/data/carroll-alice.txt --max-steps 6 --batch-size 4
  --cutoff-len 128 --lr 1e-3 --save-steps 6 --backend cuda --seed 3 shuffle=true)
for clip in 0 1.0; do
  "$bin" train "${args[@]}" --max-grad-norm $clip --output-dir "$work/host$clip" >"$work/host.log" 2>&1
  "$bin" train "${args[@]}" --max-grad-norm $clip --output-dir "$work/nvme$clip" \
    --nvme-dir "$scratch" --nvme-layers 3 --nvme-masters 1 --nvme-checkpoints $([ $clip = 0 ] && echo on || echo off) \
    >"$work/nvme.log" 2>&1
  grep -h "the Adam m and v of layers" "$work/nvme.log" || { tail -5 "$work/nvme.log"; exit 1; }
  python3 - "$work/host$clip/metrics.jsonl" "$work/nvme$clip/metrics.jsonl" <<'PY'
import json, sys
def steps(path):
    return {r["step"]: (r["loss"], r["grad_norm"]) for r in map(json.loads, open(path)) if "loss" in r}
a, b = steps(sys.argv[1]), steps(sys.argv[2])
assert sorted(a) == sorted(b) == list(range(1, 7)), (sorted(a), sorted(b))
for s in a:
    print(f"step {s}: host loss {a[s][0]!r} grad_norm {a[s][1]!r} | nvme {b[s][0]!r} {b[s][1]!r}")
sys.exit(0 if a == b else 1)
PY
  for f in model.safetensors training_state.safetensors; do
    cmp "$work/host$clip/checkpoint-6/$f" "$work/nvme$clip/checkpoint-6/$f"
    echo "clip $clip: $f bit-identical"
  done
  ls "$scratch" | wc -l | xargs echo "files left in the NVMe directory:"
done
echo "NVMe tier on CUDA: bit-identical with the host-memory run"
