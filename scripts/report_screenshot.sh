#!/usr/bin/env bash
# Opens a training report in a real browser (headless Chromium from Debian, installed if missing)
# and takes a screenshot; checks that the browser's DOM holds the 5 SVG plots with their lines.
# usage: bash scripts/report_screenshot.sh [REPORT.html|-] [OUT.png]
# Without REPORT.html (or with -) it trains a tiny model for 30 steps (with evaluation) to make one.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${SLIDEFORMER:-build/slideformer}
report=${1:-}
[ "$report" = - ] && report=""  # "-": make one, as without an argument
png=${2:-out/report.png}
if ! command -v chromium >/dev/null; then
  # Under ctest (REPORT_NO_INSTALL=1) a machine without Chromium skips instead of installing it.
  if [ -n "${REPORT_NO_INSTALL:-}" ]; then echo "skipped: no chromium"; exit 77; fi
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q chromium
fi
if [ -z "$report" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  "$bin" init-model --out "$work/m" --hidden 64 --layers 2 --heads 4 --kv-heads 2 \
    --intermediate 128 >/dev/null
  "$bin" train model_name_or_path="$work/m" train_data=assets/data/carroll-alice.txt \
    output_dir="$work/out" max_steps=30 per_device_train_batch_size=4 cutoff_len=64 \
    learning_rate=3e-3 lr_scheduler_type=cosine warmup_ratio=0.1 val_size=0.02 eval_steps=10 \
    --backend cpu >/dev/null
  report="$work/out/report.html"
fi
mkdir -p "$(dirname "$png")"
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1360,1000 \
  --screenshot="$(realpath -m "$png")" "file://$(realpath "$report")" 2>/dev/null
test -s "$png"
# The page as the browser parsed it: every plot an SVG element with its lines.
dom=$(chromium --headless --no-sandbox --disable-gpu --dump-dom "file://$(realpath "$report")" \
  2>/dev/null)
svgs=$(grep -o '<svg ' <<<"$dom" | wc -l)
lines=$(grep -o '<polyline ' <<<"$dom" | wc -l)
if [ "$svgs" -ne 5 ] || [ "$lines" -lt 5 ]; then
  echo "report_screenshot: Chromium parsed $svgs SVG plots with $lines lines in $report" \
    "(expected 5 plots, each with a line)" >&2
  exit 1
fi
echo "screenshot of $report: $png (Chromium parsed $svgs SVG plots, $lines lines)"
