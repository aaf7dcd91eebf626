#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/fuzz_*.cpp, `fuzz` preset: clang-14 with ASan + UBSan)
# and runs each for a bounded time from its seed corpus (fuzz/corpus/<target>/). Fails on
# any crash, leak, UB report, timeout or out-of-memory; the input that caused it is kept in
# build/fuzz/artifacts/. New inputs the fuzzer finds go to build/fuzz/work/<target>/ (the
# checked-in corpus is read only).
#
# Environment: MMBAL_FUZZ_SECONDS (default 20) per target; MMBAL_FUZZ_TARGETS (default: all,
# space-separated names such as "fuzz_jsonl fuzz_tool").
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${MMBAL_FUZZ_SECONDS:-20}
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)

cmake --preset fuzz "${generator[@]}" >/dev/null
cmake --build build/fuzz -j "$(nproc)"

targets=${MMBAL_FUZZ_TARGETS:-$(cd fuzz && ls fuzz_*.cpp | sed 's/\.cpp$//')}
mkdir -p build/fuzz/artifacts
status=0
root=$PWD  # absolute paths: fuzz_tool runs in a private temporary directory
for t in $targets; do
  mkdir -p "build/fuzz/work/$t" "fuzz/corpus/$t"
  echo "== fuzz $t (${seconds} s) =="
  if ! "$root/build/fuzz/fuzz/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
      -print_final_stats=1 -artifact_prefix="$root/build/fuzz/artifacts/$t-" \
      "$root/build/fuzz/work/$t" "$root/fuzz/corpus/$t" >"build/fuzz/$t.log" 2>&1; then
    tail -n 60 "build/fuzz/$t.log"
    echo "fuzz: $t FAILED (log build/fuzz/$t.log, input in build/fuzz/artifacts/)" >&2
    status=1
  else
    grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb" "build/fuzz/$t.log" | tr '\n' ' '
    echo
  fi
done
exit $status
