#!/usr/bin/env bash
# Builds everything and runs the whole test suite (ctest), then the fuzz targets briefly
# (scripts/fuzz_ci.sh). GPU tests skip, saying so, without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
# Python test tooling from PyPI (the reference tokenizer, TensorBoard's event reader); tests that need it skip, saying so,
# where it cannot be installed.
# (Debian's own python3 refuses pip installs outside a venv unless told: try that second.)
pip_install() {
  python3 -m pip install --quiet --disable-pip-version-check "$@" 2>/dev/null ||
    python3 -m pip install --quiet --disable-pip-version-check --break-system-packages "$@" \
      2>/dev/null
}
python3 -c "import tokenizers" 2>/dev/null || pip_install tokenizers ||
  echo "note: could not pip install tokenizers; the tokenizer parity tests will be skipped"
python3 -c "import tensorboard" 2>/dev/null || pip_install tensorboard ||
  echo "note: could not pip install tensorboard; tensorboard_reads_events will be skipped"
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "note: no GPU on this machine: the CUDA tests are built and run, and each reports itself"
  echo "      skipped (\"skipped: no CUDA device\"); ctest lists them as Skipped"
fi
(cd build && ctest --output-on-failure -j "$(nproc)" --timeout 900)
# Every fuzz target of tests/fuzz for a few seconds on the committed corpus (clang from Debian;
# skipped, saying so, where it cannot be installed); fails on any finding.
bash scripts/fuzz_ci.sh
