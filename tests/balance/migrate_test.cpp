// Tests of balance/migrate.hpp: only overloaded ranks give items away, the target is reached,
// bytes are accounted as recomputed here, same-node destinations are preferred, determinism.
#include <mmbal/balance/lpt.hpp>
#include <mmbal/balance/migrate.hpp>
#include <mmbal/balance/padded_binary_search.hpp>
#include <mmbal/core/rng.hpp>
#include <mmbal/cost/functions.hpp>
#include <mmbal/cost/metrics.hpp>
#include <mmbal/spec/algorithm.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

using namespace mmbal;
using balance::migrate;
using balance::migrate_options;
using balance::problem;

namespace {

template <class C>
std::vector<double> origin_loads(const problem& p, const C& cost) {
  return bin_loads(partition{p.bins, std::vector<rank_t>(p.origin.begin(), p.origin.end())}, p.weights, cost);
}

// `migrate` on the fields of a `problem` (the tests build their instances as one).
template <class C>
balance::migrate_result run_migrate(const problem& p, const C& cost, double epsilon = migrate_options{}.epsilon) {
  return migrate(p.weights, p.origin, p.item_bytes, p.bins, cost, p.limits, migrate_options{epsilon, p.ranks_per_node});
}

template <class C>
double lpt_max(const problem& p, const C& cost) {
  const auto l = bin_loads(balance::lpt{}(p.weights, p.bins, cost, p.limits), p.weights, cost);
  return *std::max_element(l.begin(), l.end());
}

struct instance {
  std::vector<length_t> w;
  std::vector<rank_t> origin;
  std::vector<std::uint64_t> bytes;
  problem p;
};

instance random_instance(std::uint64_t seed, std::size_t per_bin_lo, std::size_t per_bin_hi, bool with_bytes) {
  auto g = make_rng(seed, 21);
  instance in;
  const rank_t bins = static_cast<rank_t>(1 + uniform_below(g, 24));
  const std::size_t n = bins * (per_bin_lo + uniform_below(g, per_bin_hi - per_bin_lo + 1));
  in.w.resize(n);
  for (auto& x : in.w) x = static_cast<length_t>(std::round(lognormal(g, 800, 0.6)));
  in.origin.resize(n);
  for (auto& r : in.origin) r = static_cast<rank_t>(uniform_below(g, bins));
  if (with_bytes) {
    in.bytes.resize(n);
    for (std::size_t i = 0; i < n; ++i) in.bytes[i] = in.w[i] * (1 + uniform_below(g, 4));
  }
  in.p.weights = in.w;
  in.p.bins = bins;
  in.p.origin = in.origin;
  in.p.item_bytes = in.bytes;
  in.p.ranks_per_node = static_cast<rank_t>(uniform_below(g, 5));  // 0 = one node
  return in;
}

}  // namespace

TEST_CASE("migrate: tokens — only overloaded ranks give, never above (1 + eps) x lpt, bytes add up") {
  const cost::tokens cost{};
  std::size_t reached_by_unloading = 0;
  for (std::uint64_t seed = 0; seed < 200; ++seed) {
    instance in = random_instance(seed, 16, 40, seed % 2 == 1);
    const problem& p = in.p;
    const double eps = std::array<double, 4>{0.0, 0.005, 0.01, 0.05}[seed % 4];
    const auto r = run_migrate(p, cost, eps);
    INFO("seed " << seed << " bins " << p.bins << " items " << p.weights.size());
    REQUIRE_NOTHROW(r.placement.validate());
    REQUIRE(r.placement.size() == p.weights.size());
    const double m = lpt_max(p, cost);
    // The reference is the lower bound max(total / d, largest item) or lpt's maximum.
    double total = 0, largest = 0;
    for (length_t w : p.weights) {
      total += w;
      largest = std::max<double>(largest, w);
    }
    const double bound = std::max(total / p.bins, largest);
    CHECK((r.reference_max == bound || r.reference_max == m));
    CHECK(r.target_max == r.reference_max * (1 + eps));
    const auto before = origin_loads(p, cost);
    const auto after = bin_loads(r.placement, p.weights, cost);
    const double reached = *std::max_element(after.begin(), after.end());
    CHECK(r.reached_max == reached);
    CHECK(r.target_reached == (reached <= r.target_max));
    // Additive cost, no capacity: the result is never above (1 + eps) x lpt's maximum (the
    // greedy, or else lpt's own placement renamed).
    CHECK(reached <= m * (1 + eps));
    CHECK(r.target_reached);
    std::uint64_t items = 0, bytes = 0, inter = 0;
    for (std::size_t i = 0; i < p.weights.size(); ++i) {
      const rank_t from = p.origin[i], to = r.placement.where[i].rank;
      if (from == to) continue;
      // Unloading never moves an item off a rank that is not overloaded.
      if (r.strategy == balance::migrate_strategy::unload) REQUIRE(before[from] > r.target_max);
      ++items;
      const std::uint64_t b = p.item_bytes.empty() ? p.weights[i] : p.item_bytes[i];
      bytes += b;
      if (p.ranks_per_node != 0 && from / p.ranks_per_node != to / p.ranks_per_node) inter += b;
    }
    CHECK(r.moved_items == items);
    CHECK(r.moved_bytes == bytes);
    CHECK(r.inter_node_bytes == inter);
    if (r.strategy == balance::migrate_strategy::unload) ++reached_by_unloading;
  }
  CHECK(reached_by_unloading >= 150);  // the fallback is the exception, not the rule
}

namespace {

// Bytes a placement moves from the instance's origin.
std::uint64_t bytes_moved(const problem& p, const assignment& a) {
  std::uint64_t bytes = 0;
  for (std::size_t i = 0; i < p.weights.size(); ++i)
    if (a.where[i].rank != p.origin[i]) bytes += p.item_bytes.empty() ? p.weights[i] : p.item_bytes[i];
  return bytes;
}

// Sorted weights per rank: what every cost of a rank depends on.
std::vector<std::vector<length_t>> weights_per_rank(const problem& p, const partition& part) {
  std::vector<std::vector<length_t>> out(p.bins);
  for (std::size_t i = 0; i < p.weights.size(); ++i) out[part.bin_of[i]].push_back(p.weights[i]);
  for (auto& v : out) std::sort(v.begin(), v.end());
  return out;
}

}  // namespace

TEMPLATE_TEST_CASE("migrate: padded costs reach the better of padded and lpt, moving no more than it", "", cost::padded,
                   cost::padded_attention) {
  const TestType cost{};
  std::size_t relabelled = 0, regrouped = 0;
  for (std::uint64_t seed = 0; seed < 150; ++seed) {
    instance in = random_instance(seed, 2, 40, seed % 2 == 1);
    const problem& p = in.p;
    const double eps = std::array<double, 3>{0.0, 0.001, 0.05}[seed % 3];
    const auto r = run_migrate(p, cost, eps);
    INFO("seed " << seed << " bins " << p.bins << " items " << p.weights.size());
    REQUIRE_NOTHROW(r.placement.validate());
    REQUIRE(r.placement.size() == p.weights.size());
    // Reference = the better of the two shipped algorithms for padded costs.
    const assignment pad = balance::padded_binary_search{}(p.weights, p.bins, cost);
    const assignment lp = balance::lpt{}(p.weights, p.bins, cost);
    const auto max_of = [&](const assignment& a) {
      const auto l = bin_loads(a, p.weights, cost);
      return *std::max_element(l.begin(), l.end());
    };
    const double best = std::min(max_of(pad), max_of(lp));
    CHECK(r.reference_max == best);
    CHECK(r.target_max == best * (1 + eps));
    const double reached = max_of(r.placement);
    CHECK(r.reached_max == reached);
    CHECK(r.target_reached);
    CHECK(reached <= r.target_max);
    const auto before = origin_loads(p, cost);
    if (*std::max_element(before.begin(), before.end()) <= r.target_max) {
      CHECK(r.moved_items == 0);  // already good enough: nothing moves
      continue;
    }
    REQUIRE((r.strategy == balance::migrate_strategy::relabel || r.strategy == balance::migrate_strategy::regroup));
    ++relabelled;
    const assignment& ref = max_of(pad) <= max_of(lp) ? pad : lp;
    // The reference's ranks renamed (and equal weights exchanged), what the regrouping is
    // measured against: the same multisets of weights per rank, up to a permutation of the ranks.
    std::vector<rank_t> ref_bin(p.weights.size());
    for (std::size_t i = 0; i < ref_bin.size(); ++i) ref_bin[i] = ref.where[i].rank;
    const std::vector<std::uint64_t> bytes =
        p.item_bytes.empty() ? std::vector<std::uint64_t>(p.weights.begin(), p.weights.end()) : in.bytes;
    const auto renamed = balance::detail::relabel_to_origin(
        ref_bin, p.origin, bytes, balance::detail::make_units(p.weights.size(), {}), p.weights, p.bins);
    std::uint64_t renamed_bytes = 0;
    for (std::size_t i = 0; i < renamed.size(); ++i)
      if (renamed[i] != p.origin[i]) renamed_bytes += bytes[i];
    CHECK(renamed_bytes <= bytes_moved(p, ref));
    CHECK(r.moved_bytes == bytes_moved(p, r.placement));
    if (r.strategy == balance::migrate_strategy::relabel) {
      auto mine = weights_per_rank(p, r.placement.to_partition());
      auto theirs = weights_per_rank(p, ref.to_partition());
      std::sort(mine.begin(), mine.end());
      std::sort(theirs.begin(), theirs.end());
      CHECK(mine == theirs);
      CHECK(r.moved_bytes == renamed_bytes);
      CHECK(r.reached_max == r.reference_max);
    } else {
      // The regrouping is taken only when it moves strictly fewer bytes than the renaming.
      CHECK(r.moved_bytes < renamed_bytes);
      ++regrouped;
    }
    CHECK(r.moved_bytes <= bytes_moved(p, ref));
  }
  CHECK(relabelled >= 100);
  CHECK(regrouped >= 20);  // the regrouping does win on random origins
}

TEMPLATE_TEST_CASE("migrate: the padded regrouping keeps every rank within the target and places every item", "",
                   cost::padded, cost::padded_attention) {
  const TestType cost{};
  for (std::uint64_t seed = 0; seed < 120; ++seed) {
    instance in = random_instance(seed, 2, 40, seed % 2 == 1);
    const problem& p = in.p;
    const std::vector<std::uint64_t> bytes =
        p.item_bytes.empty() ? std::vector<std::uint64_t>(p.weights.begin(), p.weights.end()) : in.bytes;
    const assignment ref = balance::padded_binary_search{}(p.weights, p.bins, cost);
    const auto ref_l = bin_loads(ref, p.weights, cost);
    const double eps = std::array<double, 3>{0.0, 0.001, 0.05}[seed % 3];
    const double target = *std::max_element(ref_l.begin(), ref_l.end()) * (1 + eps);
    INFO("seed " << seed << " bins " << p.bins << " items " << p.weights.size());
    const auto dest = balance::detail::regroup_to_origin(p.weights, p.origin, bytes, p.bins, cost, ref, target,
                                                         p.ranks_per_node, 1 + static_cast<int>(seed % 4));
    REQUIRE(dest.size() == p.weights.size());  // the reference is within the target: never empty
    for (const rank_t r : dest) REQUIRE(r < p.bins);
    const auto loads = bin_loads(partition{p.bins, dest}, p.weights, cost);
    CHECK(*std::max_element(loads.begin(), loads.end()) <= target);
    // Deterministic.
    CHECK(dest == balance::detail::regroup_to_origin(p.weights, p.origin, bytes, p.bins, cost, ref, target,
                                                     p.ranks_per_node, 1 + static_cast<int>(seed % 4)));
    // A target below a reference bin is refused (empty), not overrun.
    if (*std::max_element(ref_l.begin(), ref_l.end()) > 0)
      CHECK(balance::detail::regroup_to_origin(p.weights, p.origin, bytes, p.bins, cost, ref,
                                               *std::max_element(ref_l.begin(), ref_l.end()) * 0.999, p.ranks_per_node,
                                               1)
                .empty());
  }
}

TEST_CASE("migrate: padded costs with every item on one rank (large rank, bounded candidate work)") {
  auto g = make_rng(5, 29);
  const rank_t bins = 64;
  std::vector<length_t> w(30000);
  for (auto& x : w) x = static_cast<length_t>(1 + uniform_below(g, 5000));  // thousands of lengths
  const std::vector<rank_t> origin(w.size(), 3);                            // the problem holds spans: keep it alive
  problem p{w, bins, {}, origin, {}, 8};
  const cost::padded cost{};
  const auto r = run_migrate(p, cost, 0.001);
  REQUIRE_NOTHROW(r.placement.validate());
  const auto loads = bin_loads(r.placement, w, cost);
  CHECK(*std::max_element(loads.begin(), loads.end()) <= r.target_max);
  CHECK(r.target_reached);
  CHECK(r.moved_bytes <= bytes_moved(p, balance::padded_binary_search{}(w, bins, cost)));
  CHECK(r.moved_bytes < std::accumulate(w.begin(), w.end(), std::uint64_t{0}));  // rank 3 keeps something
}

TEST_CASE("migrate: renaming the reference's ranks keeps the most bytes on tiny instances (brute force)") {
  // d <= 4 ranks, all d! renamings of the reference's ranks.
  for (std::uint64_t seed = 0; seed < 200; ++seed) {
    auto g = make_rng(seed, 23);
    const rank_t bins = static_cast<rank_t>(2 + uniform_below(g, 3));
    const std::size_t n = bins * (1 + uniform_below(g, 4));
    std::vector<length_t> w(n);
    std::vector<rank_t> origin(n);
    for (auto& x : w) x = static_cast<length_t>(1 + uniform_below(g, 6));  // many equal weights
    for (auto& o : origin) o = static_cast<rank_t>(uniform_below(g, bins));
    problem p{w, bins, {}, origin, {}, 0};
    const cost::padded cost{};
    const auto r = run_migrate(p, cost, 0.0);
    INFO("seed " << seed);
    const assignment pad = balance::padded_binary_search{}(w, bins, cost);
    const assignment lp = balance::lpt{}(w, bins, cost);
    const auto lp_l = bin_loads(lp, w, cost), pad_l = bin_loads(pad, w, cost);
    const bool use_pad = *std::max_element(pad_l.begin(), pad_l.end()) <= *std::max_element(lp_l.begin(), lp_l.end());
    const partition ref = (use_pad ? pad : lp).to_partition();
    if (r.strategy == balance::migrate_strategy::unload) continue;
    std::vector<rank_t> perm(bins);
    std::iota(perm.begin(), perm.end(), 0u);
    std::uint64_t best = std::numeric_limits<std::uint64_t>::max();
    do {
      std::uint64_t bytes = 0;
      for (std::size_t i = 0; i < n; ++i)
        if (perm[ref.bin_of[i]] != origin[i]) bytes += w[i];
      best = std::min(best, bytes);
    } while (std::next_permutation(perm.begin(), perm.end()));
    // Greedy matching keeps at least half of what the best renaming keeps (a 1/2-approximate
    // maximum-weight matching; the exchange of equal weights only adds; a regrouping is taken
    // only when it keeps more still), and never moves more than the reference itself.
    std::uint64_t total = 0;
    for (length_t x : w) total += x;
    CHECK(2 * (total - r.moved_bytes) >= total - best);
    CHECK(r.moved_bytes <= bytes_moved(p, use_pad ? pad : lp));
  }
}

TEST_CASE("migrate: a large epsilon moves nothing and keeps the current order") {
  for (std::uint64_t seed = 0; seed < 30; ++seed) {
    instance in = random_instance(seed, 2, 10, false);
    for (double eps : {1e9, std::numeric_limits<double>::infinity()}) {
      const auto r = run_migrate(in.p, cost::tokens{}, eps);
      CHECK(r.moved_items == 0);
      CHECK(r.moved_bytes == 0);
      CHECK(r.inter_node_bytes == 0);
      const partition cur{in.p.bins, in.origin};
      CHECK(r.placement == assignment::from_partition(cur));
    }
  }
}

TEST_CASE("migrate: two small items leave instead of one large one") {
  // Rank 0 = {100, 6, 5} = 111, rank 1 = {91}: lpt reaches 100 | 102, so with ε = 0 the
  // target is 102 and rank 0 must shed 9: moving 6 + 5 (11 bytes) beats moving 100.
  const std::vector<length_t> w{100, 6, 5, 91};
  const std::vector<rank_t> origin{0, 0, 0, 1};
  problem p{w, 2, {}, origin, {}, 0};
  const auto r = run_migrate(p, cost::tokens{}, 0.0);
  CHECK(r.target_max == 102.0);
  CHECK(r.moved_items == 2);
  CHECK(r.moved_bytes == 11);
  // Staying items keep their order; arrivals are appended largest first.
  CHECK(r.placement == assignment{2, {{0, 0}, {1, 1}, {1, 2}, {1, 0}}});
}

TEST_CASE("migrate: bytes, not cost, decide which item leaves") {
  // Rank 0 holds two items of weight 10; the second one is 100x cheaper to send. With eps = 0
  // the target is the optimum 11 ({10, 1} | {10, 1}): the cheap 10 and one 1 swap ranks.
  const std::vector<length_t> w{10, 10, 1, 1};
  const std::vector<std::uint64_t> bytes{1000, 10, 1, 1};
  const std::vector<rank_t> origin{0, 0, 1, 1};
  problem p{w, 2, {}, origin, bytes, 0};
  const auto r = run_migrate(p, cost::tokens{}, 0.0);
  CHECK(r.target_max == 11.0);
  CHECK(r.reached_max == 11.0);
  CHECK(r.placement.where[0].rank == 0);
  CHECK(r.placement.where[1].rank == 1);
  CHECK(r.moved_bytes == 11);
}

TEST_CASE("migrate: a same-node destination wins over an equally loaded remote one") {
  // 2 ranks per node: nodes {0, 1} and {2, 3}. Rank 3 is overloaded; ranks 0 and 2 are equally
  // loaded (rank 0 has the smaller index), rank 1 is full. The item must go to rank 2.
  const std::vector<length_t> w{10, 14, 10, 4, 8, 8};
  const std::vector<rank_t> origin{0, 1, 2, 3, 3, 3};
  problem p{w, 4, {}, origin, {}, 2};
  // Loads 10 | 14 | 10 | 20. lpt places 14, 10, 10, 8 on the four ranks, the second 8 on the
  // least loaded (8 -> 16) and the 4 on a 10: max 16. With eps = 0 rank 3 sheds exactly the 4;
  // rank 0 and rank 2 both end at 14.
  const auto r = run_migrate(p, cost::tokens{}, 0.0);
  REQUIRE(r.target_max == 16.0);
  REQUIRE(r.moved_items == 1);
  std::size_t moved = 0;
  for (std::size_t i = 0; i < w.size(); ++i)
    if (r.placement.where[i].rank != origin[i]) moved = i;
  CHECK(origin[moved] == 3);
  CHECK(r.placement.where[moved].rank == 2);
  CHECK(r.inter_node_bytes == 0);
  // With one node everything is local: the least loaded rank with the smaller index wins.
  p.ranks_per_node = 0;
  const auto flat = run_migrate(p, cost::tokens{}, 0.0);
  CHECK(flat.placement.where[moved].rank == 0);
}

TEST_CASE("migrate: groups move as one unit") {
  for (std::uint64_t seed = 0; seed < 60; ++seed) {
    auto g = make_rng(seed, 22);
    const rank_t bins = static_cast<rank_t>(2 + uniform_below(g, 8));
    const std::size_t n = bins * 20;
    std::vector<length_t> w(n);
    std::vector<std::uint64_t> groups(n);
    std::vector<rank_t> origin(n);
    for (std::size_t i = 0; i < n; ++i) {
      w[i] = static_cast<length_t>(1 + uniform_below(g, 500));
      groups[i] = i / 3;  // groups of 3 consecutive items
    }
    for (std::size_t i = 0; i < n; i += 3) {
      const rank_t r = static_cast<rank_t>(uniform_below(g, bins));
      for (std::size_t j = i; j < std::min(n, i + 3); ++j) origin[j] = r;
    }
    problem p{w, bins, {}, origin, {}, 0};
    p.limits.groups = groups;
    const auto r = run_migrate(p, cost::tokens{}, 0.01);
    for (std::size_t i = 0; i < n; ++i) CHECK(r.placement.where[i].rank == r.placement.where[i / 3 * 3].rank);
  }
}

TEST_CASE("migrate: deterministic") {
  instance in = random_instance(7, 16, 30, true);
  const auto a = run_migrate(in.p, cost::tokens{});
  const auto b = run_migrate(in.p, cost::tokens{});
  CHECK(a.placement == b.placement);
  CHECK(a.moved_bytes == b.moved_bytes);
}

TEST_CASE("migrate: bad input") {
  const std::vector<length_t> w{1, 2, 3};
  const std::vector<rank_t> origin{0, 1, 0};
  problem p{w, 2, {}, origin, {}, 0};
  CHECK_THROWS_AS(run_migrate(p, cost::tokens{}, -0.1), invalid_input);
  CHECK_THROWS_AS(run_migrate(p, cost::tokens{}, std::nan("")), invalid_input);
  problem short_origin = p;
  short_origin.origin = std::span<const rank_t>(origin.data(), 2);
  CHECK_THROWS_AS(run_migrate(short_origin, cost::tokens{}), invalid_input);
  const std::vector<rank_t> bad_rank{0, 2, 0};
  problem out_of_range = p;
  out_of_range.origin = bad_rank;
  CHECK_THROWS_AS(run_migrate(out_of_range, cost::tokens{}), invalid_input);
  const std::vector<std::uint64_t> bytes{1, 2};
  problem short_bytes = p;
  short_bytes.item_bytes = bytes;
  CHECK_THROWS_AS(run_migrate(short_bytes, cost::tokens{}), invalid_input);
  problem capped = p;
  capped.limits.counts.kind = balance::count_cap::mode::equal;
  CHECK_THROWS_AS(run_migrate(capped, cost::tokens{}), invalid_input);
  const std::vector<std::uint64_t> groups{5, 5, 6};  // items 0 and 1 share a group on ranks 0 and 1
  problem split = p;
  split.limits.groups = groups;
  CHECK_THROWS_AS(run_migrate(split, cost::tokens{}), invalid_input);
  problem zero_bins = p;
  zero_bins.bins = 0;
  CHECK_THROWS_AS(run_migrate(zero_bins, cost::tokens{}), invalid_input);
  const problem empty{{}, 3, {}, {}, {}, 0};
  const auto r = run_migrate(empty, cost::tokens{});
  CHECK(r.placement.size() == 0);
  CHECK(r.moved_items == 0);
}
