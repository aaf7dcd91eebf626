#include <mmbal/core/error.hpp>
#include <mmbal/core/parallel.hpp>

#include <catch2/catch.hpp>

#include <atomic>
#include <cstddef>
#include <stdexcept>
#include <string>
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
