#!/usr/bin/env bash
# Installs the Debian packages the build and the tests need (idempotent; root or sudo).
set -euo pipefail
pkgs=(build-essential cmake ninja-build nlohmann-json3-dev libgtest-dev libpcre2-dev python3 python3-pip)
pkgs+=(libutf8proc-dev)  # tokenizer: Unicode normalization (linked statically)
pkgs+=(libyaml-cpp-dev libcli11-dev)  # train: YAML configs (libyaml-cpp.a, static), CLI11 (header-only)
pkgs+=(liburing-dev)  # io: NVMe store through io_uring (liburing.a, static)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
