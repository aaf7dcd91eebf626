// The loopback transport: whole rearrangements executed byte-exactly on random plans, the
// threaded world running the generic (transport-agnostic) operations, and failure handling.
#include "transport/random_plans.hpp"

#include <mmbal/rearrange/alltoall_plan.hpp>
#include <mmbal/transport/concepts.hpp>
#include <mmbal/transport/loopback.hpp>

#include <catch2/catch.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

using namespace mmbal::transport;
using mmbal::rank_t;

namespace {

std::vector<std::vector<std::byte>> buffers(std::span<const mmbal::location> where,
                                            std::span<const std::uint64_t> sizes, rank_t d, std::uint64_t seed) {
  std::vector<std::vector<std::byte>> out;
  for (rank_t q = 0; q < d; ++q) out.push_back(mmbal_test::layout_buffer(where, sizes, q, seed));
  return out;
}

}  // namespace

TEST_CASE("run_rearrangement delivers every byte, forward and backward, on random plans") {
  for (std::uint64_t seed = 0; seed < 80; ++seed) {
    auto g = mmbal::make_rng(seed, 2);
    const auto d = static_cast<rank_t>(seed % 10 == 0 ? 1 : 1 + mmbal::uniform_below(g, 8));
    const auto n = static_cast<std::uint32_t>(mmbal::uniform_below(g, 70));
    const auto r = mmbal_test::random_rearrangement(g, n, d, 0.3);
    const auto sizes = mmbal_test::random_sizes(g, n);
    const auto inputs = buffers(r.source, sizes, d, seed);
    const auto outputs = run_rearrangement(r, sizes, inputs);
    // Reference: the destination layout's buffers built directly from the payload function.
    CHECK(outputs == buffers(r.destination, sizes, d, seed));
    const auto back = run_rearrangement(r.inverse(), sizes, outputs);
    CHECK(back == inputs);
  }
}

TEST_CASE("run_rearrangement edge cases: no items, all zero-byte items, d = 1") {
  mmbal::rearrangement empty{3, {}, {}};
  const std::vector<std::vector<std::byte>> none(3);
  CHECK(run_rearrangement(empty, {}, none) == none);

  auto g = mmbal::make_rng(5);
  const auto r = mmbal_test::random_rearrangement(g, 20, 4, 0.0);
  const std::vector<std::uint64_t> zero(20, 0);
  const std::vector<std::vector<std::byte>> empties(4);
  CHECK(run_rearrangement(r, zero, empties) == empties);

  const auto one = mmbal_test::random_rearrangement(g, 30, 1);
  const auto sizes = mmbal_test::random_sizes(g, 30);
  const std::vector<std::vector<std::byte>> in{mmbal_test::layout_buffer(one.source, sizes, 0, 11)};
  const auto out = run_rearrangement(one, sizes, in);
  CHECK(out[0] == mmbal_test::layout_buffer(one.destination, sizes, 0, 11));
}

TEST_CASE("run_rearrangement rejects wrong inputs, naming the rank") {
  auto g = mmbal::make_rng(6);
  const auto r = mmbal_test::random_rearrangement(g, 10, 2, 0.0);
  const std::vector<std::uint64_t> sizes(10, 4);
  auto in = buffers(r.source, sizes, 2, 1);
  in[1].push_back(std::byte{0});
  CHECK_THROWS_WITH(run_rearrangement(r, sizes, in), Catch::Contains("rank 1"));
  in.pop_back();
  CHECK_THROWS_AS(run_rearrangement(r, sizes, in), mmbal::invalid_input);
  const std::vector<std::uint64_t> short_sizes(9, 4);
  CHECK_THROWS_AS(run_rearrangement(r, short_sizes, buffers(r.source, sizes, 2, 1)), mmbal::invalid_input);
}

TEST_CASE("loopback world: generic execute equals the single-threaded run", "[concurrency]") {
  for (std::uint64_t seed = 0; seed < 12; ++seed) {
    auto g = mmbal::make_rng(seed, 3);
    const auto d = static_cast<rank_t>(1 + seed % 5);
    const auto n = static_cast<std::uint32_t>(mmbal::uniform_below(g, 60));
    const auto r = mmbal_test::random_rearrangement(g, n, d, 0.3);
    const auto sizes = mmbal_test::random_sizes(g, n);
    const auto expected = buffers(r.destination, sizes, d, seed);
    std::vector<std::vector<std::byte>> got(d), back(d);
    loopback_world world(d);
    world.run([&](loopback_transport& t) {
      const auto in = mmbal_test::layout_buffer(r.source, sizes, t.rank(), seed);
      std::vector<std::byte> out(mmbal::make_alltoall_plan(r, sizes, t.rank()).output_bytes);
      execute(t, r, sizes, in, out);
      got[t.rank()] = out;
      std::vector<std::byte> ret(in.size());
      execute(t, r.inverse(), sizes, out, ret);
      back[t.rank()] = ret;
    });
    CHECK(got == expected);
    CHECK(back == buffers(r.source, sizes, d, seed));
  }
}

TEST_CASE("loopback world: metadata gather gives every rank the same global workload", "[concurrency]") {
  const rank_t d = 3;
  std::vector<mmbal::workload> locals(d);
  // Rank-local modality tables in different orders: the merge must remap ids.
  for (rank_t q = 0; q < d; ++q) {
    auto& w = locals[q];
    const auto audio = q == 1 ? w.intern_modality("audio") : mmbal::modality_id{0};
    const auto image = w.intern_modality("image");
    for (std::uint32_t i = 0; i < q + 1; ++i) {
      mmbal::sample s;
      s.id = 100 * q + i;
      if (i % 2 == 0) s.group = q;
      s.segments.push_back({mmbal::text_modality, 10 + i, 10 + i});
      s.segments.push_back({image, 64, 256});
      if (q == 1) s.segments.push_back({audio, 7, 14});
      w.samples.push_back(s);
    }
  }
  std::vector<mmbal::workload> gathered(d);
  loopback_world world(d);
  world.run([&](loopback_transport& t) { gathered[t.rank()] = gather_workload(t, locals[t.rank()]); });
  for (rank_t q = 1; q < d; ++q) CHECK(gathered[q] == gathered[0]);
  const auto& w = gathered[0];
  REQUIRE(w.samples.size() == 1 + 2 + 3);
  CHECK(w.modalities == std::vector<std::string>{"text", "image", "audio"});
  std::size_t k = 0;
  for (rank_t q = 0; q < d; ++q)
    for (std::uint32_t i = 0; i < q + 1; ++i, ++k) {
      const auto& s = w.samples[k];
      CHECK(s.rank == q);
      CHECK(s.id == 100 * q + i);
      CHECK(s.group.has_value() == (i % 2 == 0));
      CHECK(s.segments[1].modality == 1);  // image
      CHECK(s.segments[1].encoder_len == 256);
      if (q == 1) CHECK(s.segments[2].modality == 2);  // audio
    }
}

TEST_CASE("loopback world: one rank's diverging plan makes every rank throw", "[concurrency]") {
  const rank_t d = 4;
  auto g = mmbal::make_rng(9);
  const auto r = mmbal_test::random_rearrangement(g, 40, d, 0.0);
  const auto sizes = mmbal_test::random_sizes(g, 40);
  for (rank_t culprit = 0; culprit < d; ++culprit) {
    std::atomic<int> threw{0};
    std::vector<std::string> messages(d);  // Catch assertions are not thread-safe: check after join
    loopback_world world(d);
    CHECK_THROWS_AS(world.run([&](loopback_transport& t) {
      auto mine = sizes;
      if (t.rank() == culprit) mine[3] += 1;  // altered metadata on one rank
      const auto plan = mmbal::make_alltoall_plan(r, mine, t.rank());
      const auto in = mmbal_test::layout_buffer(r.source, mine, t.rank(), 1);
      std::vector<std::byte> out(plan.output_bytes);
      try {
        execute(t, r, mine, in, out);
      } catch (const mmbal::runtime_failure& e) {
        ++threw;
        messages[t.rank()] = e.what();
        throw;
      }
    }),
                    mmbal::runtime_failure);
    CHECK(threw == static_cast<int>(d));
    for (const auto& m : messages) CHECK_THAT(m, Catch::Contains("disagree"));
  }
}

TEST_CASE("loopback world: a wrong buffer on one rank throws everywhere, a failing rank never hangs the rest",
          "[concurrency]") {
  const rank_t d = 3;
  auto g = mmbal::make_rng(10);
  const auto r = mmbal_test::random_rearrangement(g, 30, d, 0.0);
  const std::vector<std::uint64_t> sizes(30, 8);
  std::atomic<int> threw{0};
  loopback_world world(d);
  CHECK_THROWS(world.run([&](loopback_transport& t) {
    const auto plan = mmbal::make_alltoall_plan(r, sizes, t.rank());
    const auto in = mmbal_test::layout_buffer(r.source, sizes, t.rank(), 1);
    std::vector<std::byte> out(plan.output_bytes + (t.rank() == 2 ? 1 : 0));
    try {
      execute(t, r, sizes, in, out);
    } catch (const mmbal::invalid_input& e) {  // the bad rank names its buffer
      threw += t.rank() == 2 && std::string(e.what()).find("buffers of") != std::string::npos;
      throw;
    } catch (const mmbal::runtime_failure&) {  // the others learn of it from the check
      threw += t.rank() != 2;
      throw;
    }
  }));
  CHECK(threw == static_cast<int>(d));

  // Raw all_to_all (no collective pre-check): the bad rank is detected inside the collective.
  threw = 0;
  std::vector<std::string> messages(d);
  CHECK_THROWS_AS(world.run([&](loopback_transport& t) {
    const auto plan = mmbal::make_alltoall_plan(r, sizes, t.rank());
    const auto in = mmbal_test::layout_buffer(r.source, sizes, t.rank(), 1);
    std::vector<std::byte> out(plan.output_bytes + (t.rank() == 0 ? 3 : 0));
    try {
      t.all_to_all(plan, in, out);
    } catch (const mmbal::invalid_input& e) {
      ++threw;
      messages[t.rank()] = e.what();
      throw;
    }
  }),
                  mmbal::invalid_input);
  CHECK(threw == static_cast<int>(d));
  for (const auto& m : messages) CHECK_THAT(m, Catch::Contains("rank 0"));

  // A rank that fails outside any collective: the others are released, the original error wins.
  CHECK_THROWS_WITH(world.run([&](loopback_transport& t) {
    if (t.rank() == 1) mmbal::detail::throw_invalid("rank 1 broke");
    std::vector<std::uint64_t> v{t.rank()};
    t.all_reduce_max(v);
  }),
                    "rank 1 broke");
}

TEST_CASE("loopback world: all_reduce_max and all_gather", "[concurrency]") {
  const rank_t d = 5;
  std::vector<std::vector<std::uint64_t>> got(d);
  std::vector<gathered_words> words(d);
  loopback_world world(d);
  world.run([&](loopback_transport& t) {
    std::vector<std::uint64_t> v{t.rank(), 10 - t.rank(), 7};
    t.all_reduce_max(v);
    got[t.rank()] = v;
    std::vector<std::uint32_t> mine(t.rank(), t.rank());  // rank r sends r copies of r
    words[t.rank()] = t.all_gather(mine);
  });
  for (rank_t q = 0; q < d; ++q) {
    CHECK(got[q] == std::vector<std::uint64_t>{4, 10, 7});
    CHECK(words[q].offsets == std::vector<std::uint64_t>{0, 0, 1, 3, 6, 10});
    for (rank_t p = 0; p < d; ++p) CHECK(words[q].of(p).size() == p);
    CHECK(words[q] == words[0]);
  }
  CHECK_THROWS_AS(loopback_world(0), mmbal::invalid_input);
}
