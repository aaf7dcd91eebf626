#!/usr/bin/env bash
# Builds only the concurrency tests (test cases tagged [concurrency]: the thread pool, the
# orchestrator's threaded and concurrent planning, the prefetching planner, the threaded
# loopback world) with ThreadSanitizer (`tsan` preset) and runs them; any data race or
# lock-order report fails.
set -euo pipefail
cd "$(dirname "$0")/.."
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake --preset tsan "${generator[@]}" >/dev/null
cmake --build build/tsan -j "$(nproc)" --target test_concurrency
ctest --test-dir build/tsan --output-on-failure --timeout 600 -L tsan
