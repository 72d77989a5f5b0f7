#!/usr/bin/env bash
# Shows that vLLM loads a checkpoint saved by `slideformer train` as it is: for each architecture, a
# tiny random model (hidden 256, 4 heads: head_dim 64, which vLLM's CPU attention takes) with the
# bundled GPT-2 tokenizer (Qwen2.5's for qwen2, as in check_gguf.sh) is fine-tuned a few steps and
# saved (bf16); vLLM generates greedily from it and scores transformers' greedy tokens, and
# check_vllm.py compares both with transformers' own run.
# vLLM is not a dependency: VLLM_PYTHON names a python that imports it (a virtualenv of its own, as
# it pins torch); without it the script exits 77 (skipped). The transformers side runs in python3
# when that has torch and transformers, else in VLLM_PYTHON (vLLM brings both), in its own process.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${SLIDEFORMER:-build/slideformer}
vpy=${VLLM_PYTHON:-}
[ -n "$vpy" ] && [ -x "$vpy" ] || { echo "skipped: VLLM_PYTHON does not name a python"; exit 77; }
"$vpy" -c "import vllm" 2>/dev/null || { echo "skipped: $vpy cannot import vllm"; exit 77; }
hpy=python3
python3 -c "import torch, transformers" 2>/dev/null || hpy=$vpy
# One engine process on a small machine: the engine core in-process, a 1 GiB KV cache.
export VLLM_ENABLE_V1_MULTIPROCESSING=0 VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-1}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
for arch in llama mistral qwen2 qwen3; do
  extra=""
  tok=assets/tokenizers/gpt2
  if [ "$arch" = qwen2 ]; then
    tok=../shared/data/tokenizers/qwen2.5
    [ -f "$tok/tokenizer.json" ] || { echo "qwen2: skipped ($tok is absent)"; continue; }
    extra="--tie-embeddings"
  fi
  "$bin" init-model --out "$work/$arch" --arch "$arch" --hidden 256 --layers 2 --heads 4 \
    --kv-heads 2 --intermediate 512 --tokenizer "$tok" $extra >/dev/null
  "$bin" train --model "$work/$arch" --data assets/data/carroll-alice.txt --steps 3 \
    --batch-size 2 --cutoff-len 32 --lr 1e-2 --output "$work/$arch-ft" --save-dtype bf16 >/dev/null
  "$hpy" tests/golden/check_vllm.py hf "$work/$arch-ft" "$work/$arch.hf.json" \
    >"$work/$arch.hf.log" 2>&1 ||
    { echo "$arch-ft: transformers failed:"; tail -5 "$work/$arch.hf.log"; status=1; continue; }
  "$vpy" tests/golden/check_vllm.py vllm "$work/$arch-ft" "$work/$arch.hf.json" \
    "$work/$arch.vllm.json" >"$work/$arch.vllm.log" 2>&1 ||
    { echo "$arch-ft: vLLM failed:"; tail -5 "$work/$arch.vllm.log"; status=1; continue; }
  echo -n "$arch-ft: "
  python3 tests/golden/check_vllm.py compare "$work/$arch.hf.json" "$work/$arch.vllm.json" ||
    status=1
done
exit $status
