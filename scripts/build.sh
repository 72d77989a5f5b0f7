#!/usr/bin/env bash
# Configures and builds into build/ (CUDA code too when nvcc is on the PATH, unless
# SF_WITH_CUDA=OFF): everything, or only the targets named (bash scripts/build.sh slideformer:
# the binary alone, as the demo needs).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
jobs=$(nproc)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSF_WITH_CUDA="${SF_WITH_CUDA:-ON}" \
  >/dev/null
if [ $# -gt 0 ]; then
  cmake --build build -j "$jobs" --target "$@"
else
  cmake --build build -j "$jobs"
fi
