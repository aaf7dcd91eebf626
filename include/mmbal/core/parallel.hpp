#pragma once
/// @file
/// A minimal fork-join helper for independent planning tasks (the orchestrator's phases).
/// No pool, no queue library: planning runs once per training step and has a handful of
/// coarse tasks, so starting a few threads per call costs microseconds against milliseconds.

#include <mmbal/core/error.hpp>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <queue>
#include <thread>
#include <utility>
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

/// Runs `task(i)` for every i in [0, count) on up to `threads` threads (the calling thread is
/// one of them; 0 = `resolve_threads(0)`), where task i runs only after every task of
/// `after[i]` (all of them indices below i) has finished: a free thread takes the lowest index
/// among the tasks whose dependencies have all finished, so the order of the tasks is their
/// priority and no thread waits while another task is ready. (Claiming the next index instead
/// left a thread waiting on an unfinished dependency while later tasks were ready: 1.3 ms idle
/// at the end of the image-heavy plan, bench/RESULTS.md "Session 41 — the task graph takes
/// ready tasks first".) A task that throws is marked failed; a task any of whose `after` tasks
/// failed (or was skipped) is skipped. Returns, per task, the exception it threw (null when it
/// finished or was skipped): the caller chooses which to rethrow, independently of timing.
/// With threads = 1 the tasks run in index order on the caller (the lowest unfinished task is
/// always ready). Guarantee: the set of tasks that run is the same for every thread count.
/// Throws `invalid_input` (before running anything) when `after` has not `count`
/// lists or a list names an index ≥ its own. O(count log count + Σ |after[i]|) besides the
/// tasks; one mutex guards the ready set.
template <class Task>
[[nodiscard]] std::vector<std::exception_ptr> parallel_for_dag(std::size_t count, unsigned threads,
                                                               const std::vector<std::vector<std::size_t>>& after,
                                                               Task&& task) {
  if (after.size() != count)
    detail::throw_invalid("parallel_for_dag: ", after.size(), " dependency lists for ", count, " tasks");
  for (std::size_t i = 0; i < count; ++i)
    for (const std::size_t j : after[i])
      if (j >= i) detail::throw_invalid("parallel_for_dag: task ", i, " waits for task ", j, " (only lower indices)");
  const std::size_t workers = std::min<std::size_t>(resolve_threads(threads), count);
  std::vector<std::exception_ptr> errors(count);
  std::vector<std::vector<std::size_t>> dependents(count);
  std::vector<std::size_t> unfinished(count);  // dependencies not finished yet
  std::vector<char> skip(count, 0);            // a dependency failed or was skipped
  std::vector<std::size_t> ready_storage;
  ready_storage.reserve(count);  // no allocation, and so no exception, inside the workers
  std::priority_queue<std::size_t, std::vector<std::size_t>, std::greater<>> ready(std::greater<>{},
                                                                                   std::move(ready_storage));
  for (std::size_t i = 0; i < count; ++i) {
    unfinished[i] = after[i].size();
    for (const std::size_t j : after[i]) dependents[j].push_back(i);
    if (after[i].empty()) ready.push(i);
  }
  std::mutex mutex;
  std::condition_variable changed;
  std::size_t done = 0;
  auto drain = [&] {
    std::unique_lock lock(mutex);
    for (;;) {
      changed.wait(lock, [&] { return !ready.empty() || done == count; });
      if (ready.empty()) return;
      const std::size_t i = ready.top();
      ready.pop();
      bool ok = false;
      if (!skip[i]) {
        lock.unlock();
        try {
          task(i);
          ok = true;
        } catch (...) {
          errors[i] = std::current_exception();
        }
        lock.lock();
      }
      ++done;
      for (const std::size_t j : dependents[i]) {
        skip[j] |= static_cast<char>(!ok);
        if (--unfinished[j] == 0) ready.push(j);
      }
      changed.notify_all();
    }
  };
  {
    std::vector<std::jthread> helpers;
    helpers.reserve(workers > 0 ? workers - 1 : 0);
    for (std::size_t t = 1; t < workers; ++t) helpers.emplace_back(drain);
    drain();
  }  // joins
  return errors;
}

}  // namespace mmbal
