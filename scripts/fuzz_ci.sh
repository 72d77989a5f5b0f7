#!/usr/bin/env bash
# CI's fuzz step (issue 14; scripts/test.sh runs it after the test suite): builds the libFuzzer
# targets of tests/fuzz with clang 14 (ASan + UBSan) into build-fuzz/ and runs each for
# SF_FUZZ_SECONDS (default 10) from the committed corpus only; exit 1 on any finding (a crash, a
# sanitizer report, a hang past 20 s, an exception other than sf::Error). clang-14 and
# libclang-rt-14-dev come from Debian; where they cannot be installed the step says so and
# skips (exit 0): the committed corpus is still replayed by FuzzReplay in the test suite.
set -uo pipefail
cd "$(dirname "$0")/.."
secs=${SF_FUZZ_SECONDS:-10}
t0=$(date +%s)
pkgs=(clang-14 libclang-rt-14-dev)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  if ! { $SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive \
         $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"; } >/dev/null 2>&1
  then
    echo "fuzz: skipped: could not install ${missing[*]} (Debian packages) on this machine"
    exit 0
  fi
fi
if ! command -v clang++-14 >/dev/null ||
   ! ls /usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  echo "fuzz: skipped: clang++-14 or its libFuzzer runtime (libclang-rt-14-dev) is missing"
  exit 0
fi
SF_FUZZ_CORPUS=committed bash tests/fuzz/run_fuzzers.sh "$secs"
rc=$?
echo "fuzz: ${secs} s per target, $(( $(date +%s) - t0 )) s in all (install, build, runs)"
exit $rc
