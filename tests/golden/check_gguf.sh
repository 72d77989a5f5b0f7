#!/usr/bin/env bash
# Shows that llama.cpp's converter (convert_hf_to_gguf.py) takes a checkpoint saved by
# `slideformer train` as it is: for each architecture, a tiny random model with the bundled GPT-2
# tokenizer (Qwen2.5's for qwen2, from ../shared/data) is fine-tuned a few steps and saved (bf16),
# converted to GGUF (f32), and the GGUF is
# read back with llama.cpp's own reader and compared with the checkpoint (check_gguf.py).
# The converter is llama.cpp's, not ours: LLAMA_CPP_DIR names a llama.cpp source tree (its
# convert_hf_to_gguf.py, conversion/ and gguf-py/); without it the script takes the copy vendored in the
# llama-cpp-python source package from PyPI. Needs python3 with torch, transformers, numpy,
# safetensors, sentencepiece; exits 77 (skipped) without them or without the converter.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${SLIDEFORMER:-build/slideformer}
python3 -c "import torch, transformers, numpy, safetensors, sentencepiece" 2>/dev/null ||
  { echo "skipped: python3 lacks torch/transformers/numpy/safetensors/sentencepiece"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
lcp=${LLAMA_CPP_DIR:-}
if [ -z "$lcp" ]; then
  version=0.3.36
  python3 -m pip download --quiet --no-deps --no-binary :all: "llama-cpp-python==$version" \
    -d "$work/sdist" >/dev/null 2>&1 || { echo "skipped: cannot fetch llama-cpp-python"; exit 77; }
  tar xzf "$work/sdist/llama_cpp_python-$version.tar.gz" -C "$work" --wildcards \
    "*/vendor/llama.cpp/convert_hf_to_gguf.py" "*/vendor/llama.cpp/conversion/*" \
    "*/vendor/llama.cpp/gguf-py/*"
  lcp=$work/llama_cpp_python-$version/vendor/llama.cpp
fi
[ -f "$lcp/convert_hf_to_gguf.py" ] || { echo "skipped: no $lcp/convert_hf_to_gguf.py"; exit 77; }
status=0
for arch in llama mistral qwen2 qwen3; do
  extra=""
  tok=assets/tokenizers/gpt2
  if [ "$arch" = qwen2 ]; then
    # The converter's Qwen2 path identifies the BPE pre-tokenizer by a hash of its output and
    # does not know the GPT-2 copy's (llama.cpp's table, not the checkpoint): use Qwen2.5's own.
    tok=../shared/data/tokenizers/qwen2.5
    [ -f "$tok/tokenizer.json" ] || { echo "qwen2: skipped ($tok is absent)"; continue; }
    extra="--tie-embeddings"
  fi
  "$bin" init-model --out "$work/$arch" --arch "$arch" --hidden 64 --layers 2 --heads 4 \
    --kv-heads 2 --intermediate 96 --tokenizer "$tok" $extra >/dev/null
  "$bin" train --model "$work/$arch" --data assets/data/carroll-alice.txt --steps 3 \
    --batch-size 2 --cutoff-len 32 --lr 1e-2 --output "$work/$arch-ft" --save-dtype bf16 >/dev/null
  PYTHONPATH="$lcp/gguf-py${PYTHONPATH:+:$PYTHONPATH}" python3 "$lcp/convert_hf_to_gguf.py" \
    "$work/$arch-ft" --outfile "$work/$arch.gguf" --outtype f32 >"$work/$arch.convert.log" 2>&1 ||
    { echo "$arch-ft: the converter failed:"; tail -5 "$work/$arch.convert.log"; status=1; continue; }
  python3 tests/golden/check_gguf.py "$work/$arch-ft" "$work/$arch.gguf" "$lcp" || status=1
done
exit $status
