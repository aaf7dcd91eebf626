// Tests of balance/micro_batches.hpp: every item once, costs consistent, Σ_k max_r within the
// proven bound and compared with brute force, per-rank variant, DistTrain's reordering.
#include <mmbal/balance/micro_batches.hpp>
#include <mmbal/core/rng.hpp>
#include <mmbal/cost/functions.hpp>
#include <mmbal/cost/metrics.hpp>

#include <catch2/catch.hpp>

#include "random_inputs.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <vector>

using namespace mmbal;
using balance::micro_batch_plan;
using balance::split_micro_batches;

using test::random_weights;

namespace {

/// Every item once, slots 0..k-1 per batch, and the reported costs refolded from the items.
template <class C>
void check_plan(const micro_batch_plan& plan, std::span<const length_t> w, rank_t ranks, std::uint32_t m,
                const C& cost) {
  REQUIRE(plan.ranks == ranks);
  REQUIRE(plan.micro_batches == m);
  REQUIRE(plan.where.size() == w.size());
  REQUIRE(plan.costs.size() == std::size_t{ranks} * m);
  std::vector<std::vector<int>> seen(std::size_t{ranks} * m);
  for (const auto& l : plan.where) {
    REQUIRE(l.rank < ranks);
    REQUIRE(l.micro_batch < m);
    auto& s = seen[std::size_t{l.micro_batch} * ranks + l.rank];
    if (s.size() <= l.slot) s.resize(l.slot + 1, 0);
    ++s[l.slot];
  }
  for (const auto& s : seen)
    for (int c : s) REQUIRE(c == 1);  // slots dense and unique
  const auto batches = plan.batches();
  for (std::uint32_t k = 0; k < m; ++k)
    for (rank_t r = 0; r < ranks; ++r) {
      std::vector<length_t> lens;
      for (item_id i : batches[std::size_t{k} * ranks + r]) lens.push_back(w[i]);
      REQUIRE(plan.cost(r, k) == batch_value(cost, std::span<const length_t>(lens)));
    }
}

/// Brute force: min over all (ranks·m)^n placements of Σ_k max_r (tokens).
double brute_force_sum_of_max(std::span<const length_t> w, rank_t ranks, std::uint32_t m) {
  const std::size_t cells = std::size_t{ranks} * m, n = w.size();
  std::vector<std::size_t> cell(n, 0);
  double best = std::numeric_limits<double>::infinity();
  for (;;) {
    std::vector<double> c(cells, 0.0);
    for (std::size_t i = 0; i < n; ++i) c[cell[i]] += w[i];
    double total = 0;
    for (std::uint32_t k = 0; k < m; ++k)
      total += *std::max_element(c.begin() + static_cast<std::ptrdiff_t>(k * ranks),
                                 c.begin() + static_cast<std::ptrdiff_t>((k + 1) * ranks));
    best = std::min(best, total);
    std::size_t j = 0;
    while (j < n && ++cell[j] == cells) cell[j++] = 0;
    if (j == n) break;
  }
  return best;
}

}  // namespace

TEST_CASE("split_micro_batches: every item once, costs consistent, within the proven bound") {
  for (std::uint64_t seed = 0; seed < 300; ++seed) {
    auto g = make_rng(seed, 31);
    const std::size_t n = uniform_below(g, 300);
    const rank_t ranks = static_cast<rank_t>(1 + uniform_below(g, 12));
    const auto m = static_cast<std::uint32_t>(1 + uniform_below(g, 8));
    const auto w = random_weights(g, n, seed % 3 == 0 ? 10 : 4000);
    const auto plan = split_micro_batches(w, ranks, m, cost::tokens{});
    INFO("seed " << seed);
    check_plan(plan, w, ranks, m, cost::tokens{});
    const double total = std::accumulate(w.begin(), w.end(), 0.0);
    const double biggest = w.empty() ? 0.0 : *std::max_element(w.begin(), w.end());
    const double s = plan.sum_of_max();
    CHECK(s >= balance::micro_batch_lower_bound(std::span<const length_t>(w), ranks, cost::tokens{}));
    CHECK(s <= total / ranks + biggest + 1e-9 * total);
  }
}

TEST_CASE("split_micro_batches: close to the bound with many items per batch") {
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    auto g = make_rng(seed, 32);
    const rank_t ranks = static_cast<rank_t>(2 + uniform_below(g, 31));
    const auto m = static_cast<std::uint32_t>(1 + uniform_below(g, 8));
    std::vector<length_t> w(std::size_t{ranks} * m * 32);
    for (auto& x : w) x = static_cast<length_t>(std::round(lognormal(g, 1000, 0.8)));
    const auto plan = split_micro_batches(w, ranks, m, cost::tokens{});
    const double lb = balance::micro_batch_lower_bound(std::span<const length_t>(w), ranks, cost::tokens{});
    INFO("seed " << seed << " ranks " << ranks << " m " << m);
    CHECK(plan.sum_of_max() <= 1.02 * lb);
  }
}

TEST_CASE("split_micro_batches: brute force on tiny inputs") {
  for (std::uint64_t seed = 0; seed < 40; ++seed) {
    auto g = make_rng(seed, 33);
    const std::size_t n = 1 + uniform_below(g, 6);
    const rank_t ranks = static_cast<rank_t>(1 + uniform_below(g, 2));
    const auto m = static_cast<std::uint32_t>(1 + uniform_below(g, 2));
    const auto w = random_weights(g, n, 30);
    const double opt = brute_force_sum_of_max(w, ranks, m);
    const double s = split_micro_batches(w, ranks, m, cost::tokens{}).sum_of_max();
    const double biggest = *std::max_element(w.begin(), w.end());
    INFO("seed " << seed);
    CHECK(s >= opt);
    CHECK(s <= opt + biggest);
    CHECK(s <= 2 * opt);
  }
}

TEST_CASE("split_micro_batches: rounds hold similar costs and rank totals are evened out") {
  // 8 items into 2 ranks x 2 micro-batches: LPT bins {8}, {7,1}, {6,2}, {5,3} = 8 each.
  const std::vector<length_t> w{8, 7, 6, 5, 3, 2, 1, 0};
  const auto plan = split_micro_batches(w, 2, 2, cost::tokens{});
  CHECK(plan.sum_of_max() == 16.0);
  // Unequal bins: {10}, {6}, {5}, {1} -> rounds {10, 6} then {5, 1}; the rank that got 6 in
  // round 0 gets 5 in round 1.
  const std::vector<length_t> w2{10, 6, 5, 1};
  const auto p2 = split_micro_batches(w2, 2, 2, cost::tokens{});
  CHECK(p2.sum_of_max() == 15.0);
  CHECK(p2.where[0].micro_batch == 0);
  CHECK(p2.where[1].micro_batch == 0);
  CHECK(p2.where[2].rank == p2.where[1].rank);
  CHECK(p2.where[3].rank == p2.where[0].rank);
}

TEST_CASE("split_micro_batches: padded cost keeps every item once") {
  for (std::uint64_t seed = 0; seed < 50; ++seed) {
    auto g = make_rng(seed, 34);
    const auto w = random_weights(g, uniform_below(g, 120), 2000);
    const rank_t ranks = static_cast<rank_t>(1 + uniform_below(g, 6));
    const auto m = static_cast<std::uint32_t>(1 + uniform_below(g, 4));
    check_plan(split_micro_batches(w, ranks, m, cost::padded{}), w, ranks, m, cost::padded{});
  }
}

TEST_CASE("split_micro_batches(partition): items stay on their rank; sorted alignment is optimal") {
  for (std::uint64_t seed = 0; seed < 60; ++seed) {
    auto g = make_rng(seed, 35);
    const rank_t ranks = static_cast<rank_t>(1 + uniform_below(g, 3));
    const auto m = static_cast<std::uint32_t>(1 + uniform_below(g, 3));
    const auto w = random_weights(g, uniform_below(g, 40), 500);
    partition p{ranks, std::vector<rank_t>(w.size())};
    for (auto& r : p.bin_of) r = static_cast<rank_t>(uniform_below(g, ranks));
    const auto plan = split_micro_batches(w, p, m, cost::tokens{});
    INFO("seed " << seed);
    check_plan(plan, w, ranks, m, cost::tokens{});
    for (std::size_t i = 0; i < w.size(); ++i) REQUIRE(plan.where[i].rank == p.bin_of[i]);
    // Brute force over every order of each rank's m batches (the batches themselves fixed).
    std::vector<std::vector<double>> cols(ranks);
    for (rank_t r = 0; r < ranks; ++r)
      for (std::uint32_t k = 0; k < m; ++k) cols[r].push_back(plan.cost(r, k));
    double best = std::numeric_limits<double>::infinity();
    std::vector<std::vector<double>> perm = cols;
    for (auto& c : perm) std::sort(c.begin(), c.end());
    // Enumerate permutations of ranks 1.. against rank 0 fixed (the sum is symmetric in rounds).
    std::function<void(rank_t)> rec = [&](rank_t r) {
      if (r == ranks) {
        double s = 0;
        for (std::uint32_t k = 0; k < m; ++k) {
          double mx = 0;
          for (rank_t q = 0; q < ranks; ++q) mx = std::max(mx, perm[q][k]);
          s += mx;
        }
        best = std::min(best, s);
        return;
      }
      std::sort(perm[r].begin(), perm[r].end());
      do rec(r + 1);
      while (std::next_permutation(perm[r].begin(), perm[r].end()));
    };
    rec(1);
    CHECK(plan.sum_of_max() == best);
  }
  partition bad{2, {0, 1}};
  const std::vector<length_t> w{1, 2, 3};
  CHECK_THROWS_AS(split_micro_batches(w, bad, 2, cost::tokens{}), invalid_input);
}

TEST_CASE("split_micro_batches: bad input") {
  const std::vector<length_t> w{1, 2, 3};
  CHECK_THROWS_AS(split_micro_batches(w, 2, 0, cost::tokens{}), invalid_input);
  CHECK_THROWS_AS(split_micro_batches(w, 0, 2, cost::tokens{}), invalid_input);
  CHECK_THROWS_WITH(split_micro_batches(w, max_ranks + 1, 1, cost::tokens{}), Catch::Contains("exceeds 16777216"));
  // The plan holds a cost per (rank, micro-batch): 2 × 2·10⁹ was a bad_alloc in the tool.
  CHECK_THROWS_WITH(split_micro_batches(w, 2, 2'000'000'000u, cost::tokens{}),
                    Catch::Contains("ranks x micro_batches = 4000000000 exceeds 16777216"));
  CHECK_THROWS_WITH(split_micro_batches(w, partition{2, {0, 1, 0}}, 2'000'000'000u, cost::tokens{}),
                    Catch::Contains("exceeds 16777216"));
  CHECK_THROWS_AS(split_micro_batches(w, 70000, 70000, cost::tokens{}), invalid_input);
  CHECK_THROWS_AS(split_micro_batches(w, partition{2, {0, 1, 0}}, 0, cost::tokens{}), invalid_input);
  const auto empty = split_micro_batches(std::span<const length_t>{}, 3, 2, cost::tokens{});
  CHECK(empty.where.empty());
  CHECK(empty.sum_of_max() == 0.0);
}

TEST_CASE("intra_microbatch_reorder: DistTrain Alg. 2 as written in the paper") {
  // Reference: sort ascending (ties by id), argmin over group sums by scanning (ties: lowest
  // group), append; then concatenate the groups.
  for (std::uint64_t seed = 0; seed < 200; ++seed) {
    auto g = make_rng(seed, 36);
    const auto w = random_weights(g, uniform_below(g, 100), seed % 2 ? 20 : 3000);
    const rank_t dp = static_cast<rank_t>(1 + uniform_below(g, 9));
    std::vector<item_id> sorted(w.size());
    std::iota(sorted.begin(), sorted.end(), item_id{0});
    std::stable_sort(sorted.begin(), sorted.end(), [&](item_id a, item_id b) { return w[a] < w[b]; });
    std::vector<std::vector<item_id>> groups(dp);
    std::vector<std::uint64_t> load(dp, 0);
    for (item_id i : sorted) {
      rank_t best = 0;
      for (rank_t j = 1; j < dp; ++j)
        if (load[j] < load[best]) best = j;
      groups[best].push_back(i);
      load[best] += w[i];
    }
    std::vector<item_id> order;
    std::vector<std::uint32_t> offsets;
    for (const auto& grp : groups) {
      offsets.push_back(static_cast<std::uint32_t>(order.size()));
      order.insert(order.end(), grp.begin(), grp.end());
    }
    offsets.push_back(static_cast<std::uint32_t>(order.size()));
    const auto r = balance::intra_microbatch_reorder(w, dp, cost::tokens{});
    INFO("seed " << seed);
    CHECK(r.order == order);
    CHECK(r.offsets == offsets);
  }
  // The paper's Figure 11 example: sizes [4, 3, 2, 1] (sample 1 largest) over 2 DP groups ->
  // ascending 1, 2, 3, 4: group 0 gets sizes 1 and 3, group 1 gets 2 and 4.
  const std::vector<length_t> fig{4, 3, 2, 1};
  const auto r = balance::intra_microbatch_reorder(fig, 2, cost::tokens{});
  CHECK(r.order == std::vector<item_id>{3, 1, 2, 0});
  CHECK(r.offsets == std::vector<std::uint32_t>{0, 2, 4});
  CHECK_THROWS_AS(balance::intra_microbatch_reorder(fig, 0, cost::tokens{}), invalid_input);
}

TEST_CASE("split_micro_batches runs the partitioner it is given") {
  // Step 1's bins are exactly the given partitioner's: every (rank, micro-batch) batch of the
  // plan holds the items of one bin of greedy_ascending on d·m bins, each bin used once.
  rng_engine g = make_rng(31, 0);
  std::vector<length_t> w(300);
  for (auto& x : w) x = static_cast<length_t>(1 + uniform_below(g, 5000));
  const rank_t d = 4;
  const std::uint32_t m = 3;
  const cost::attention c{1.0, 1e-4};
  const micro_batch_plan plan = split_micro_batches(w, d, m, c, balance::greedy_ascending{});
  REQUIRE_NOTHROW(plan.validate());
  const assignment bins = balance::greedy_ascending{}(w, d * m, c, {});
  std::vector<std::vector<item_id>> expected(d * m), got(std::size_t{d} * m);
  for (item_id i = 0; i < w.size(); ++i) {
    expected[bins.where[i].rank].push_back(i);
    got[std::size_t{plan.where[i].micro_batch} * d + plan.where[i].rank].push_back(i);
  }
  std::sort(expected.begin(), expected.end());
  std::sort(got.begin(), got.end());
  CHECK(got == expected);
  // The default is lpt; a different partitioner gives a different split here.
  CHECK(split_micro_batches(w, d, m, c).where != plan.where);
}

namespace {
/// A user partitioner that ignores the bin count it is asked for.
struct one_bin {
  static constexpr const char* name = "one_bin";
  template <batch_cost C>
  assignment operator()(std::span<const length_t> w, rank_t, const C&, const balance::constraints& = {}) const {
    return assignment::from_partition(partition{1, std::vector<rank_t>(w.size(), 0)});
  }
};
}  // namespace

TEST_CASE("split_micro_batches refuses a partitioner's result on the wrong bins", "[micro_batches]") {
  // The split indexed its bin costs by the bins it asked for (heap overflow in the sort).
  const std::vector<length_t> w{5, 3, 9, 1, 7, 2, 8};
  REQUIRE_THROWS_WITH(split_micro_batches(w, 2, 3, cost::tokens{}, one_bin{}),
                      Catch::Contains("returned 7 items on 1 bins for 7 items on 6 bins"));
  REQUIRE_THROWS_WITH(split_micro_batches(w, partition{2, {0, 1, 0, 1, 0, 1, 0}}, 3, cost::tokens{}, one_bin{}),
                      Catch::Contains("on 1 bins for 4 items on 3 bins"));
}
