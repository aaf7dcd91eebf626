#!/usr/bin/env bash
# Installs what mmbal needs to build, test and run its demo on Debian 12 (as root, or with
# sudo). Idempotent: installs only missing packages, runs `apt-get update` at most once.
# The package list lives here only.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build git python3 clang-format
  catch2 libbenchmark-dev nlohmann-json3-dev libcli11-dev libboost-dev librange-v3-dev
  libopenmpi-dev openmpi-bin
  pybind11-dev python3-dev python3-numpy python3-torch python3-pytest
  clang-14 libclang-rt-14-dev
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
