#!/usr/bin/env bash
# Builds what the tests run and runs every test: the optimized build (g++ at -O1: unit, tool,
# MPI, CUDA-compile, Python, consumer, format and header tests; -O1 compiles in 60 % of -O3's
# time and the tests run 1.3 × longer, which is a net gain of ≈ 5 min; the benchmarks and the
# demo, where speed is measured, build at -O3 with `cmake --preset release`, and no test runs
# them, so they are not built here), then the ASan+UBSan build (clang-14
# at -O0: four times faster to compile than -O1, and ≈ 2.5 × faster than g++ at -O0) of the
# unit, tool and example tests and the fuzz targets, which scripts/fuzz.sh then runs, and the
# ThreadSanitizer concurrency tests (scripts/tsan.sh).
# Installs its dependencies first. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

jobs=$(nproc)
# The Python package must be built for Debian's interpreter (the one with python3-torch).
python=${PYTHON3_EXECUTABLE:-/usr/bin/python3}
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)

echo "== optimized build (g++ -O1) =="
cmake -S . -B build/test "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" \
  -DMMBAL_BUILD_BENCH=OFF -DPython3_EXECUTABLE="$python" >/dev/null
cmake --build build/test -j "$jobs"
ctest --test-dir build/test --output-on-failure -j "$jobs" --timeout 600

echo "== sanitize build (clang, ASan + UBSan; also the fuzz targets) =="
# --fresh: a cache from an older preset (this build used g++ before) would keep its compiler;
# regenerating costs seconds and rebuilds nothing that did not change.
cmake --preset sanitize "${generator[@]}" --fresh >/dev/null
cmake --build build/sanitize -j "$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build/sanitize --output-on-failure -j "$jobs" --timeout 900 -L "unit|tool|example"

echo "== fuzz (libFuzzer + ASan + UBSan, ${MMBAL_FUZZ_SECONDS:-20} s per target) =="
scripts/fuzz.sh

echo "== ThreadSanitizer (concurrency tests) =="
scripts/tsan.sh
