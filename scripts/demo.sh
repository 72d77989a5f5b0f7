#!/usr/bin/env bash
# The main job on the embedded default: build, make a tiny random-initialised Llama, fine-tune it
# on the bundled public-domain text (byte-level tokens) from a YAML configuration, evaluate on a
# held-out 5%, save checkpoints and the result as a Hugging Face model in out/tiny-llama-ft.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
./build/slideformer init-model --out out/tiny-llama --arch llama --hidden 128 --layers 4 \
  --heads 4 --kv-heads 2 --intermediate 344 --vocab 256
# The run's configuration as a YAML file (every option: `slideformer train --help`); options on
# the command line override it (here: start afresh when the demo is run again).
cat >out/tiny-llama-ft.yaml <<'YAML'
model_name_or_path: out/tiny-llama
train_data: assets/data/carroll-alice.txt
output_dir: out/tiny-llama-ft
max_steps: 40
per_device_train_batch_size: 8
cutoff_len: 128
learning_rate: 3.0e-3
lr_scheduler_type: cosine
warmup_ratio: 0.1
weight_decay: 0.01
max_grad_norm: 1.0
val_size: 0.05
eval_steps: 20
save_steps: 20
save_total_limit: 2
window: 2
YAML
./build/slideformer train out/tiny-llama-ft.yaml overwrite_output_dir=true
# Try the result: greedy decoding from the fine-tuned model (byte-level tokens, no chat template).
./build/slideformer generate --model out/tiny-llama-ft --prompt "Alice was beginning to" \
  --max-new-tokens 60
