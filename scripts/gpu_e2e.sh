#!/usr/bin/env bash
# End to end on a GPU machine, one call: the CUDA tests (ops vs the CPU reference, the golden
# fixtures through the engine), a training run on the CUDA backend next to the same run on the
# CPU reference (losses must track at bf16 tolerance), and CPU AdamW at full thread count next to
# torch's. usage: BIN=build bash scripts/gpu_e2e.sh   (logs to $OUT when set)
set -uo pipefail
cd "$(dirname "$0")/.."
bin=${BIN:-build}
log=${OUT:-/tmp}
threads=$(nproc)
echo "== CUDA tests"
"$bin/sf_cuda_tests" 2>&1 | tee "$log/cuda_tests.log" | grep -E '^\[  (FAILED|PASSED) |^\[ errors|Failure' | head -60
echo "== training: CUDA backend vs CPU reference (same model, data, seed)"
m=$(mktemp -d)
"$bin/slideformer" init-model --out "$m/model" --hidden 256 --layers 4 --heads 4 --kv-heads 2 \
  --intermediate 688 --vocab 256 >/dev/null
for be in cuda cpu; do
  "$bin/slideformer" train --model "$m/model" --data assets/data/carroll-alice.txt --steps 20 \
    --batch-size 8 --cutoff-len 256 --lr 2e-3 --schedule cosine --warmup-steps 2 \
    --max-grad-norm 1.0 --window 2 --backend "$be" --output "$m/out-$be" --logging-steps 1 2>&1 | tee "$log/train_$be.log" |
    grep -E '^(model|step (1|5|10|15|20)/)'
done
paste <(grep -o 'loss [0-9.]*' "$log/train_cuda.log") <(grep -o 'loss [0-9.]*' "$log/train_cpu.log") |
  awk '{d = $2 - $4; if (d < 0) d = -d; if (d > m) m = d} END {printf "max |loss cuda - loss cpu| over 20 steps: %.4f\n", m}'
echo "== CPU AdamW, $threads threads: ours vs torch (same N)"
"$bin/bench_adamw" 256 "$threads"
python3 bench/optim/peer_adamw.py 256 "$threads"
