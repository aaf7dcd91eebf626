#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/fuzz_*.cpp, in the `sanitize` preset's build: clang-14
# with ASan + UBSan) and runs each for a bounded time from its seed corpus
# (fuzz/corpus/<target>/). Fails on any crash, leak, UB report, timeout or out-of-memory; the
# input that caused it is kept in build/sanitize/fuzz/artifacts/. New inputs the fuzzer finds
# go to build/sanitize/fuzz/work/<target>/ (the checked-in corpus is read only).
#
# Environment: MMBAL_FUZZ_SECONDS (default 20) per target; MMBAL_FUZZ_TARGETS (default: all,
# space-separated names such as "fuzz_jsonl fuzz_tool").
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${MMBAL_FUZZ_SECONDS:-20}
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)

targets=${MMBAL_FUZZ_TARGETS:-$(cd fuzz && ls fuzz_*.cpp | sed 's/\.cpp$//')}
# --fresh: a cache from an older preset (this build used g++ before) would keep its compiler;
# regenerating costs seconds and rebuilds nothing that did not change.
cmake --preset sanitize "${generator[@]}" --fresh >/dev/null
# shellcheck disable=SC2086  # one target name per word
cmake --build build/sanitize -j "$(nproc)" --target $targets

out=build/sanitize/fuzz
mkdir -p $out/artifacts
status=0
root=$PWD  # absolute paths: fuzz_tool runs in a private temporary directory
for t in $targets; do
  mkdir -p "$out/work/$t" "fuzz/corpus/$t"
  echo "== fuzz $t (${seconds} s) =="
  if ! "$root/$out/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
      -print_final_stats=1 -artifact_prefix="$root/$out/artifacts/$t-" \
      "$root/$out/work/$t" "$root/fuzz/corpus/$t" >"$out/$t.log" 2>&1; then
    tail -n 60 "$out/$t.log"
    echo "fuzz: $t FAILED (log $out/$t.log, input in $out/artifacts/)" >&2
    status=1
  else
    grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb" "$out/$t.log" | tr '\n' ' '
    echo
  fi
done
exit $status
