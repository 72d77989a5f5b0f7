#!/usr/bin/env bash
# Builds everything and runs the whole test suite (ctest). GPU tests skip, saying so, without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
cd build && ctest --output-on-failure -j "$(nproc)" --timeout 900
