#include <mmbal/core/error.hpp>
#include <mmbal/core/parallel.hpp>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

TEST_CASE("parallel_for_index runs every index exactly once for any thread count", "[core][parallel][concurrency]") {
  for (const unsigned threads : {0u, 1u, 2u, 3u, 8u})
    for (const std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{2}, std::size_t{5}, std::size_t{64}}) {
      INFO("threads " << threads << " count " << count);
      std::vector<std::atomic<int>> calls(count);
      mmbal::parallel_for_index(count, threads, [&](std::size_t i) { calls[i].fetch_add(1); });
      for (std::size_t i = 0; i < count; ++i) REQUIRE(calls[i].load() == 1);
    }
}

TEST_CASE("parallel_for_index with one thread runs on the caller in index order", "[core][parallel][concurrency]") {
  std::vector<std::size_t> order;
  mmbal::parallel_for_index(6, 1, [&](std::size_t i) { order.push_back(i); });
  CHECK(order == std::vector<std::size_t>{0, 1, 2, 3, 4, 5});
}

TEST_CASE("parallel_for_index rethrows the exception of the lowest failing index", "[core][parallel][concurrency]") {
  for (const unsigned threads : {1u, 2u, 4u}) {
    INFO("threads " << threads);
    std::atomic<int> finished{0};
    try {
      mmbal::parallel_for_index(8, threads, [&](std::size_t i) {
        if (i == 3 || i == 6) mmbal::detail::throw_invalid("task ", i, " failed");
        ++finished;
      });
      FAIL("no exception");
    } catch (const mmbal::invalid_input& e) {
      CHECK(std::string(e.what()).find("task 3 failed") != std::string::npos);
    }
    CHECK(finished.load() == 6);  // the other tasks still ran
  }
}

TEST_CASE("parallel_for_dag runs every task once, after all of its dependencies", "[core][parallel][concurrency]") {
  for (const unsigned threads : {0u, 1u, 2u, 3u, 8u})
    for (const std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{40}}) {
      INFO("threads " << threads << " count " << count);
      // A fixed pseudo-random graph: task i waits for up to three lower indices.
      std::vector<std::vector<std::size_t>> after(count);
      for (std::size_t i = 1; i < count; ++i)
        for (std::size_t k = 0; k < 3; ++k)
          if ((i * 7 + k * 13) % 5 != 0) after[i].push_back((i * 31 + k * 17) % i);
      std::vector<std::atomic<int>> calls(count);
      std::atomic<int> violations{0};
      const auto errors = mmbal::parallel_for_dag(count, threads, after, [&](std::size_t i) {
        for (const std::size_t j : after[i])
          if (calls[j].load() != 1) ++violations;
        calls[i].fetch_add(1);
      });
      CHECK(violations.load() == 0);
      REQUIRE(errors.size() == count);
      for (std::size_t i = 0; i < count; ++i) {
        CHECK(calls[i].load() == 1);
        CHECK(!errors[i]);
      }
    }
}

TEST_CASE("parallel_for_dag skips the dependents of a failed task and reports its exception",
          "[core][parallel][concurrency]") {
  // 0 → 2 → 4; 1 → 3; task 2 throws: 4 is skipped, 0, 1, 3 run.
  const std::vector<std::vector<std::size_t>> after{{}, {}, {0}, {1}, {2}};
  for (const unsigned threads : {1u, 2u, 4u}) {
    INFO("threads " << threads);
    std::vector<std::atomic<int>> calls(5);
    const auto errors = mmbal::parallel_for_dag(5, threads, after, [&](std::size_t i) {
      calls[i].fetch_add(1);
      if (i == 2) mmbal::detail::throw_invalid("task ", i, " failed");
    });
    CHECK(calls[0].load() == 1);
    CHECK(calls[1].load() == 1);
    CHECK(calls[2].load() == 1);
    CHECK(calls[3].load() == 1);
    CHECK(calls[4].load() == 0);
    for (std::size_t i = 0; i < 5; ++i) CHECK(static_cast<bool>(errors[i]) == (i == 2));
    CHECK_THROWS_WITH(std::rethrow_exception(errors[2]), Catch::Contains("task 2 failed"));
  }
}

TEST_CASE("parallel_for_dag: a free thread takes a ready task before the next index", "[core][parallel][concurrency]") {
  // 1 waits for 0, and 0 returns only once 2 has run (or after 10 s): a thread that claimed
  // index 1 next would wait on 0 while 2 is ready, and 0 would time out.
  const std::vector<std::vector<std::size_t>> after{{}, {0}, {}};
  for (const unsigned threads : {2u, 3u}) {
    INFO("threads " << threads);
    std::mutex m;
    std::condition_variable cv;
    bool two_ran = false, two_ran_before_zero_returned = false;
    std::vector<std::size_t> order;
    const auto errors = mmbal::parallel_for_dag(3, threads, after, [&](std::size_t i) {
      std::unique_lock lock(m);
      if (i == 0) two_ran_before_zero_returned = cv.wait_for(lock, std::chrono::seconds(10), [&] { return two_ran; });
      if (i == 2) two_ran = true;
      order.push_back(i);
      cv.notify_all();
    });
    CHECK(two_ran_before_zero_returned);
    CHECK(order == std::vector<std::size_t>{2, 0, 1});
    for (const auto& e : errors) CHECK(!e);
  }
}

TEST_CASE("parallel_for_dag with one thread runs on the caller in index order", "[core][parallel][concurrency]") {
  std::vector<std::vector<std::size_t>> after(30);
  for (std::size_t i = 2; i < after.size(); ++i) after[i] = {i / 2, i - 2};
  std::vector<std::size_t> order;
  const std::thread::id caller = std::this_thread::get_id();
  bool on_caller = true;
  const auto errors = mmbal::parallel_for_dag(after.size(), 1, after, [&](std::size_t i) {
    order.push_back(i);
    on_caller &= std::this_thread::get_id() == caller;
  });
  CHECK(on_caller);
  for (const auto& e : errors) CHECK(!e);
  REQUIRE(order.size() == after.size());
  for (std::size_t i = 0; i < order.size(); ++i) CHECK(order[i] == i);
}

TEST_CASE("parallel_for_dag rejects dependencies on the same or a later task", "[core][parallel]") {
  const auto noop = [](std::size_t) {};
  CHECK_THROWS_AS(mmbal::parallel_for_dag(2, 2, {{}, {1}}, noop), mmbal::invalid_input);
  CHECK_THROWS_AS(mmbal::parallel_for_dag(2, 2, {{1}, {}}, noop), mmbal::invalid_input);
  CHECK_THROWS_AS(mmbal::parallel_for_dag(2, 2, {{}}, noop), mmbal::invalid_input);
}
