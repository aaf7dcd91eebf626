// alltoall_plan + pack/unpack: invariants, byte-exact in-process execution against an
// independent reference, typed units, fingerprints.
#include <mmbal/rearrange/alltoall_plan.hpp>
#include <mmbal/rearrange/pack.hpp>

#include <catch2/catch.hpp>

#include "rearrange_helpers.hpp"

#include <numeric>
#include <vector>

using mmbal::rearrangement;

namespace {

void check_plan_invariants(const rearrangement& r, std::span<const std::uint64_t> sizes,
                           const std::vector<mmbal::alltoall_plan>& plans) {
  const mmbal::rank_t d = r.ranks;
  std::uint64_t total_sent = 0, total_recv = 0, total_items_sent = 0, total_items_recv = 0;
  for (mmbal::rank_t p = 0; p < d; ++p) {
    const auto& pl = plans[p];
    REQUIRE(pl.send_counts.size() == d);
    REQUIRE(pl.recv_displs.size() == d);
    std::uint64_t acc = 0;
    for (mmbal::rank_t q = 0; q < d; ++q) {
      CHECK(pl.send_displs[q] == acc);
      acc += pl.send_counts[q];
      CHECK(pl.send_counts[q] == plans[q].recv_counts[p]);
    }
    CHECK(acc == pl.send_bytes);
    acc = 0;
    for (mmbal::rank_t q = 0; q < d; ++q) {
      CHECK(pl.recv_displs[q] == acc);
      acc += pl.recv_counts[q];
    }
    CHECK(acc == pl.recv_bytes);
    CHECK(pl.input_bytes == pl.send_bytes);
    CHECK(pl.output_bytes == pl.recv_bytes);
    CHECK(std::accumulate(pl.pack_sizes.begin(), pl.pack_sizes.end(), std::uint64_t{0}) == pl.send_bytes);
    CHECK(std::accumulate(pl.unpack_sizes.begin(), pl.unpack_sizes.end(), std::uint64_t{0}) == pl.recv_bytes);
    // Reference sums straight from the rearrangement.
    std::uint64_t in = 0, out = 0, n_in = 0, n_out = 0;
    for (std::size_t i = 0; i < r.size(); ++i) {
      if (r.source[i].rank == p) in += sizes[i], ++n_in;
      if (r.destination[i].rank == p) out += sizes[i], ++n_out;
    }
    CHECK(pl.input_bytes == in);
    CHECK(pl.output_bytes == out);
    CHECK(pl.pack_slots.size() == n_in);
    CHECK(pl.unpack_slots.size() == n_out);
    // Every local slot packed / landed exactly once.
    std::vector<int> seen(n_in, 0), landed(n_out, 0);
    for (auto s : pl.pack_slots) ++seen.at(s);
    for (auto s : pl.unpack_slots) ++landed.at(s);
    CHECK(std::count(seen.begin(), seen.end(), 1) == static_cast<long>(n_in));
    CHECK(std::count(landed.begin(), landed.end(), 1) == static_cast<long>(n_out));
    total_sent += pl.send_bytes;
    total_recv += pl.recv_bytes;
    total_items_sent += n_in;
    total_items_recv += n_out;
  }
  CHECK(total_sent == std::accumulate(sizes.begin(), sizes.end(), std::uint64_t{0}));
  CHECK(total_recv == total_sent);
  CHECK(total_items_sent == r.size());
  CHECK(total_items_recv == r.size());
}

}  // namespace

TEST_CASE("plans conserve items and bytes and agree pairwise", "[rearrange][plan]") {
  auto g = mmbal::make_rng(21);
  for (int t = 0; t < 40; ++t) {
    const auto n = static_cast<std::uint32_t>(mmbal::uniform_below(g, 120));
    const auto d = static_cast<mmbal::rank_t>(1 + mmbal::uniform_below(g, 10));
    const auto r = rearrange_test::random_rearrangement(g, n, d, 0.3);
    const auto sizes = rearrange_test::random_sizes(g, n);
    check_plan_invariants(r, sizes, mmbal::make_alltoall_plans(r, sizes));
  }
}

TEST_CASE("pack + exchange + unpack deliver byte-exact", "[rearrange][plan]") {
  auto g = mmbal::make_rng(23);
  struct shape {
    std::uint32_t n;
    mmbal::rank_t d;
    double idle;
  };
  const std::vector<shape> shapes{{0, 1, 0.0},   {1, 1, 0.0}, {17, 1, 0.0},  {40, 2, 0.0}, {40, 7, 0.5},
                                  {200, 8, 0.2}, {5, 9, 0.6}, {300, 3, 0.0}, {64, 16, 0.3}};
  for (const shape& s : shapes)
    for (int t = 0; t < 6; ++t) {
      const auto r = rearrange_test::random_rearrangement(g, s.n, s.d, s.idle);
      auto sizes = rearrange_test::random_sizes(g, s.n, t % 2 ? 3.0 : 200.0);
      if (t == 5) std::fill(sizes.begin(), sizes.end(), 0);  // every item empty
      const auto plans = mmbal::make_alltoall_plans(r, sizes);
      const auto inputs = rearrange_test::buffers_for(r.source, s.d, sizes);
      const auto expected = rearrange_test::buffers_for(r.destination, s.d, sizes);
      const auto outputs = mmbal::exchange_in_process<std::byte>(plans, inputs);
      REQUIRE(outputs.size() == s.d);
      for (mmbal::rank_t q = 0; q < s.d; ++q) CHECK(outputs[q] == expected[q]);
      // Backward: the inverse plan brings everything home.
      const auto back = mmbal::exchange_in_process<std::byte>(mmbal::make_alltoall_plans(r.inverse(), sizes), outputs);
      for (mmbal::rank_t q = 0; q < s.d; ++q) CHECK(back[q] == inputs[q]);
    }
}

TEST_CASE("pack/unpack with element units (float) and self sends", "[rearrange][plan]") {
  // Two ranks; item 0 stays on rank 0 (self send), item 1 goes 0 -> 1, item 2 goes 1 -> 0.
  const rearrangement r{2, {{0, 0}, {0, 1}, {1, 0}}, {{0, 1}, {1, 0}, {0, 0}}};
  const std::vector<std::uint64_t> elems{2, 3, 1};
  const auto plans = mmbal::make_alltoall_plans(r, elems);
  CHECK(plans[0].send_counts == std::vector<std::uint64_t>{2, 3});
  CHECK(plans[0].recv_counts == std::vector<std::uint64_t>{2, 1});
  CHECK(plans[0].remote_send_bytes() == 3);
  CHECK(plans[0].remote_recv_bytes() == 1);
  CHECK(plans[0].pack_slots == std::vector<std::uint32_t>{0, 1});
  CHECK(plans[0].unpack_slots == std::vector<std::uint32_t>{1, 0});
  CHECK(plans[0].unpack_offsets == std::vector<std::uint64_t>{1, 0});
  const std::vector<std::vector<float>> in{{1.f, 2.f, 3.f, 4.f, 5.f}, {9.f}};
  const auto out = mmbal::exchange_in_process<float>(plans, in);
  CHECK(out[0] == std::vector<float>{9.f, 1.f, 2.f});
  CHECK(out[1] == std::vector<float>{3.f, 4.f, 5.f});
}

TEST_CASE("plan builders and executors reject bad arguments", "[rearrange][plan]") {
  const rearrangement r{2, {{0, 0}, {1, 0}}, {{1, 0}, {0, 0}}};
  const std::vector<std::uint64_t> sizes{4, 4};
  CHECK_THROWS_WITH(mmbal::make_alltoall_plan(r, sizes, 2), Catch::Contains("rank 2"));
  CHECK_THROWS_WITH(mmbal::make_alltoall_plan(r, std::vector<std::uint64_t>{1}, 0), Catch::Contains("1 item_bytes"));
  const auto p = mmbal::make_alltoall_plan(r, sizes, 0);
  std::vector<std::byte> small(3), ok(4);
  CHECK_THROWS_WITH(mmbal::pack(p, small, ok), Catch::Contains("input has 3"));
  CHECK_THROWS_WITH(mmbal::unpack(p, ok, small), Catch::Contains("output has 3"));
  const rearrangement huge{1, {{0, 0}, {0, 1}}, {{0, 0}, {0, 1}}};
  CHECK_THROWS_AS(mmbal::make_alltoall_plan(huge, std::vector<std::uint64_t>{~0ULL, 2}, 0), mmbal::invalid_input);
}

TEST_CASE("fingerprints are equal for equal plans and differ on any single change", "[rearrange][fingerprint]") {
  auto g = mmbal::make_rng(29);
  for (int t = 0; t < 30; ++t) {
    const auto r = rearrange_test::random_rearrangement(g, 40, 5, 0.0);
    const auto sizes = rearrange_test::random_sizes(g, 40);
    const auto f = mmbal::fingerprint(r, sizes);
    const rearrangement copy = r;  // independently held, equal content
    CHECK(mmbal::fingerprint(copy, std::vector<std::uint64_t>(sizes)) == f);
    // Swap two destinations (still a valid plan): differs.
    auto swapped = r;
    const auto i = static_cast<std::size_t>(mmbal::uniform_below(g, 40));
    auto j = static_cast<std::size_t>(mmbal::uniform_below(g, 40));
    if (j == i) j = (i + 1) % 40;
    std::swap(swapped.destination[i], swapped.destination[j]);
    CHECK(mmbal::fingerprint(swapped, sizes) != f);
    // One destination changed (any field), one size changed, the rank count changed.
    auto one = r;
    one.destination[i].slot += 1;
    CHECK(mmbal::fingerprint(one, sizes) != f);
    one = r;
    one.destination[i].rank ^= 1;
    CHECK(mmbal::fingerprint(one, sizes) != f);
    auto s2 = sizes;
    s2[i] += 1;
    CHECK(mmbal::fingerprint(r, s2) != f);
    auto more = r;
    more.ranks += 1;
    CHECK(mmbal::fingerprint(more, sizes) != f);
    // Source and destination are not interchangeable.
    CHECK(mmbal::fingerprint(r.inverse(), sizes) != f);
  }
  const std::vector<std::uint64_t> parts{1, 2}, swapped_parts{2, 1};
  CHECK(mmbal::combine_fingerprints(parts) != mmbal::combine_fingerprints(swapped_parts));
}

TEST_CASE("exchange_in_process, pack and unpack refuse a corrupt plan", "[rearrange]") {
  using Catch::Matchers::Contains;
  // Per-peer vectors of the wrong size were indexed anyway (UB: a reference to null).
  std::vector<mmbal::alltoall_plan> plans(1);
  plans[0].rank = 0;
  plans[0].ranks = 1;
  const std::vector<std::vector<std::byte>> in(1);
  REQUIRE_THROWS_WITH(mmbal::exchange_in_process<std::byte>(plans, in), Contains("per-peer vectors"));
  // An item offset past the input was copied from.
  mmbal::alltoall_plan p;
  p.ranks = 1;
  p.send_counts = p.recv_counts = {4};
  p.send_displs = p.recv_displs = {0};
  p.send_bytes = p.recv_bytes = p.input_bytes = p.output_bytes = 4;
  p.pack_slots = p.unpack_slots = {0};
  p.pack_sizes = p.unpack_sizes = {4};
  p.pack_offsets = {6};
  p.unpack_offsets = {0};
  std::vector<std::byte> input(4), send(4);
  REQUIRE_THROWS_WITH(mmbal::pack<std::byte>(p, input, send), Contains("pack: a run of 4 units at 6"));
  p.pack_offsets = {0};
  REQUIRE_NOTHROW(mmbal::pack<std::byte>(p, input, send));
  p.unpack_offsets = {1};
  REQUIRE_THROWS_WITH(mmbal::unpack<std::byte>(p, send, input), Contains("unpack: a run of 4 units at 0 -> 1"));
}
