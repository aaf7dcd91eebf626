// Micro-batch orders: verl's and DistTrain's rules re-derived by hand, search never worse than
// the others and no better than the brute-force optimum, DistTrain's Figure 11 (Alg. 2).
#include <mmbal/balance/micro_batches.hpp>
#include <mmbal/core/rng.hpp>
#include <mmbal/cost/functions.hpp>
#include <mmbal/pipeline/orders.hpp>
#include <mmbal/spec/pipeline.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <limits>
#include <vector>

using namespace mmbal::pipeline;

namespace {

stage_times encoder_heavy(mmbal::rng_engine& g, std::uint32_t p, std::uint32_t m) {
  stage_times t(p, m);
  for (std::uint32_t j = 0; j < m; ++j) {
    const double enc = mmbal::lognormal(g, 1.0, 0.8), llm = mmbal::uniform_real(g, 0.5, 1.5);
    t.forward_at(0, j) = enc;
    t.backward_at(0, j) = 0.1 * enc;  // frozen encoder, trainable projector
    for (std::uint32_t s = 1; s < p; ++s) {
      t.forward_at(s, j) = llm;
      t.backward_at(s, j) = 2 * llm;
    }
  }
  return t;
}

bool is_permutation_of_m(const std::vector<std::uint32_t>& o, std::uint32_t m) {
  std::vector<std::uint32_t> s = o;
  std::sort(s.begin(), s.end());
  return s == identity_order(m);
}

}  // namespace

TEST_CASE("verl's order: largest in the middle, small ones at both ends") {
  // workloads 0..6 = 5, 1, 7, 3, 6, 2, 4 -> sorted descending: 2(7) 4(6) 0(5) 6(4) 3(3) 5(2) 1(1)
  // even positions 2,0,3,1 reversed -> 1 3 0 2; odd positions -> 4 6 5
  stage_times t(1, 7);
  t.forward = {5, 1, 7, 3, 6, 2, 4};
  CHECK(verl_order(t) == std::vector<std::uint32_t>{1, 3, 0, 2, 4, 6, 5});
  // workload sums both directions and every stage; ties: larger index first
  stage_times u(2, 4);
  u.forward = {1, 1, 1, 1, 0, 0, 0, 3};
  u.backward = {0, 0, 0, 0, 2, 2, 2, 0};
  // workloads 3, 3, 3, 4 -> sorted: 3, 2, 1, 0 -> evens (3, 1) reversed: 1, 3; odds: 2, 0
  CHECK(verl_order(u) == std::vector<std::uint32_t>{1, 3, 2, 0});
}

TEST_CASE("DistTrain's order: smallest first, p-1 smallest last, intervals filled") {
  // p = 2: one warm-up forward on stage 0. Sizes (stage 0 forward): 4, 1, 6, 2, 3.
  // First: 1 (size 1). Rear: the p−1 = 1 smallest of the rest: 3 (size 2).
  // Step 1 fills position 1: the interval on stage 0 between F(pos 0) and B(pos 0).
  stage_times t(2, 5);
  t.forward = {4, 1, 6, 2, 3, 1, 1, 1, 1, 1};
  t.backward = {1, 1, 1, 1, 1, 2, 2, 2, 2, 2};
  const std::vector<std::uint32_t> o = disttrain_order(t);
  REQUIRE(is_permutation_of_m(o, 5));
  CHECK(o.front() == 1);
  CHECK(o.back() == 3);
  // Position 0 = micro-batch 1: stage 0 F [0,1]; stage 1 F [1,2] B [2,4]; stage 0's backward
  // of position 0 is ready at 4, so interval 1 = 4 − 1 = 3 and the closest size is 3 (id 4).
  CHECK(o[1] == 4);
  // m <= p: the smallest first and the rest ascending (all of them go to the rear).
  stage_times small(4, 3);
  small.forward = {3, 1, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  small.backward = small.forward;
  CHECK(disttrain_order(small) == std::vector<std::uint32_t>{1, 2, 0});
  // l < 2p − 1 (p = 4, l = 5): the first step takes the only pending micro-batch.
  auto g = mmbal::make_rng(5);
  for (std::uint32_t m = 1; m <= 12; ++m)
    for (std::uint32_t p = 1; p <= 6; ++p) CHECK(is_permutation_of_m(disttrain_order(encoder_heavy(g, p, m)), m));
}

TEST_CASE(
    "search is never worse than identity, verl or DistTrain, never beats brute force, and equals it when every order "
    "fits the budget") {
  auto g = mmbal::make_rng(11);
  for (int trial = 0; trial < 40; ++trial) {
    const auto p = static_cast<std::uint32_t>(mmbal::uniform_int(g, 2, 5));
    const auto m = static_cast<std::uint32_t>(mmbal::uniform_int(g, 1, 6));
    const stage_times t = encoder_heavy(g, p, m);
    for (const schedule s : {schedule{}, schedule{schedule_kind::interleaved, 2}}) {
      const auto reports = compute_orders(t, all_order_kinds, s, 0.05, {500, 1});
      REQUIRE(reports.size() == 4);
      const double searched = reports[3].makespan;
      for (const auto& r : reports) {
        CHECK(is_permutation_of_m(r.order, m));
        CHECK(r.makespan == simulate(t, r.order, s, 0.05));
        CHECK(searched <= r.makespan);
      }
      double best = std::numeric_limits<double>::infinity();
      std::vector<std::uint32_t> o = identity_order(m);
      do best = std::min(best, simulate(t, o, s, 0.05));
      while (std::next_permutation(o.begin(), o.end()));
      CHECK(searched >= best);
      // Up to 5! = 120 <= 500 orders the search enumerates them all: it finds the optimum.
      if (m <= 5) CHECK(searched <= best * (1 + 1e-12));
      CHECK(lower_bound(t, s, 0.05) <= best * (1 + 1e-12));
    }
  }
}

TEST_CASE("search on larger inputs: deterministic and never worse than its starts") {
  auto g = mmbal::make_rng(12);
  for (int trial = 0; trial < 10; ++trial) {
    const stage_times t = encoder_heavy(g, 4, 16);
    const std::vector<std::vector<std::uint32_t>> starts{identity_order(16), verl_order(t), disttrain_order(t)};
    const search_result a = search_order(t, starts, {}, 0.0, {800, 3});
    const search_result b = search_order(t, starts, {}, 0.0, {800, 3});
    CHECK(a.order == b.order);
    CHECK(a.makespan == b.makespan);
    CHECK(a.evaluations <= 800);
    CHECK(a.makespan == simulate(t, a.order));
    for (const auto& s : starts) CHECK(a.makespan <= simulate(t, s));
  }
  CHECK(mmbal::spec::parse_order_kind("disttrain") == order_kind::disttrain);
  CHECK_THROWS_AS(mmbal::spec::parse_order_kind("random"), mmbal::invalid_input);
  CHECK_THROWS_AS(search_order(stage_times(1, 1), std::vector<std::vector<std::uint32_t>>{}), mmbal::invalid_input);
}

TEST_CASE("DistTrain Figure 11: intra-microbatch reordering of four samples into [1, 3, 2, 4]") {
  // Samples 1..4 of sizes 1..4 on 2 DP groups: contiguous halves give [1,2 | 3,4] (loads 3
  // and 7, the second group holds both large samples); Alg. 2 reorders to [1,3 | 2,4] (4, 6).
  const std::vector<mmbal::length_t> sizes{1, 2, 3, 4};
  const auto r = mmbal::balance::intra_microbatch_reorder(sizes, 2, mmbal::cost::tokens{});
  CHECK(r.order == std::vector<mmbal::item_id>{0, 2, 1, 3});
  CHECK(r.offsets == std::vector<std::uint32_t>{0, 2, 4});
}
