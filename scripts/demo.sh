#!/usr/bin/env bash
# The main job on the embedded default: build, make a tiny random-initialised Llama, fine-tune it
# on the bundled public-domain text (byte-level tokens), print each step's loss, save the result
# as a Hugging Face checkpoint in out/tiny-llama-ft.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
./build/slideformer init-model --out out/tiny-llama --arch llama --hidden 128 --layers 4 \
  --heads 4 --kv-heads 2 --intermediate 344 --vocab 256
./build/slideformer train --model out/tiny-llama --data assets/data/carroll-alice.txt \
  --output out/tiny-llama-ft --steps 40 --batch-size 8 --cutoff-len 128 --lr 3e-3 \
  --schedule cosine --warmup-steps 4 --weight-decay 0.01 --max-grad-norm 1.0 --window 2
