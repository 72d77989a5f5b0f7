#!/usr/bin/env bash
# The main job on the embedded default: build the binary, make a tiny random-initialised Llama with
# the bundled GPT-2 tokenizer's vocabulary (assets/tokenizers/gpt2), fine-tune it on the bundled
# public-domain book from a YAML configuration, evaluate on a held-out 5%, save checkpoints, the
# report and the result as a Hugging Face model in out/tiny-llama-ft, then generate text with it.
# (scripts/test.sh builds everything, the tests too; the demo builds only what it runs.)
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
# Without a GPU the CUDA kernels would only lengthen the build: leave them out.
cuda=OFF
if nvidia-smi -L >/dev/null 2>&1; then cuda=ON; fi
SF_WITH_CUDA=$cuda bash scripts/build.sh slideformer
./build/slideformer init-model --out out/tiny-llama --arch llama --hidden 64 --layers 4 \
  --heads 4 --kv-heads 2 --intermediate 172 --tokenizer assets/tokenizers/gpt2
# The run's configuration as a YAML file (every option: `slideformer train --help`); options on
# the command line override it (here: start afresh when the demo is run again).
cat >out/tiny-llama-ft.yaml <<'YAML'
model_name_or_path: out/tiny-llama
train_data: assets/data/carroll-alice.txt
output_dir: out/tiny-llama-ft
max_steps: 40
per_device_train_batch_size: 4
cutoff_len: 64
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
# Try the result through its GPT-2 tokenizer. Sampled (seeded): after 40 steps the greedy choice
# is mostly the book's line breaks.
prompt="Alice was beginning to"
echo "generate: $prompt ..."
./build/slideformer generate --model out/tiny-llama-ft --prompt "$prompt" \
  --max-new-tokens 40 --temperature 0.8 --top-p 0.95 --seed 1
echo "demo: $(($(date +%s) - start)) s, build included; the report: out/tiny-llama-ft/report.html"
