#!/usr/bin/env bash
# Exact resume on the CUDA backend (the CPU backend's bit-identical resume is tested in ctest:
# TrainCheckpoint.*, TrainSignal.*): a tiny Llama with the bundled GPT-2 tokenizer trains 6 steps
# straight, saving at step 3; a second run resumes from that checkpoint into another directory.
# Steps 4-6 of both must agree to the printed precision (loss and grad norm, 4 decimals); the
# script prints the largest difference. Needs a GPU; exits 77 (skipped) without one.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${SLIDEFORMER:-build/slideformer}
nvidia-smi -L >/dev/null 2>&1 || { echo "skipped: no GPU"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin" init-model --out "$work/m" --arch llama --hidden 128 --layers 4 --heads 4 --kv-heads 2 \
  --intermediate 344 --tokenizer assets/tokenizers/gpt2 >/dev/null
args=(--model "$work/m" --data assets/data/carroll-alice.txt --max-steps 6 --batch-size 4
  --cutoff-len 128 --lr 1e-3 --save-steps 3 --backend cuda --seed 3 shuffle=true)
"$bin" train "${args[@]}" --output-dir "$work/straight" >"$work/straight.log" 2>&1
"$bin" train "${args[@]}" --output-dir "$work/resumed" \
  --resume-from-checkpoint "$work/straight/checkpoint-3" >"$work/resumed.log" 2>&1
grep -h "resumed from" "$work/resumed.log" || { echo "no resume line"; tail -5 "$work/resumed.log"; exit 1; }
python3 - "$work/straight/metrics.jsonl" "$work/resumed/metrics.jsonl" <<'PY'
import json, sys
def steps(path):
    return {r["step"]: r for r in map(json.loads, open(path)) if "loss" in r}
a, b = steps(sys.argv[1]), steps(sys.argv[2])
worst = 0.0
for s in (4, 5, 6):
    for k in ("loss", "grad_norm"):
        d = abs(a[s][k] - b[s][k])
        worst = max(worst, d)
        print(f"step {s} {k}: straight {a[s][k]:.6f} resumed {b[s][k]:.6f} |diff| {d:.2e}")
ok = worst < 5e-5
print(f"largest difference {worst:.2e}: {'equal to the printed precision' if ok else 'DIFFERENT'}")
sys.exit(0 if ok else 1)
PY
