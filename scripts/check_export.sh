#!/usr/bin/env bash
# Shows that transformers loads a checkpoint saved by `slideformer train` and gives the same
# logits as our forward: for each architecture, make a tiny random model, fine-tune it a few
# steps, save it (F32 and BF16), compute our logits on a batch with `slideformer logits`, then run
# tests/golden/check_hf_load.py (needs python3 with torch + transformers; exits 77 without them).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${SLIDEFORMER:-build/slideformer}
python3 -c "import torch, transformers" 2>/dev/null || { echo "skipped: python3 lacks torch/transformers"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo '{"input_ids": [[5, 17, 99, 200, 3, 42, 7, 8, 250, 1, 77], [9, 9, 31, 64, 128, 255, 0, 2, 4, 6, 11]]}' >"$work/batch.json"
for arch in llama mistral qwen2 qwen3; do
  for dtype in f32 bf16; do
    extra=""; [ "$arch" = qwen2 ] && extra="--tie-embeddings"
    "$bin" init-model --out "$work/$arch" --arch "$arch" --hidden 64 --layers 2 --heads 4 \
      --kv-heads 2 --intermediate 96 --vocab 256 $extra >/dev/null
    "$bin" train --model "$work/$arch" --data assets/data/carroll-alice.txt --steps 3 \
      --batch-size 2 --cutoff-len 32 --lr 1e-2 --output "$work/$arch-ft-$dtype" \
      --save-dtype "$dtype" >/dev/null
    "$bin" logits --model "$work/$arch-ft-$dtype" --batch "$work/batch.json" \
      --out "$work/logits.safetensors" >/dev/null
    printf '%-8s %-5s ' "$arch" "$dtype"
    python3 tests/golden/check_hf_load.py "$work/$arch-ft-$dtype" "$work/logits.safetensors" \
      "$work/batch.json" 2>&1 | grep -v -i warn | tail -1
  done
done
