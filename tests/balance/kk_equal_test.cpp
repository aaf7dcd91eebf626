// Equal-count Karmarkar–Karp on the workloads of issue 13: the omni LLM phase with 8 samples
// per rank (classic BLDM ends 1.27× the equal-count lower bound there) and the attention cost
// with 64 per rank (classic BLDM 1.01–1.07×). The items are built as the tool builds them
// (`phase_items_of`, count cap `equal`).
#include "conformance.hpp"

#include <mmbal/balance/detail/resplit.hpp>

#include <mmbal/workload/generators.hpp>
#include <mmbal/workload/length_data.hpp>
#include <mmbal/workload/sample.hpp>

#include <algorithm>
#include <limits>

using namespace mmbal;

namespace {

struct equal_run {
  double kk = 0, lpt = 0, lower = 0;
};

equal_run run_equal(const std::vector<length_t>& w, rank_t d, const std::string& cost_spec) {
  const spec::any_cost c = spec::parse_cost(cost_spec);
  balance::constraints limits;
  limits.counts.kind = balance::count_cap::mode::equal;
  const assignment kk = test::solve_checked(spec::parse_algorithm("kk"), c, w, d, limits);
  const assignment lpt = test::solve_checked(spec::parse_algorithm("lpt"), c, w, d, limits);
  equal_run r;
  r.kk = test::check_run(kk, w, d, c, limits);  // also checks counts ⌊n/d⌋..⌈n/d⌉
  r.lpt = test::check_run(lpt, w, d, c, limits);
  r.lower = std::visit([&](const auto& cc) { return equal_count_lower_bound(std::span<const length_t>(w), d, cc); }, c);
  return r;
}

std::vector<length_t> omni_llm(std::uint64_t samples, rank_t d, std::uint64_t seed) {
  generator_options o;
  o.samples = samples;
  o.ranks = d;
  o.seed = seed;
  return phase_items_of(generate(family::omni, o, default_length_data()), "llm").weights;
}

}  // namespace

TEST_CASE("kk equal count: omni 4,096 samples on 512 ranks (8 per rank) within 1.01x the bound and <= lpt",
          "[balance][kk]") {
  for (const std::uint64_t seed : {1, 2, 3}) {
    const std::vector<length_t> w = omni_llm(4096, 512, seed);
    for (const std::string cost_spec : {"tokens", "attention:alpha=1,beta=0.0001"}) {
      INFO("seed " << seed << " cost " << cost_spec);
      const equal_run r = run_equal(w, 512, cost_spec);
      CHECK(r.kk <= r.lpt);
      CHECK(r.kk <= 1.01 * r.lower);
    }
  }
}

TEST_CASE("kk equal count: attention cost at 64 per rank within 1.01x the bound and <= lpt", "[balance][kk]") {
  for (const std::uint64_t seed : {1, 2026}) {
    const std::vector<length_t> w = omni_llm(64 * 256, 256, seed);
    for (const std::string cost_spec : {"attention:alpha=1,beta=0.0001", "attention:alpha=1,beta=0.001", "tokens"}) {
      INFO("seed " << seed << " cost " << cost_spec);
      const equal_run r = run_equal(w, 256, cost_spec);
      CHECK(r.kk <= r.lpt);
      CHECK(r.kk <= 1.01 * r.lower);
    }
  }
}

TEST_CASE("kk equal count: a heavy item gets the lightest partners (3 per bin, one huge item)", "[balance][kk]") {
  // 4 bins × 3 items: one item of 100, the rest 10..20. Classic BLDM (chunks of consecutive
  // ranks) gives the huge item's bin one item of each band (≥ 100 + 14 + 10); the optimum pairs
  // it with the two lightest (10 + 11), which is also the equal-count lower bound.
  const std::vector<length_t> w{100, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10};
  const equal_run r = run_equal(w, 4, "tokens");
  CHECK(r.kk == 121.0);
  CHECK(r.kk <= r.lpt);
  CHECK(r.lower == 121.0);
}

// A stronger equal-count lower bound for additive costs (solo costs v_1 ≥ … ≥ v_n, f = ⌊n/d⌋
// ≥ 2 items in every bin, S = Σ of the f − 2 smallest): for every i ≤ d,
//   OPT ≥ min(2·v_i + S, v_i + v_{n+1−i} + S).
// Proof: look at the i costliest items. (a) Two of them share a bin: it holds two items of
// cost ≥ v_i and f − 2 more, which cost at least the f − 2 smallest: ≥ 2·v_i + S. (b) They lie
// in i distinct bins: each of these holds f − 1 ≥ 1 other items, none among the i costliest.
// The costliest "other" item of each bin gives i distinct items ranked below i, so one of them
// costs ≥ the i-th cheapest item, v_{n+1−i}; its bin holds a top-i item (≥ v_i), that item and
// f − 2 more (≥ S): ≥ v_i + v_{n+1−i} + S. With two items per bin and n = 2d this is the
// optimum (pair the sorted items from both ends). Checked against brute force below.
double pairing_lower_bound(std::vector<double> v, std::size_t bins) {
  std::sort(v.rbegin(), v.rend());
  const std::size_t n = v.size(), f = n / bins;
  if (f < 2) return 0;
  double small = 0;
  for (std::size_t k = 0; k + 2 < f; ++k) small += v[n - 1 - k];
  double best = 0;
  for (std::size_t i = 1; i <= bins; ++i)
    best = std::max(best, std::min(2 * v[i - 1] + small, v[i - 1] + v[n - i] + small));
  return best;
}

// The optimum maximum over every placement with ⌊n/d⌋..⌈n/d⌉ items per bin, by enumerating all
// d^n placements (tiny inputs only).
double brute_equal_optimum(const std::vector<double>& v, std::size_t bins) {
  const std::size_t n = v.size(), lo = n / bins, hi = (n + bins - 1) / bins;
  std::vector<std::size_t> bin_of(n, 0);
  double best = std::numeric_limits<double>::infinity();
  for (;;) {
    std::vector<double> load(bins, 0.0);
    std::vector<std::size_t> count(bins, 0);
    for (std::size_t i = 0; i < n; ++i) {
      load[bin_of[i]] += v[i];
      ++count[bin_of[i]];
    }
    if (std::all_of(count.begin(), count.end(), [&](std::size_t c) { return c >= lo && c <= hi; }))
      best = std::min(best, *std::max_element(load.begin(), load.end()));
    std::size_t i = 0;
    while (i < n && ++bin_of[i] == bins) bin_of[i++] = 0;
    if (i == n) return best;
  }
}

TEST_CASE("kk equal count: the exact re-split with equal counts and the pairing bound agree with brute force",
          "[balance][kk]") {
  // resplit_search with kk's count range [⌊q/w⌋, ⌈q/w⌉], unit sizes 1 and a generous budget
  // finds the optimum (2–3 ways, as kk's re-differencing calls it); with an incumbent at the
  // optimum nothing is found. The pairing bound and equal_count_lower_bound never exceed the
  // optimum (2–4 bins). Small integer and fractional costs, 4–9 items (≤ 3^9 or 4^7 placements).
  int checked = 0, searched = 0;
  for (std::uint64_t seed = 0; seed < 150; ++seed) {
    rng_engine g = make_rng(seed, 0x5e1f);
    const std::size_t bins = 2 + uniform_below(g, 3);
    const std::size_t n = std::min<std::size_t>(2 * bins + uniform_below(g, 5), bins == 4 ? 8 : 9);
    if (n < 2 * bins) continue;
    std::vector<length_t> w(n);
    for (auto& x : w) x = static_cast<length_t>(seed % 2 ? 1 + uniform_below(g, 12) : lognormal(g, 1400, 0.9));
    const cost::attention attn{1.0, 0.001};
    std::vector<double> v;
    for (const length_t x : w) v.push_back(seed % 3 == 0 ? attn.item(x) : static_cast<double>(x));
    INFO("seed " << seed << " n " << n << " bins " << bins);
    const double opt = brute_equal_optimum(v, bins);
    if (bins <= 3) {
      std::vector<double> desc = v;
      std::sort(desc.rbegin(), desc.rend());
      const std::vector<std::uint32_t> ones(n, 1);
      const std::uint64_t lo = n / bins, hi = (n + bins - 1) / bins;
      const balance::detail::resplit_result s = balance::detail::resplit_search(
          desc, ones, bins, lo, hi, std::numeric_limits<double>::infinity(), std::uint64_t{1} << 24);
      REQUIRE(s.found);
      CHECK(s.max_load == Approx(opt).epsilon(1e-12));
      std::vector<std::size_t> count(bins, 0);
      for (const std::uint8_t p : s.part) ++count[p];
      for (const std::size_t c : count) CHECK((c >= lo && c <= hi));
      // Sums in another order may differ in the last bit: below the optimum by more is a bug.
      CHECK_FALSE(
          balance::detail::resplit_search(desc, ones, bins, lo, hi, opt * (1 - 1e-12), std::uint64_t{1} << 24).found);
      ++searched;
    }
    CHECK(pairing_lower_bound(v, bins) <= opt * (1 + 1e-12));
    if (seed % 3 != 0)
      CHECK(equal_count_lower_bound(std::span<const length_t>(w), static_cast<rank_t>(bins), cost::tokens{}) <= opt);
    if (n == 2 * bins) CHECK(pairing_lower_bound(v, bins) == Approx(opt).epsilon(1e-12));  // exact for pairs
    ++checked;
  }
  CHECK(checked > 100);
  CHECK(searched > 60);
}

TEST_CASE("kk equal count on random instances with >= 2 items per bin: never worse than capped lpt", "[balance][kk]") {
  // Issue 13's goal: eq_kk ≤ capped lpt (relative 1e-9) and ≤ 1.01 × the equal-count bound.
  // The first holds on every instance here and on seeds 0–3999 with n ≤ 3,000 (bench/RESULTS.md;
  // seed 3097 was the last exception, checked below). The second cannot hold everywhere: with few
  // integral items the optimum itself is often above 1.01 × any bound. So above the bound
  // (equal_count_lower_bound or the pairing bound, whichever is larger) kk must be no worse
  // than lpt; the count is reported, and capped at the measured one so a regression fails.
  balance::constraints limits;
  limits.counts.kind = balance::count_cap::mode::equal;
  const spec::any_cost costs[] = {spec::parse_cost("tokens"), spec::parse_cost("attention:alpha=1,beta=0.001")};
  const spec::algorithm_spec kk_spec = spec::parse_algorithm("kk"), lpt_spec = spec::parse_algorithm("lpt");
  int runs = 0, over = 0, over_lpt = 0;
  for (std::uint64_t seed = 0; seed < 1500; ++seed) {
    const test::instance in = test::random_instance(seed, 2000);
    if (in.bins < 2 || in.weights.size() < 2 * std::size_t{in.bins}) continue;
    for (const spec::any_cost& c : costs) {
      INFO("seed " << seed << " n " << in.weights.size() << " d " << in.bins << " shape " << in.shape);
      const balance::problem p{in.weights, in.bins, limits};
      const assignment kk = spec::solve(kk_spec, c, p);
      const assignment lpt = spec::solve(lpt_spec, c, p);
      const double kk_max = test::check_run(kk, in.weights, in.bins, c, limits);
      const double lpt_max = test::check_run(lpt, in.weights, in.bins, c, limits);
      const double bound = std::visit(
          [&](const auto& cc) {
            std::vector<double> solo;
            for (const length_t x : in.weights) solo.push_back(cc.value(cc.add(cc.empty(), x)));
            return std::max(equal_count_lower_bound(std::span<const length_t>(in.weights), in.bins, cc),
                            pairing_lower_bound(solo, in.bins));
          },
          c);
      ++runs;
      CHECK(kk_max <= lpt_max * (1 + 1e-9));
      if (kk_max > 1.01 * bound) ++over;
      if (lpt_max > 1.01 * bound) ++over_lpt;
    }
  }
  WARN("runs " << runs << ", eq_kk > 1.01 x bound: " << over << " (capped lpt: " << over_lpt << ")");
  CHECK(runs > 1000);
  // Measured: 173 of 1,944 since session 31's pigeonhole terms in equal_count_lower_bound (209
  // before against the weaker bound, 212 with 2d + 16 re-split attempts, 264 before the exact
  // re-splits; capped lpt: 441, 475 against the weaker bound).
  CHECK(over <= 173);
}

TEST_CASE("kk equal count: a local optimum of the pair and triple re-splits is left (seed 3097)", "[balance][kk]") {
  // n = 36, d = 9, attention: with 2d + 16 re-split attempts kk stopped at 27,361.6, 0.7 %
  // above capped lpt (27,172.0): every round tries 8 pairs and 28 triples, so the budget ran
  // out before the triple that helps. With 2d + 52 it ends at or below lpt.
  const test::instance in = test::random_instance(3097, 3000);
  REQUIRE(in.weights.size() == 36);
  REQUIRE(in.bins == 9);
  balance::constraints limits;
  limits.counts.kind = balance::count_cap::mode::equal;
  const spec::any_cost c = spec::parse_cost("attention:alpha=1,beta=0.001");
  const balance::problem p{in.weights, in.bins, limits};
  const double kk_max = test::check_run(spec::solve(spec::parse_algorithm("kk"), c, p), in.weights, in.bins, c, limits);
  const double lpt_max =
      test::check_run(spec::solve(spec::parse_algorithm("lpt"), c, p), in.weights, in.bins, c, limits);
  CHECK(kk_max <= lpt_max * (1 + 1e-9));
}

TEST_CASE("kk equal count: within 1.01 x the bound wherever the exact optimum is (small instances)", "[balance][kk]") {
  // Issue 13's "≤ 1.01 × the equal-count lower bound" is out of reach where the optimum itself
  // is above that; this asks kk for it wherever it is reachable: on instances small enough to
  // enumerate (d^n ≤ 3^10), every kk maximum within 1.01 × the bound when the optimum is, and
  // within 1.01 × the optimum nearly always (counted). Shapes of test::random_instance (uniform, lognormal,
  // zeros, equal items, one huge item), 2–4 bins, ≥ 2 items per bin, tokens and attention.
  balance::constraints limits;
  limits.counts.kind = balance::count_cap::mode::equal;
  const spec::algorithm_spec kk_spec = spec::parse_algorithm("kk");
  int instances = 0, reachable = 0, reached = 0, above_opt = 0;
  for (std::uint64_t seed = 0; seed < 400; ++seed) {
    test::instance in = test::random_instance(seed, 10);
    in.bins = 2 + static_cast<rank_t>(seed % 3);
    const std::size_t limit = in.bins == 4 ? 8 : 10;  // d^n ≤ 3^10
    if (in.weights.size() > limit) in.weights.resize(limit);
    if (in.weights.size() < 2 * std::size_t{in.bins}) continue;
    for (const char* cost : {"tokens", "attention:alpha=1,beta=0.001"}) {
      INFO("seed " << seed << " n " << in.weights.size() << " d " << in.bins << " cost " << cost);
      const spec::any_cost c = spec::parse_cost(cost);
      std::vector<double> solo;
      double bound = 0;
      std::visit(
          [&](const auto& cc) {
            for (const length_t x : in.weights) solo.push_back(cc.value(cc.add(cc.empty(), x)));
            bound = equal_count_lower_bound(std::span<const length_t>(in.weights), in.bins, cc);
          },
          c);
      const double opt = brute_equal_optimum(solo, in.bins);
      const double kk_max = test::check_run(spec::solve(kk_spec, c, balance::problem{in.weights, in.bins, limits}),
                                            in.weights, in.bins, c, limits);
      ++instances;
      CHECK(bound <= opt * (1 + 1e-12));
      CHECK(kk_max >= opt * (1 - 1e-12));
      above_opt += kk_max > 1.01 * opt;
      if (opt <= 1.01 * bound) {
        ++reachable;
        reached += kk_max <= 1.01 * bound;
      }
    }
  }
  WARN("instances " << instances << ", optimum within 1.01 x the bound on " << reachable << ", kk there on " << reached
                    << "; kk above 1.01 x the optimum on " << above_opt);
  CHECK(instances > 300);
  CHECK(reachable > instances / 2);
  CHECK(reached == reachable);
  // Measured: 1 of 702 (seed 235: 22 against 21 on small integers, where 1 % is below one unit;
  // there the optimum is above 1.01 × the bound, so the goal is out of reach anyway).
  CHECK(above_opt <= 1);
}
