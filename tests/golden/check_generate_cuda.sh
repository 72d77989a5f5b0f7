#!/usr/bin/env bash
# The CUDA checks of `slideformer generate` (KV-cache decoder), for the GPU machine, on binaries
# already built in build/ (or BIN=dir):
#   1. sf_cuda_tests: attention_decode against the CPU reference over shapes, the bf16 decoder on
#      the golden fixtures against transformers' fp32 greedy ids and the CPU decoder's logits, and
#      streamed layers against resident ones (tests/golden/test_generate_golden_cuda.cpp);
#   2. the binary on every fixture model (--backend cuda): exits 0 and says the layers are
#      resident;
#   3. a random 8-layer model of hidden 1024: the binary's greedy ids with the layers resident and
#      with --gpu-memory 256MiB (bf16: 0.31 GB resident, 0.18 GB streaming through 2 slots) must
#      be identical, and the streamed run must say so;
#   4. where python3 has torch and transformers: make_generate.py reproduces the fixture's ids.
# Usage: bash tests/golden/check_generate_cuda.sh        (exit 0: all passed)
# (BACKEND=cpu STREAM_BUDGET=512MiB runs steps 2-3 on the CPU reference, where weights are fp32.)
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-build}
SF="$BIN/slideformer"
[[ -x "$SF" && -x "$BIN/sf_cuda_tests" ]] || { echo "build first: bash scripts/build.sh" >&2; exit 2; }

echo "== 1. sf_cuda_tests (decode attention, golden generate)"
rc=0
out=$("$BIN/sf_cuda_tests" --gtest_filter='*CudaAttentionDecode*:GenerateGoldenCuda.*' 2>&1) || rc=$?
grep -E '^\[ (errors|  FAILED  |  PASSED  |  SKIPPED ) \]|Failure|Expected|Which is' <<<"$out" || true
[[ $rc == 0 ]] || { echo "FAILED: sf_cuda_tests (exit $rc)" >&2; exit 1; }
if grep -q '^\[  SKIPPED \]' <<<"$out"; then
  echo "FAILED: CUDA tests skipped (no GPU visible?)" >&2
  exit 1
fi

echo "== 2. the binary on the fixture models"
for m in llama3_rope llama_tied mistral qwen2_bias qwen3_qknorm llama_gqa1_long; do
  log=$("$SF" generate --backend "${BACKEND:-cuda}" --model "tests/golden/data/$m" --prompt-ids 1,5,9,13 \
          --max-new-tokens 20 --print-ids 2>&1 >/tmp/sf_gen_$m.json)
  grep -q "layers resident" <<<"$log" || { echo "FAILED: $m: $log" >&2; exit 1; }
  echo "$m: $(cat /tmp/sf_gen_$m.json)"
done

echo "== 3. resident vs streamed layers, hidden 1024 × 8 layers"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$SF" init-model --out "$work/model" --arch llama --hidden 1024 --layers 8 --heads 16 \
  --kv-heads 4 --intermediate 2816 --vocab 32000 >/dev/null
args=(generate --backend "${BACKEND:-cuda}" --model "$work/model" --prompt-ids 1,2,3,4,5,6,7,8 --max-new-tokens 64 --print-ids)
t0=$(date +%s.%N)
"$SF" "${args[@]}" >"$work/resident.json" 2>"$work/resident.log"
t1=$(date +%s.%N)
"$SF" "${args[@]}" --gpu-memory "${STREAM_BUDGET:-256MiB}" >"$work/streamed.json" 2>"$work/streamed.log"
t2=$(date +%s.%N)
cat "$work/resident.log" "$work/streamed.log"
grep -q "layers resident" "$work/resident.log" || { echo "FAILED: not resident" >&2; exit 1; }
grep -q "stream from host memory" "$work/streamed.log" || { echo "FAILED: not streamed" >&2; exit 1; }
cmp -s "$work/resident.json" "$work/streamed.json" ||
  { echo "FAILED: streamed ids differ from resident ones" >&2; diff "$work/resident.json" "$work/streamed.json"; exit 1; }
awk -v a="$t0" -v b="$t1" -v c="$t2" 'BEGIN { printf "resident %.2f s, streamed %.2f s (64 new tokens, process start and load included)\n", b - a, c - b }'
echo "== 4. the fixture's ids reproduced by this machine's transformers (CPU, fp32), if installed"
if python3 -c 'import torch, transformers' 2>/dev/null; then
  python3 tests/golden/make_generate.py --out "$work/generate.json" | tail -1
  python3 - "$work/generate.json" tests/golden/data/generate.json <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
ids = lambda j: {c: [e["new_ids"] for e in v] for c, v in j["cases"].items()}
if ids(a) != ids(b):
    sys.exit(f"FAILED: transformers {a['transformers']} gives other ids than the fixture's {b['transformers']}")
print(f"same ids with transformers {a['transformers']}, torch {a['torch']}")
PY
else
  echo "skipped: python3 has no torch/transformers"
fi
echo "all generate CUDA checks passed"
