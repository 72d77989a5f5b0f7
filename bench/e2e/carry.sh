#!/usr/bin/env bash
# Builds what a GPU call carries (slideformer, sf_cuda_tests, bench_layer) with the CUDA backend
# and strips it into .dev/e2e (gitignored; `run`'s carry), with the commit in .dev/e2e/HEAD.
# Refuses a binary without the CUDA backend: scripts/demo.sh configures build/ without it on a
# machine without a GPU, and a call that carries such a binary spends its device time on an error.
set -euo pipefail
cd "$(dirname "$0")/../.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSF_WITH_CUDA=ON >/dev/null
grep -q '^SF_WITH_CUDA:BOOL=ON' build/CMakeCache.txt
cmake --build build -j "$(nproc)" --target slideformer sf_cuda_tests bench_layer
mkdir -p .dev/e2e
for b in slideformer sf_cuda_tests bench_layer; do strip -o ".dev/e2e/$b" "build/$b"; done
if ! strings .dev/e2e/slideformer | grep -c cublasLt >/dev/null; then  # -c: reads it all
  echo "carry: .dev/e2e/slideformer has no CUDA backend (is nvcc on the PATH?)" >&2
  exit 1
fi
git rev-parse --short HEAD > .dev/e2e/HEAD
echo "carry: .dev/e2e holds $(cat .dev/e2e/HEAD)$(git diff --quiet HEAD || echo ' with uncommitted changes')"
