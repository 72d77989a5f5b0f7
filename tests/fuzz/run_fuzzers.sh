#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) into build-fuzz/ and runs each for SECONDS
# (default 60) on a copy of its committed corpus (tests/fuzz/corpus/<target>); new inputs go to
# build-fuzz/corpus/<target>, crashes to build-fuzz/findings/<target>. Exit 1 on any finding.
# SF_FUZZ_CORPUS=committed (CI: scripts/fuzz_ci.sh) starts each run from the committed corpus
# alone, in a fresh build-fuzz/ci-corpus/<target>, so a run does not depend on earlier ones.
# SF_FUZZ_RUNS=N stops each target after N executions (SECONDS is then the cap).
#   tests/fuzz/run_fuzzers.sh [SECONDS] [target ...]
set -uo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-60}; shift || true
all="jinja dataset tokenizer model_config safetensors samples_cache train_state safetensors_index tokenizer_config"
targets=${*:-$all}
# Configured once: a second configure with another compiler path would wipe the build.
if [ ! -f build-fuzz/CMakeCache.txt ]; then
  cxx=$(command -v clang++-14 || command -v clang++)
  cmake -S . -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER="$cxx" -DSF_FUZZ=ON -DSF_WITH_CUDA=OFF \
        -DBUILD_TESTING=OFF >/dev/null || exit 1
fi
found=0
for t in $targets; do
  cmake --build build-fuzz --target "fuzz_$t" -j "$(nproc)" >/dev/null || exit 1
  corpus="build-fuzz/corpus/$t"
  if [ "${SF_FUZZ_CORPUS:-}" = committed ]; then
    corpus="build-fuzz/ci-corpus/$t"
    rm -rf "$corpus" "build-fuzz/findings/$t"
  fi
  mkdir -p "$corpus" "build-fuzz/findings/$t"
  cp -n tests/fuzz/corpus/$t/* "$corpus/" 2>/dev/null
  # rss/malloc limits: a template may use up to 64 MiB per value (data/jinja/limits.h).
  ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 \
  "build-fuzz/fuzz_$t" "$corpus" -max_total_time="$secs" ${SF_FUZZ_RUNS:+-runs=$SF_FUZZ_RUNS} -timeout=20 \
      -rss_limit_mb=4096 -max_len=65536 -artifact_prefix="build-fuzz/findings/$t/" \
      -print_final_stats=1 > "build-fuzz/fuzz_$t.log" 2>&1
  rc=$?
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "build-fuzz/fuzz_$t.log" | grep -o '[0-9]*$')
  # Findings: crashes, sanitizer reports, leaks, timeouts (-timeout=20), out-of-memory. A
  # slow-unit-* (over 10 s, under the timeout, sanitized) is reported, not counted.
  n=$(ls "build-fuzz/findings/$t" | grep -vc '^slow-unit-')
  slow=$(ls "build-fuzz/findings/$t" | grep -c '^slow-unit-')
  took=$(grep -o 'Done [0-9]* runs in [0-9]* second' "build-fuzz/fuzz_$t.log" | grep -o '[0-9]* second' | grep -o '[0-9]*')
  echo "fuzz_$t: ${runs:-?} executions in ${took:-$secs} s (cap ${secs} s), exit $rc, findings: $n, slow units (10-20 s): $slow"
  [ "$n" -ne 0 ] && ls "build-fuzz/findings/$t" && tail -n 40 "build-fuzz/fuzz_$t.log"
  [ "$rc" -ne 0 ] || [ "$n" -ne 0 ] && found=1
done
exit $found
