// refine's escapes from local optima: the extended partner search (refine_options::extended_work)
// and the exchanges of up to two units each way (refine_options::escape_work), and the property
// "X+refine is never worse than any other shipped algorithm on the same instance (relative 1e-5)"
// on seeded random and generated instances, with the classes where it does not hold counted.
#include "conformance.hpp"

#include <mmbal/balance/padded_binary_search.hpp>
#include <mmbal/balance/refine.hpp>
#include <mmbal/workload/generators.hpp>
#include <mmbal/workload/length_data.hpp>
#include <mmbal/workload/sample.hpp>

#include <array>
#include <cstdio>

using namespace mmbal;

TEST_CASE("refine: the extended partner search escapes the local optimum of the 256-partner window",
          "[balance][refine]") {
  const rank_t d = 512;
  for (const std::uint64_t seed : {2, 2026}) {
    INFO("seed " << seed);
    generator_options o;
    o.samples = 8 * d;
    o.ranks = d;
    o.seed = seed;
    const std::vector<length_t> w = phase_items_of(generate(family::omni, o, default_length_data()), "llm").weights;
    balance::constraints equal;
    equal.counts.kind = balance::count_cap::mode::equal;
    const cost::tokens c;
    const assignment start = balance::lpt{}(w, d, c, equal);
    const double start_max = test::check_run(start, w, d, c, equal);
    balance::refine_options window_only;
    window_only.extended_work = 0;
    window_only.escape_work = 0;
    window_only.resplit_work = 0;
    window_only.redifference_work = 0;
    const double window_max = test::check_run(balance::refine(w, start, c, equal, window_only), w, d, c, equal);
    balance::refine_options no_escape;
    no_escape.escape_work = 0;
    no_escape.resplit_work = 0;
    no_escape.redifference_work = 0;
    const double extended_max = test::check_run(balance::refine(w, start, c, equal, no_escape), w, d, c, equal);
    const assignment escaped = balance::refine(w, start, c, equal);
    CHECK(escaped == balance::refine(w, start, c, equal));  // deterministic
    const double escaped_max = test::check_run(escaped, w, d, c, equal);
    const double kk_max = test::check_run(balance::karmarkar_karp{}(w, d, c, equal), w, d, c, equal);
    CHECK(window_max == start_max);  // the window alone is stuck at the start
    CHECK(extended_max < start_max);
    CHECK(extended_max <= kk_max);
    CHECK(escaped_max <= extended_max);  // the exchanges, re-splits and re-differencing only continue the descent
  }
}

TEST_CASE("refine: the pool re-differencing leaves the equal-count local optimum that pairs and triples cannot",
          "[balance][refine]") {
  // The generated LLaVA LLM phase at 4 samples per rank (32 and 16 ranks) with equal counts:
  // lpt+refine without the re-differencing ends 2.7 % / 1.5 % above kk (bench/RESULTS.md
  // "Session 16 — refine pool re-differencing").
  for (const rank_t d : {32u, 16u}) {
    INFO("d " << d);
    generator_options o;
    o.samples = 4 * d;
    o.ranks = d;
    o.seed = 7 + d + 4;
    const std::vector<length_t> w = phase_items_of(generate(family::llava, o, default_length_data()), "llm").weights;
    balance::constraints equal;
    equal.counts.kind = balance::count_cap::mode::equal;
    const cost::tokens c;
    const assignment start = balance::lpt{}(w, d, c, equal);
    balance::refine_options without;
    without.redifference_work = 0;
    const double without_max = test::check_run(balance::refine(w, start, c, equal, without), w, d, c, equal);
    const assignment with = balance::refine(w, start, c, equal);
    CHECK(with == balance::refine(w, start, c, equal));             // deterministic
    const double with_max = test::check_run(with, w, d, c, equal);  // counts ⌊n/d⌋..⌈n/d⌉, every item once
    const double kk_max = test::check_run(balance::karmarkar_karp{}(w, d, c, equal), w, d, c, equal);
    CHECK(without_max > kk_max * 1.01);
    CHECK(with_max <= kk_max);
  }
}

TEST_CASE("refine: the padded pool re-split undoes what lpt mixes under a padded cost", "[balance][refine]") {
  // `lpt` with a padded cost puts long and short items in every bin; moves and swaps cannot
  // regroup them, the pool re-split (the top bin and its lightest partners split anew by
  // `padded_binary_search`) can: with pools of up to 1,024 items it reaches the padded
  // algorithm's maximum on these (bench/RESULTS.md "Session 18 — the padded path of refine",
  // "Session 19"; with 128-item pools d 16 × 16, 8 × 60 and 64 × 16 ended 1.24-2.69 × above).
  struct instance {
    rank_t d;
    std::uint64_t per_rank;
  };
  for (const instance& c : {instance{8, 16}, instance{16, 4}, instance{16, 16}, instance{8, 60}, instance{64, 16}}) {
    INFO("d " << c.d << " per rank " << c.per_rank);
    generator_options o;
    o.samples = c.per_rank * c.d;
    o.ranks = c.d;
    o.seed = 1;
    o.video_as_image = true;
    const std::vector<length_t> w = phase_items_of(generate(family::omni, o, default_length_data()), "llm").weights;
    const cost::padded cost;
    const balance::constraints none;
    const assignment start = balance::lpt{}(w, c.d, cost);
    balance::refine_options without;
    without.padded_pool_work = 0;
    const double without_max = test::check_run(balance::refine(w, start, cost, none, without), w, c.d, cost, none);
    const assignment with = balance::refine(w, start, cost, none);
    CHECK(with == balance::refine(w, start, cost, none));  // deterministic
    const double with_max = test::check_run(with, w, c.d, cost, none);
    const double padded_max = test::check_run(balance::padded_binary_search{}(w, c.d, cost), w, c.d, cost, none);
    CHECK(with_max < without_max);
    CHECK(with_max == padded_max);
  }
}

namespace {

/// The shipped algorithms that apply to tokens, attention and padded costs (`kk` takes no
/// padded cost, `padded` only one; conv needs the conv cost); migrate needs the origin the
/// caller gives.
constexpr std::array<const char*, 6> shipped = {
    "lpt", "kk", "greedy-ascending", "tolerance:v=500", "migrate:eps=0.001", "padded"};

struct property_counts {
  std::size_t checked = 0, failed = 0;
  double worst = 0;  // largest max(X+refine) / best − 1
};

/// Per X, max(X+refine) / best − 1 (NaN where X does not apply), against the best plain shipped
/// algorithm (`over_plain`) and against the best of every Y and Y+refine (`over_refined`).
struct excesses {
  std::vector<double> over_plain, over_refined;
  bool lowered_by_pool_refinement = false;  // lpt+refine below itself with `refine_pool_splits` off
};

/// Runs every applicable shipped algorithm Y plain and with +refine on one instance and returns
/// X+refine's excesses. Checks that refine never raises its start's maximum and that the escapes
/// (two-unit exchanges, re-splits, then re-differencing) only continue the descent.
excesses excess_over_best(std::span<const length_t> w, rank_t d, const char* cost_spec, bool equal,
                          std::span<const rank_t> origin) {
  const spec::any_cost cost = spec::parse_cost(cost_spec);
  balance::problem p{w, d};
  if (equal) p.limits.counts.kind = balance::count_cap::mode::equal;
  p.origin = origin;
  double best = std::numeric_limits<double>::infinity(), best_plain = best;
  std::vector<double> refined(shipped.size(), std::numeric_limits<double>::quiet_NaN()), plain = refined;
  for (std::size_t x = 0; x < shipped.size(); ++x)
    for (const bool with_refine : {false, true}) {
      const std::string name = std::string(shipped[x]) + (with_refine ? "+refine" : "");
      assignment a;
      try {
        a = spec::solve(spec::parse_algorithm(name), cost, p);
      } catch (const invalid_input&) {
        continue;  // the algorithm does not take these constraints
      }
      const double m = std::visit(
          [&](const auto& c) {
            const auto loads = bin_loads(a, w, c);
            return *std::max_element(loads.begin(), loads.end());
          },
          cost);
      best = std::min(best, m);
      if (!with_refine) {
        best_plain = std::min(best_plain, m);
        plain[x] = m;
      }
      if (with_refine) {
        refined[x] = m;
        INFO(name);
        CHECK(m <= plain[x]);  // refine never raises the maximum of its start
      }
    }
  bool lowered = false;
  std::visit(
      [&](const auto& c) {
        const assignment start = balance::lpt{}(w, d, c, p.limits);
        balance::refine_options no_escape, no_resplit, no_redifference, no_pool_refinement;
        no_pool_refinement.refine_pool_splits = false;
        no_escape.escape_work = 0;
        no_escape.resplit_work = 0;
        no_escape.redifference_work = 0;
        no_escape.padded_pool_work = 0;
        no_resplit.resplit_work = 0;
        no_resplit.redifference_work = 0;
        no_resplit.padded_pool_work = 0;
        no_redifference.redifference_work = 0;
        no_redifference.padded_pool_work = 0;
        auto top = [&](const assignment& a) {
          const auto loads = bin_loads(a, w, c);
          return *std::max_element(loads.begin(), loads.end());
        };
        // Each escape starts where the search without it stops, so it only continues the descent.
        const double with_all = top(balance::refine(w, start, c, p.limits));
        const double without_pool_refinement = top(balance::refine(w, start, c, p.limits, no_pool_refinement));
        const double without_redifference = top(balance::refine(w, start, c, p.limits, no_redifference));
        const double without_resplit = top(balance::refine(w, start, c, p.limits, no_resplit));
        CHECK(with_all <= without_pool_refinement);
        lowered = with_all < without_pool_refinement;
        CHECK(without_pool_refinement <= without_redifference);
        CHECK(without_redifference <= without_resplit);
        CHECK(without_resplit <= top(balance::refine(w, start, c, p.limits, no_escape)));
      },
      cost);
  auto over = [&](double b) {
    std::vector<double> e = refined;
    for (double& r : e)
      if (!std::isnan(r)) r = b > 0 ? r / b - 1 : (r > 0 ? 1.0 : 0.0);
    return e;
  };
  return {over(best_plain), over(best), lowered};
}

}  // namespace

// The issue-13 goal "X+refine is never worse than any other shipped algorithm on the same
// instance (relative 1e-5)": asserted on every (instance, X) pair against the plain shipped
// algorithms (lpt, kk, greedy-ascending, tolerance, migrate; padded where the cost is padded).
// Since session 26 the re-differencing's last pool is the whole instance (≤ 512 items) split in
// item order, i.e. `kk`'s own partition, so X+refine never ends above `kk` there; before, 6 of
// the 1,080 pairs ended above it by 1e-5 .. 2.5e-3 (bench/RESULTS.md "Session 26 — the whole
// instance as the last pool"). The stronger comparison with every Y+refine (another start
// reaches another local optimum) does not hold for a local search and is counted per class
// (48 of 1,080 pairs above it since session 36's refined pool splits, 75 since session 26, 82
// before), and asserted where it holds.
// Also asserted: refine never raises its start's maximum, and each escape never ends above the
// search without it.
TEST_CASE("refine: X+refine against every shipped algorithm, and against every Y+refine (counted)",
          "[balance][refine][property][heavy]") {
  constexpr double tolerance = 1e-5;
  // Class key: (equal counts, items per bin ≤ 3 or d ≤ 2 [tiny], else regular).
  std::map<std::string, property_counts> counts;  // against every Y and Y+refine
  std::size_t checked_plain = 0;
  std::size_t lowered_by_pool_refinement = 0;  // runs (instance, cost) where lpt+refine ends below itself without them
  auto record = [&](const std::string& cls, const excesses& excess) {
    lowered_by_pool_refinement += excess.lowered_by_pool_refinement ? 1 : 0;
    for (std::size_t x = 0; x < excess.over_plain.size(); ++x) {
      if (std::isnan(excess.over_plain[x])) continue;
      INFO(cls << " " << shipped[x] << " excess over the best plain algorithm " << excess.over_plain[x]);
      CHECK(excess.over_plain[x] <= tolerance);
      ++checked_plain;
      property_counts& c = counts[cls + " " + shipped[x]];
      ++c.checked;
      c.worst = std::max(c.worst, excess.over_refined[x]);
      if (excess.over_refined[x] > tolerance) ++c.failed;
    }
  };
  // Random instances: d 2..64, 2..32 items per bin (n = d · s + a remainder < d), four shapes.
  for (std::uint64_t seed = 0; seed < 160; ++seed) {
    rng_engine g = make_rng(seed, 0x5e5510);
    const rank_t d = static_cast<rank_t>(2 + uniform_below(g, seed % 4 == 0 ? 63 : 15));
    const std::size_t per_bin = 2 + uniform_below(g, d > 16 ? 7 : 31);
    const std::size_t n = d * per_bin + uniform_below(g, d);
    std::vector<length_t> w(n);
    const std::uint64_t shape = seed % 4;
    for (auto& x : w) {
      if (shape == 0) x = static_cast<length_t>(1 + uniform_below(g, 1000));
      if (shape == 1) x = static_cast<length_t>(std::min(200000.0, lognormal(g, 1400, 0.9)));
      if (shape == 2) x = static_cast<length_t>(1 + uniform_below(g, 20));
      if (shape == 3)
        x = static_cast<length_t>(uniform_below(g, 8) == 0 ? 5000 + uniform_below(g, 5000) : 1 + uniform_below(g, 500));
    }
    std::vector<rank_t> origin(n);
    for (auto& r : origin) r = static_cast<rank_t>(uniform_below(g, d));
    const bool equal = (seed / 4) % 2 == 1;
    const char* cost = (seed / 8) % 2 == 0 ? "tokens" : "attention:alpha=1,beta=0.0001";
    const std::string size = per_bin <= 3 || d <= 2 ? " tiny" : " regular";
    INFO("seed " << seed << " d " << d << " n " << n << " " << cost);
    record("random " + std::string(equal ? "equal" : "free") + size, excess_over_best(w, d, cost, equal, origin));
    // Padded (free counts: `padded_binary_search` takes no equal counts) on every instance.
    record("padded random free" + size, excess_over_best(w, d, "padded", false, origin));
  }
  // Generated (realistic) instances: the LLM phase of every family at small d, free and equal
  // counts in turn.
  std::size_t generated = 0;
  for (const family f : {family::omni, family::internvl, family::audio, family::llava})
    for (const rank_t d : {2u, 4u, 8u, 16u, 32u})
      for (const std::uint64_t per_rank : {2u, 4u, 8u, 16u}) {
        generator_options o;
        o.samples = per_rank * d;
        o.ranks = d;
        o.seed = 7 + d + per_rank;
        const phase_items items = phase_items_of(generate(f, o, default_length_data()), "llm");
        if (items.weights.empty()) continue;
        const bool equal = generated++ % 2 == 1;
        const std::size_t per_bin = items.weights.size() / d;
        const std::string size = per_bin <= 3 || d <= 2 ? " tiny" : " regular";
        record("generated " + std::string(equal ? "equal" : "free") + size,
               excess_over_best(items.weights, d, "tokens", equal, items.origin));
        record("padded generated free" + size, excess_over_best(items.weights, d, "padded", false, items.origin));
      }
  for (const auto& [name, c] : counts)
    std::printf("%-40s checked %4zu failed %3zu worst %.3g\n", name.c_str(), c.checked, c.failed, c.worst);
  // Where the pair re-split and the pool re-differencing close the gap on every instance
  // (bench/RESULTS.md "Session 11 — refine pair re-split", "Session 16 — refine pool
  // re-differencing", "Session 21 — tied bins in the pool re-differencing"): the generated
  // instances with free counts for X = lpt and kk, with equal counts for lpt (since the pools
  // take in the bins tied with the top; 3 of 32 before) and kk, and the tiny generated
  // equal-count class for every X.
  for (const char* cls :
       {"generated free regular lpt", "generated free regular kk", "generated equal regular lpt",
        "generated equal regular kk", "generated free tiny lpt", "generated free tiny kk", "generated equal tiny lpt",
        "generated equal tiny kk", "generated equal tiny greedy-ascending", "generated equal tiny tolerance:v=500"}) {
    INFO(cls);
    REQUIRE(counts.count(cls) == 1);
    CHECK(counts[cls].checked > 0);
    CHECK(counts[cls].failed == 0);
  }
  // Under the padded cost the property holds on every pair (the padded pool re-split with
  // pools of ≤ 1,024 items that take in the bins tied with the top: bench/RESULTS.md
  // "Session 19"; 35 of the 1,200 fail without the tied bins, 2 with a budget of 16).
  std::size_t padded_checked = 0;
  for (const auto& [name, c] : counts)
    if (name.starts_with("padded ")) {
      INFO(name);
      CHECK(c.failed == 0);
      padded_checked += c.checked;
    }
  CHECK(padded_checked == 1200);  // 5 algorithms (kk takes no padded cost) × 240 instances
  CHECK(checked_plain == 2280);   // 1,080 with tokens or attention, 1,200 padded
  // The refined pool splits (`refine_options::refine_pool_splits`, session 36): 75 → 48 of the
  // 1,080 tokens/attention pairs above the best Y+refine (bench/RESULTS.md "Session 36 — refined
  // pool splits"); asserted as a ceiling, with the instances where they lowered lpt+refine.
  std::size_t failed = 0;
  for (const auto& [name, c] : counts)
    if (!name.starts_with("padded ")) failed += c.failed;
  std::printf(
      "above the best Y+refine: %zu of 1080; lpt+refine lowered by the refined pool splits in %zu of 480 runs\n",
      failed, lowered_by_pool_refinement);
  CHECK(failed <= 48);
  CHECK(lowered_by_pool_refinement >= 30);  // 34 (every one on a tokens or attention cost)
}

TEST_CASE("refine: resplit_search finds the best split under count ranges and unit sizes (brute force)",
          "[balance][refine]") {
  std::size_t found = 0, not_found = 0;
  for (std::uint64_t seed = 0; seed < 300; ++seed) {
    rng_engine g = make_rng(seed, 0x5e5511);
    const std::size_t ways = 2 + uniform_below(g, 2);
    const std::size_t q = 1 + uniform_below(g, ways == 2 ? 12 : 8);
    std::vector<double> cost(q);
    std::vector<std::uint32_t> size(q);
    for (std::size_t i = 0; i < q; ++i) {
      cost[i] = static_cast<double>(seed % 2 == 0 ? 1 + uniform_below(g, 50) : uniform_below(g, 1000)) +
                (seed % 3 == 0 ? 0.25 * static_cast<double>(uniform_below(g, 4)) : 0.0);
      size[i] = static_cast<std::uint32_t>(seed % 4 == 1 ? 1 + uniform_below(g, 3) : 1);
    }
    std::sort(cost.begin(), cost.end(), std::greater<>());
    std::uint64_t items = 0;
    for (const std::uint32_t s : size) items += s;
    const std::uint64_t lo = uniform_below(g, 2) == 0 ? 0 : uniform_below(g, items / ways + 1);
    const std::uint64_t hi =
        uniform_below(g, 3) == 0 ? std::numeric_limits<std::uint64_t>::max() : lo + uniform_below(g, items + 1);
    double total = 0;
    for (const double c : cost) total += c;
    const double incumbent = uniform_below(g, 2) == 0 ? total + 1 : total / static_cast<double>(ways) * 1.1;
    // Brute force over every assignment of the units to the parts.
    double best = std::numeric_limits<double>::infinity();
    std::vector<std::size_t> part(q, 0);
    for (;;) {
      std::vector<double> load(ways, 0.0);
      std::vector<std::uint64_t> count(ways, 0);
      for (std::size_t i = 0; i < q; ++i) {
        load[part[i]] += cost[i];
        count[part[i]] += size[i];
      }
      bool ok = true;
      for (std::size_t b = 0; b < ways; ++b) ok = ok && count[b] >= lo && count[b] <= hi;
      if (ok) best = std::min(best, *std::max_element(load.begin(), load.end()));
      std::size_t i = 0;
      while (i < q && ++part[i] == ways) part[i++] = 0;
      if (i == q) break;
    }
    INFO("seed " << seed << " ways " << ways << " q " << q << " lo " << lo << " hi " << hi);
    const balance::detail::resplit_result r =
        balance::detail::resplit_search(cost, size, ways, lo, hi, incumbent, std::uint64_t{1} << 30);
    CHECK(r.found == (best < incumbent));
    if (!r.found) {
      ++not_found;
      CHECK(r.max_load == incumbent);
      continue;
    }
    ++found;
    CHECK(r.max_load == best);
    std::vector<double> load(ways, 0.0);
    std::vector<std::uint64_t> count(ways, 0);
    for (std::size_t i = 0; i < q; ++i) {
      REQUIRE(r.part[i] < ways);
      load[r.part[i]] += cost[i];
      count[r.part[i]] += size[i];
    }
    CHECK(load == r.load);
    for (std::size_t b = 0; b < ways; ++b) CHECK((count[b] >= lo && count[b] <= hi));
  }
  CHECK(found > 50);  // both outcomes are exercised
  CHECK(not_found > 20);
}

TEST_CASE("refine: the pair re-split keeps groups, count caps and the capacity, and continues the descent",
          "[balance][refine]") {
  std::size_t lowered = 0;
  for (std::uint64_t seed = 0; seed < 120; ++seed) {
    rng_engine g = make_rng(seed, 0x5e5512);
    const rank_t d = static_cast<rank_t>(3 + uniform_below(g, 10));
    const std::size_t n = d * (3 + uniform_below(g, 8));
    std::vector<length_t> w(n);
    for (auto& x : w) x = static_cast<length_t>(1 + uniform_below(g, seed % 2 == 0 ? 100 : 5000));
    balance::constraints limits;
    const std::uint64_t mode = seed % 3;
    if (mode == 0) limits.counts.kind = balance::count_cap::mode::equal;
    if (mode == 1) {
      limits.counts.kind = balance::count_cap::mode::fixed;
      limits.counts.cap = static_cast<std::uint32_t>(n / d + 2);
    }
    std::vector<std::uint64_t> groups;
    if (seed % 2 == 1) {  // runs of consecutive items as groups
      groups.resize(n);
      std::uint64_t id = 0;
      for (std::size_t i = 0; i < n; ++i) {
        if (i > 0 && uniform_below(g, 3) != 0) ++id;
        groups[i] = id;
      }
      limits.groups = groups;
    }
    const cost::tokens c;
    assignment start;
    try {
      start = balance::lpt{}(w, d, c, limits);
    } catch (const invalid_input&) {
      continue;  // lpt does not take this combination
    }
    const double start_max = test::check_run(start, w, d, c, limits);
    if (mode == 2) limits.capacity = start_max;  // the tightest capacity the start meets
    balance::refine_options no_resplit;
    no_resplit.resplit_work = 0;
    no_resplit.redifference_work = 0;
    INFO("seed " << seed << " d " << d << " n " << n << " mode " << mode);
    const assignment with = balance::refine(w, start, c, limits);
    CHECK(with == balance::refine(w, start, c, limits));  // deterministic
    const double with_max = test::check_run(with, w, d, c, limits);
    const double without_max = test::check_run(balance::refine(w, start, c, limits, no_resplit), w, d, c, limits);
    CHECK(with_max <= without_max);
    lowered += with_max < without_max ? 1 : 0;
  }
  CHECK(lowered > 5);  // the re-split does fire on these instances
}
