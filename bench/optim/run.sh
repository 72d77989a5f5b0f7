#!/usr/bin/env bash
# CPU AdamW: ours vs torch.optim.AdamW (foreach and fused), same N and threads, one run.
# usage: bench/optim/run.sh [build-dir] [N million] [threads]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}; n=${2:-64}; threads=${3:-$(nproc)}
"$build/bench_adamw" "$n" "$threads"
python3 bench/optim/peer_adamw.py "$n" "$threads"
