#!/usr/bin/env bash
# Builds the CUDA backend, runs its tests (ops vs the CPU reference, the golden fixtures through
# the engine) and the kernel benchmarks: bench_kernels then the torch/Liger peers, and attention
# against torch's cuDNN SDPA alternated three times (compare_attention.sh).
# Usage: bash bench/kernels/run.sh [build-dir]   (logs go to $OUT/ when OUT is set)
#        BIN=dir bash bench/kernels/run.sh        binaries built elsewhere (sf_cuda_tests,
#        bench_kernels, bench_attention in dir): no build here, which costs a GPU machine's time
#        ROUNDS=n (default 3): attention rounds alternated with torch; PROFILE=1 adds ncu's
#        kernel-by-kernel attention profile at 2×8192 (profile_attention.sh)
#        SANITIZE=1 bash bench/kernels/run.sh      also memcheck + racecheck of the op tests. Racecheck
#        cannot run through cuBLASLt's TMA/wgmma kernels (hazards inside nvjet, or "failed to handle
#        a hardware exception" even when filtered to ours): it runs the ops without GEMMs as they
#        are, and the fused cross-entropy with SF_GEMM=reference (the plain reference GEMM kernel
#        in place of cuBLASLt, so every kernel launched is ours and fully checked).
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${BIN:-${1:-build-gpu}}
LOG=${OUT:-/tmp}
if [ -z "${BIN:-}" ]; then
  cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release > "$LOG/configure.log" 2>&1 || { tail -30 "$LOG/configure.log"; exit 1; }
  cmake --build "$B" -j"$(nproc)" --target sf_cuda_tests bench_kernels bench_attention 2>&1 | grep -Ev '^\[[0-9]+/[0-9]+\]' | tee "$LOG/build.log" | tail -40
fi
[ -x "$B/sf_cuda_tests" ] && [ -x "$B/bench_kernels" ] && [ -x "$B/bench_attention" ] || { echo "build failed"; exit 1; }
echo "== tests"
"$B/sf_cuda_tests" --gtest_filter='*Cuda*' 2>&1 | tee "$LOG/tests.log" | grep -E '^\[  (FAILED|PASSED|  OK) |^\[ errors|Failure|error|Expected|Which is|actual|rel_error|^\[==========' | head -150
echo "== bench_kernels (ours)"
"$B/bench_kernels" 2>&1 | tee "$LOG/bench_ours.log"
echo "== peers (torch)"
# Liger-Kernel from a carried wheel (the GPU machine reaches no registry): `pip download
# liger-kernel==0.8.5 --no-deps -d .whl` where a registry is reachable, then carry .whl/
if ls .whl/liger_kernel-*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/sf-liger .whl/liger_kernel-*.whl &&
    export PYTHONPATH=/tmp/sf-liger${PYTHONPATH:+:$PYTHONPATH}
fi
PYTHONUNBUFFERED=1 python3 bench/kernels/peers.py 2>&1 | tee "$LOG/bench_peers.log"
echo "== attention vs torch SDPA cuDNN, alternated"
BIN="$B" ROUNDS=${ROUNDS:-3} bash bench/kernels/compare_attention.sh 2>&1 | tail -12
if [ "${PROFILE:-0}" = 1 ]; then
  echo "== attention kernel by kernel, ncu, 2x8192"
  BIN="$B" SHAPE=2x8192 bash bench/kernels/profile_attention.sh 2>&1 | tail -24
fi
if [ "${SANITIZE:-0}" = 1 ]; then
  F='CudaOps.RmsNorm:CudaOps.Rope:CudaOps.Embedding:CudaOps.AddAndSwiglu:CudaCudnnStatsLayout.*'
  CE='CudaOps.LinearCrossEntropy*'
  summary='RACECHECK SUMMARY|ERROR SUMMARY|FAILED|OK \]'
  echo "== compute-sanitizer memcheck (cuBLASLt GEMMs)"
  compute-sanitizer --tool memcheck "$B/sf_cuda_tests" --gtest_filter="$F:$CE" 2>&1 | tee "$LOG/memcheck.log" | grep -E "$summary"
  echo "== compute-sanitizer memcheck, SF_GEMM=reference"
  SF_GEMM=reference compute-sanitizer --tool memcheck "$B/sf_cuda_tests" --gtest_filter="$CE:CudaGemm.ReferenceMatchesHost" 2>&1 | tee "$LOG/memcheck_ce.log" | grep -E "$summary"
  echo "== compute-sanitizer racecheck (ops without GEMMs, own kernels)"
  compute-sanitizer --tool racecheck --kernel-name kns=_kernel "$B/sf_cuda_tests" --gtest_filter="$F" 2>&1 | tee "$LOG/racecheck.log" | grep -E "$summary"
  echo "== compute-sanitizer racecheck, SF_GEMM=reference (cross-entropy, the reference GEMM)"
  SF_GEMM=reference compute-sanitizer --tool racecheck "$B/sf_cuda_tests" --gtest_filter="$CE:CudaGemm.ReferenceMatchesHost" 2>&1 | tee "$LOG/racecheck_ce.log" | grep -E "$summary"
fi
