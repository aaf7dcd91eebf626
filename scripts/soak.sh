#!/usr/bin/env bash
# The long randomized run (not part of CI): N random instances (default 100000) per balancing
# algorithm and per transport — loopback always, MPI (MMBAL_SOAK_RANKS ranks, default 2) when MPI is
# found — checked
# against the invariants of tests/soak/soak.cpp; prints the counts, fails on any violation.
# Usage: scripts/soak.sh [N] [seed]
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-100000}
seed=${2:-1}
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S . -B build/soak "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DMMBAL_BUILD_BENCH=OFF \
  -DMMBAL_BUILD_EXAMPLES=OFF -DMMBAL_ENABLE_NCCL=OFF >/dev/null
targets=(mmbal_soak)
cmake --build build/soak --target help | grep -q mmbal_soak_mpi && targets+=(mmbal_soak_mpi)
cmake --build build/soak -j "$(nproc)" --target "${targets[@]}"
echo "== soak: $count instances per algorithm and transport, seed $seed =="
build/soak/tests/mmbal_soak "$count" "$seed"
if [ -x build/soak/tests/mmbal_soak_mpi ]; then
  mpiexec --allow-run-as-root --oversubscribe -n "${MMBAL_SOAK_RANKS:-2}" build/soak/tests/mmbal_soak_mpi "$count" "$seed"
fi
