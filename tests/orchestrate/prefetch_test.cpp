// Tests of prefetching_planner (docs/DESIGN.md §5.5 "Prefetching"): order, equality with
// planning inline, the bounded queue, exception propagation and shutdown. No test times
// anything: every property is an ordering or equality, checked with counters.
#include "orchestrate/support.hpp"

#include <mmbal/orchestrate/prefetch.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace orchestrate_test;
using mmbal::orchestrate::prefetched_step;
using mmbal::orchestrate::prefetching_planner;

namespace {

constexpr mmbal::rank_t ranks = 8;

/// Step k's global batch: a different omni draw (and size) per step.
mmbal::workload batch_of(std::uint64_t k) { return omni(ranks * (6 + k % 5), ranks, 100 + k); }

// Bit-identical plans, and the fingerprint recomputed from the plan.
void require_same_plan(const orchestration& a, const orchestration& b) {
  require_same(a, b);
  REQUIRE(a.fingerprint == orchestrator::plan_fingerprint(a));
}

}  // namespace

TEST_CASE("prefetching_planner: steps arrive in order, each equal to planning inline", "[orchestrate][concurrency]") {
  for (const std::size_t depth : {std::size_t{1}, std::size_t{2}}) {
    for (const bool recycle : {false, true}) {
      INFO("depth " << depth << " recycle " << recycle);
      constexpr std::uint64_t steps = 7;
      std::atomic<std::uint64_t> requested{0};  // next() calls started by the consumer
      std::atomic<bool> ahead_ok{true};
      const auto orch = make(ranks, 4);
      prefetching_planner loader(
          orch,
          [&](std::uint64_t k) -> std::optional<mmbal::workload> {
            // The bounded queue: step k is gathered only while fewer than `depth` steps wait,
            // so only once the consumer has asked for step k - depth + 1.
            if (k >= requested.load() + depth) ahead_ok = false;
            if (k == steps) return std::nullopt;
            return batch_of(k);
          },
          depth);
      REQUIRE(loader.depth() == depth);
      for (std::uint64_t k = 0; k < steps; ++k) {
        requested.fetch_add(1);
        std::optional<prefetched_step> s = loader.next();
        REQUIRE(s.has_value());
        REQUIRE(s->index == k);
        const mmbal::workload expected_batch = batch_of(k);
        REQUIRE(s->batch.samples.size() == expected_batch.samples.size());
        require_same_plan(s->plan, orch.plan(expected_batch));
        if (recycle) loader.recycle(std::move(*s));
      }
      requested.fetch_add(1);
      REQUIRE_FALSE(loader.next().has_value());
      REQUIRE_FALSE(loader.next().has_value());  // the end is sticky
      REQUIRE(ahead_ok.load());
    }
  }
}

TEST_CASE("prefetching_planner: a source exception reaches the consumer after the earlier steps",
          "[orchestrate][concurrency]") {
  for (const std::size_t depth : {std::size_t{1}, std::size_t{2}}) {
    std::atomic<std::uint64_t> calls{0};
    prefetching_planner loader(
        make(ranks, 4),
        [&](std::uint64_t k) -> std::optional<mmbal::workload> {
          ++calls;
          if (k == 3) throw std::runtime_error("metadata gather failed at step 3");
          return batch_of(k);
        },
        depth);
    for (std::uint64_t k = 0; k < 3; ++k) REQUIRE(loader.next()->index == k);
    REQUIRE_THROWS_WITH(loader.next(), "metadata gather failed at step 3");
    REQUIRE_FALSE(loader.next().has_value());
    loader.stop();
    REQUIRE(calls.load() == 4);  // the producer stopped at the failing step
  }
}

TEST_CASE("prefetching_planner: a planning error is re-thrown as the orchestrator's invalid_input",
          "[orchestrate][concurrency]") {
  prefetching_planner loader(make(ranks, 4), [&](std::uint64_t k) -> std::optional<mmbal::workload> {
    mmbal::workload w = batch_of(k);
    if (k == 2) w.samples[5].rank = ranks;  // a sample on a rank the orchestrator does not have
    return w;
  });
  REQUIRE(loader.next()->index == 0);
  REQUIRE(loader.next()->index == 1);
  REQUIRE_THROWS_AS(loader.next(), mmbal::invalid_input);
  REQUIRE_FALSE(loader.next().has_value());
}

TEST_CASE("prefetching_planner: stop mid-stream ends an endless source cleanly", "[orchestrate][concurrency]") {
  SECTION("producer blocked on a full queue") {
    std::atomic<std::uint64_t> calls{0};
    prefetching_planner loader(
        make(ranks, 4),
        [&](std::uint64_t k) -> std::optional<mmbal::workload> {
          ++calls;
          return batch_of(k);
        },
        2);
    REQUIRE(loader.next()->index == 0);
    REQUIRE(loader.next()->index == 1);
    loader.stop();
    REQUIRE_FALSE(loader.next().has_value());
    REQUIRE(loader.stop_requested());
    REQUIRE(calls.load() == 2 + 2);  // exactly depth beyond the consumed steps, stop or not
    loader.stop();                   // idempotent
  }
  SECTION("destroyed without consuming anything") {
    std::atomic<std::uint64_t> calls{0};
    {
      prefetching_planner loader(make(ranks, 4), [&](std::uint64_t k) -> std::optional<mmbal::workload> {
        ++calls;
        return batch_of(k);
      });
    }
    REQUIRE(calls.load() == 1);  // depth 1: step 0 has room, so it is planned even after stop
  }
  SECTION("a running source that polls stop_requested") {
    std::atomic<prefetching_planner*> self{nullptr};
    std::atomic<bool> waiting{false}, saw_stop{false};
    prefetching_planner loader(make(ranks, 4), [&](std::uint64_t k) -> std::optional<mmbal::workload> {
      if (k == 0) return batch_of(0);
      // An endless wait for data, ended only by stop (as a blocking reader would be).
      waiting = true;
      while (self.load() == nullptr || !self.load()->stop_requested()) std::this_thread::yield();
      saw_stop = true;
      return std::nullopt;
    });
    self = &loader;
    REQUIRE(loader.next()->index == 0);
    while (!waiting.load()) std::this_thread::yield();  // the producer is inside source(1)
    loader.stop();
    REQUIRE(saw_stop.load());
    REQUIRE_FALSE(loader.next().has_value());
  }
}

namespace {

/// A collective of `members` threads, as an all-gather of the metadata is across ranks: each
/// step's call returns once every member has made it. A member that waits more than 10 s
/// throws instead of hanging the test run.
class timed_collective {
 public:
  explicit timed_collective(int members) : members_(members) {}

  void arrive(std::uint64_t step) {
    std::unique_lock lock(mutex_);
    ++arrived_[step];
    cv_.notify_all();
    if (!cv_.wait_for(lock, std::chrono::seconds(10), [&] { return arrived_[step] == members_; }))
      throw std::runtime_error("collective of step " + std::to_string(step) + " timed out: a member skipped it");
  }

 private:
  int members_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<std::uint64_t, int> arrived_;
};

}  // namespace

TEST_CASE("prefetching_planner: ranks stopping at different times leave no collective source waiting",
          "[orchestrate][concurrency]") {
  // Two planners stand for two ranks whose source is a collective. Each consumer takes the
  // same number of steps and stops, one at once and one later: both producers must make the
  // same calls (exactly taken + depth steps), so neither waits in a step the other skipped.
  for (const std::size_t depth : {std::size_t{1}, std::size_t{2}}) {
    INFO("depth " << depth);
    constexpr std::uint64_t taken = 3;
    timed_collective gather(2);
    std::atomic<std::uint64_t> calls[2] = {0, 0};
    std::atomic<bool> failed{false};
    std::vector<std::thread> ranks_threads;
    for (int r = 0; r < 2; ++r) {
      ranks_threads.emplace_back([&, r] {
        prefetching_planner loader(
            make(ranks, 4),
            [&, r](std::uint64_t k) -> std::optional<mmbal::workload> {
              ++calls[r];
              gather.arrive(k);
              return batch_of(k);
            },
            depth);
        try {
          for (std::uint64_t k = 0; k < taken; ++k)
            if (std::optional<prefetched_step> s = loader.next(); !s || s->index != k) failed = true;
        } catch (const std::exception&) {
          failed = true;
        }
        if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(50));
        loader.stop();
      });
    }
    for (std::thread& t : ranks_threads) t.join();
    REQUIRE_FALSE(failed.load());
    REQUIRE(calls[0].load() == taken + depth);
    REQUIRE(calls[1].load() == taken + depth);
  }
}

TEST_CASE("prefetching_planner: stop called by the source only requests the stop", "[orchestrate][concurrency]") {
  // It joined its own thread: std::terminate ("Resource deadlock avoided").
  std::atomic<prefetching_planner*> self{nullptr};
  prefetching_planner loader(make(ranks, 4), [&](std::uint64_t k) -> std::optional<mmbal::workload> {
    if (k == 1) {
      while (self.load() == nullptr) std::this_thread::yield();
      self.load()->stop();
    }
    return batch_of(k);
  });
  self = &loader;
  REQUIRE(loader.next()->index == 0);
  REQUIRE_FALSE(loader.next().has_value());
  REQUIRE(loader.stop_requested());
}

TEST_CASE("prefetching_planner: bad arguments are invalid_input", "[orchestrate]") {
  const auto source = [](std::uint64_t) -> std::optional<mmbal::workload> { return std::nullopt; };
  REQUIRE_THROWS_AS(prefetching_planner(make(ranks, 4), source, 0), mmbal::invalid_input);
  REQUIRE_THROWS_AS(prefetching_planner(make(ranks, 4), source, 3), mmbal::invalid_input);
  REQUIRE_THROWS_AS(prefetching_planner(make(ranks, 4), nullptr), mmbal::invalid_input);
  prefetching_planner empty(make(ranks, 4), source);
  REQUIRE_FALSE(empty.next().has_value());
}
