#!/usr/bin/env bash
# Builds the CUDA backend, runs its tests (ops vs the CPU reference, the golden fixtures through
# the engine) and both kernel benchmarks (ours, then the torch peers in the same run).
# Usage: bash bench/kernels/run.sh [build-dir]   (logs go to $OUT/ when OUT is set)
#        SANITIZE=1 bash bench/kernels/run.sh      also memcheck + racecheck of the op tests (the
#        racecheck limited to our kernels: cuBLASLt's TMA/wgmma kernels trip it, see the log)
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build-gpu}
LOG=${OUT:-/tmp}
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release > "$LOG/configure.log" 2>&1 || { tail -30 "$LOG/configure.log"; exit 1; }
cmake --build "$B" -j"$(nproc)" --target sf_cuda_tests bench_kernels 2>&1 | grep -Ev '^\[[0-9]+/[0-9]+\]' | tee "$LOG/build.log" | tail -40
[ -x "$B/sf_cuda_tests" ] && [ -x "$B/bench_kernels" ] || { echo "build failed"; exit 1; }
echo "== tests"
"$B/sf_cuda_tests" --gtest_filter='*Cuda*' 2>&1 | tee "$LOG/tests.log" | grep -E '^\[  (FAILED|PASSED|  OK) |^\[ errors|Failure|error|Expected|Which is|actual|rel_error|^\[==========' | head -150
echo "== bench_kernels (ours)"
"$B/bench_kernels" 2>&1 | tee "$LOG/bench_ours.log"
echo "== peers (torch)"
PYTHONUNBUFFERED=1 python3 bench/kernels/peers.py 2>&1 | tee "$LOG/bench_peers.log"
if [ "${SANITIZE:-0}" = 1 ]; then
  F='CudaOps.RmsNorm:CudaOps.Rope:CudaOps.Embedding:CudaOps.AddAndSwiglu:CudaOps.LinearCrossEntropy'
  echo "== compute-sanitizer memcheck"
  compute-sanitizer --tool memcheck "$B/sf_cuda_tests" --gtest_filter="$F" 2>&1 | tee "$LOG/memcheck.log" | grep -E 'ERROR SUMMARY|FAILED|OK \]'
  echo "== compute-sanitizer racecheck (own kernels)"
  compute-sanitizer --tool racecheck --kernel-name kns=_kernel "$B/sf_cuda_tests" --gtest_filter="${F%:CudaOps.LinearCrossEntropy}" 2>&1 | tee "$LOG/racecheck.log" | grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|FAILED|OK \]'
fi
