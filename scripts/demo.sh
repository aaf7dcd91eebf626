#!/usr/bin/env bash
# The main demo: builds the `mmbal` tool (installing dependencies first) and runs
# `mmbal simulate`: a realistic omni workload on 64 ranks, balanced per phase, with the
# imbalance before/after, the simulated step time and the traffic. Extra arguments are passed
# to `mmbal simulate` (try --help). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S . -B build/demo "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DMMBAL_BUILD_TESTS=OFF -DMMBAL_BUILD_BENCH=OFF >/dev/null
cmake --build build/demo --target mmbal_tool -j "$(nproc)" >/dev/null
exec build/demo/tools/mmbal simulate "$@"
