#pragma once
/// @file
/// A minimal fork-join helper for independent planning tasks (the orchestrator's phases).
/// No pool, no queue library: planning runs once per training step and has a handful of
/// coarse tasks, so starting a few threads per call costs microseconds against milliseconds.

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <thread>
#include <vector>

namespace mmbal {

/// The number of threads `threads` asks for: itself when > 0, otherwise the machine's
/// hardware concurrency (at least 1).
[[nodiscard]] inline unsigned resolve_threads(unsigned threads) noexcept {
  return threads > 0 ? threads : std::max(1u, std::thread::hardware_concurrency());
}

/// Runs `task(i)` for every i in [0, count) on up to `threads` threads (the calling thread is
/// one of them; 0 = `resolve_threads(0)`), each thread taking the next index in ascending
/// order. Returns when every task has finished. If tasks throw, the exception of the lowest
/// index is rethrown (the others are dropped), so the error does not depend on timing.
/// Tasks must not depend on each other; with threads = 1 they run in index order on the
/// caller. Guarantee: the set of calls is the same for every thread count.
template <class Task>
void parallel_for_index(std::size_t count, unsigned threads, Task&& task) {
  const std::size_t workers = std::min<std::size_t>(resolve_threads(threads), count);
  std::vector<std::exception_ptr> errors(count);
  std::atomic<std::size_t> next{0};
  auto drain = [&] {
    for (std::size_t i = next++; i < count; i = next++) {
      try {
        task(i);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  {
    std::vector<std::jthread> helpers;
    helpers.reserve(workers > 0 ? workers - 1 : 0);
    for (std::size_t t = 1; t < workers; ++t) helpers.emplace_back(drain);
    drain();
  }  // joins
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace mmbal
