// An archetype of `batch_cost` (docs/DESIGN.md §4): a cost type that has exactly what the
// concept requires — a regular `state`, `empty()`, `add()`, `value()` — and nothing else (no
// `item`, no `padded_value`, no default constructor, no comparison of the cost itself), run
// through every generic algorithm that accepts a `batch_cost`. It compiles only if none of them
// asks for more than the concept; and because its values equal those of a built-in cost, each
// result is checked against the same algorithm run with that built-in cost, or against an
// independent property where the built-in cost takes a different (fast) path.
#include <mmbal/balance/greedy_ascending.hpp>
#include <mmbal/balance/lpt.hpp>
#include <mmbal/balance/micro_batches.hpp>
#include <mmbal/balance/migrate.hpp>
#include <mmbal/balance/refine.hpp>
#include <mmbal/balance/tolerance_lpt.hpp>
#include <mmbal/core/concepts.hpp>
#include <mmbal/core/rng.hpp>
#include <mmbal/cost/functions.hpp>
#include <mmbal/cost/metrics.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace {

using mmbal::length_t;

// b · max l (the `padded` cost), with a state the library has never seen. Explicit
// constructor: algorithms must copy the cost they are given, never default-construct one.
class padded_archetype {
 public:
  struct state {
    std::uint64_t count = 0;
    length_t longest = 0;
    friend bool operator==(const state&, const state&) = default;
  };
  explicit padded_archetype(int /*tag*/) {}
  [[nodiscard]] state empty() const { return {}; }
  [[nodiscard]] state add(state s, length_t l) const { return {s.count + 1, std::max(s.longest, l)}; }
  [[nodiscard]] double value(state s) const { return static_cast<double>(s.count) * s.longest; }
};

// α Σ l + β Σ l² (the `attention` cost) without `item`: the library must take its general
// path, and its results must agree with what the additive fast path gives for `attention`.
class attention_archetype {
 public:
  struct state {
    double linear = 0, quadratic = 0;
    friend bool operator==(const state&, const state&) = default;
  };
  explicit attention_archetype(double alpha, double beta) : alpha_(alpha), beta_(beta) {}
  [[nodiscard]] state empty() const { return {}; }
  [[nodiscard]] state add(state s, length_t l) const {
    return {s.linear + l, s.quadratic + static_cast<double>(l) * l};
  }
  [[nodiscard]] double value(state s) const { return alpha_ * s.linear + beta_ * s.quadratic; }

 private:
  double alpha_, beta_;
};

static_assert(mmbal::batch_cost<padded_archetype> && !mmbal::additive_cost<padded_archetype> &&
              !mmbal::padded_cost<padded_archetype>);
static_assert(mmbal::batch_cost<attention_archetype> && !mmbal::additive_cost<attention_archetype>);

std::vector<length_t> weights(std::uint64_t seed, std::size_t n) {
  mmbal::rng_engine g = mmbal::make_rng(seed, 0xa7);
  std::vector<length_t> w(n);
  for (auto& x : w) x = static_cast<length_t>(1 + g() % 4000);
  return w;
}

double max_of(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }

}  // namespace

TEST_CASE("archetype: an exact batch_cost runs through every generic balancer", "[balance][archetype]") {
  namespace balance = mmbal::balance;
  const padded_archetype arch(0);
  const mmbal::cost::padded builtin;
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    const auto w = weights(seed, 200 + seed * 7);
    const mmbal::rank_t bins = static_cast<mmbal::rank_t>(3 + seed % 9);
    INFO("seed " << seed << ", bins " << bins);
    // The same values, the same general code path: the same assignments.
    const mmbal::assignment a = balance::lpt{}(w, bins, arch);
    CHECK(a == balance::lpt{}(w, bins, builtin));
    CHECK(balance::greedy_ascending{}(w, bins, arch) == balance::greedy_ascending{}(w, bins, builtin));
    CHECK(balance::tolerance_lpt{0.0}(w, bins, arch) == balance::tolerance_lpt{0.0}(w, bins, builtin));
    // refine: the same moves and swaps; the built-in padded cost then continues with its pool
    // re-split, which only lowers the maximum further.
    balance::refine_options moves_and_swaps;
    moves_and_swaps.padded_pool_work = 0;
    CHECK(balance::refine(w, a, arch, {}) == balance::refine(w, a, builtin, {}, moves_and_swaps));
    CHECK(max_of(mmbal::bin_loads(balance::refine(w, a, builtin, {}), w, builtin)) <=
          max_of(mmbal::bin_loads(balance::refine(w, a, arch, {}), w, arch)));
    std::vector<mmbal::rank_t> origin(w.size());
    for (std::size_t i = 0; i < w.size(); ++i) origin[i] = static_cast<mmbal::rank_t>((i * 7) % bins);
    // migrate: the archetype (not a padded_cost) takes the generic path, whose reference is
    // lpt; the built-in padded cost's reference is the better of padded and lpt, never worse.
    const balance::migrate_result m = balance::migrate(w, origin, {}, bins, arch);
    const balance::migrate_result mb = balance::migrate(w, origin, {}, bins, builtin);
    REQUIRE_NOTHROW(m.placement.validate());
    CHECK(m.reference_max == max_of(mmbal::bin_loads(a, w, arch)));
    CHECK(mb.reference_max <= m.reference_max);
    CHECK(mb.target_reached);
    // Micro-batches, both overloads, and the metrics.
    const auto split = balance::split_micro_batches(w, bins, 3, arch);
    CHECK(split.where == balance::split_micro_batches(w, bins, 3, builtin).where);
    const auto kept = balance::split_micro_batches(w, a.to_partition(), 3, arch);
    CHECK(kept.where == balance::split_micro_batches(w, a.to_partition(), 3, builtin).where);
    CHECK(balance::micro_batch_lower_bound(w, bins, arch) == balance::micro_batch_lower_bound(w, bins, builtin));
    CHECK(mmbal::bin_loads(a, w, arch) == mmbal::bin_loads(a, w, builtin));
    CHECK(mmbal::lower_bound(w, bins, arch) == mmbal::lower_bound(w, bins, builtin));
    CHECK(mmbal::equal_count_lower_bound(w, bins, arch) == mmbal::equal_count_lower_bound(w, bins, builtin));
    CHECK(mmbal::batch_value(arch, w) == mmbal::batch_value(builtin, w));
    const auto reordered = balance::intra_microbatch_reorder(w, bins, arch);
    CHECK(reordered.order == balance::intra_microbatch_reorder(w, bins, builtin).order);
  }
}

TEST_CASE("archetype: the general path agrees with the additive fast path", "[balance][archetype]") {
  namespace balance = mmbal::balance;
  const attention_archetype arch(1.0, 1.0 / 8192);
  const mmbal::cost::attention builtin{1.0, 1.0 / 8192};
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    const auto w = weights(seed + 100, 300);
    const mmbal::rank_t bins = static_cast<mmbal::rank_t>(2 + seed % 13);
    INFO("seed " << seed << ", bins " << bins);
    const mmbal::assignment general = balance::lpt{}(w, bins, arch);
    const mmbal::assignment fast = balance::lpt{}(w, bins, builtin);
    REQUIRE_NOTHROW(general.validate());
    // Loads are folded in different orders on the two paths, so ties between bins may break
    // differently: the maxima agree to rounding, and both keep the list-scheduling bound (the
    // last item put on the fullest bin found it least loaded, hence at most the mean before it).
    const double mg = max_of(mmbal::bin_loads(general, w, builtin));
    const double mf = max_of(mmbal::bin_loads(fast, w, builtin));
    CHECK(mg == Approx(mf).epsilon(1e-12));
    const double lb = mmbal::lower_bound(w, bins, arch);
    CHECK(lb == Approx(mmbal::lower_bound(w, bins, builtin)).epsilon(1e-12));
    double total = 0, largest = 0;
    for (length_t l : w) {
      const double c = builtin.item(l);
      total += c;
      largest = std::max(largest, c);
    }
    CHECK(mg <= (total / bins + largest) * (1 + 1e-12));
    CHECK(mg >= lb * (1 - 1e-12));
    const mmbal::assignment refined = balance::refine(w, general, arch, {});
    CHECK(max_of(mmbal::bin_loads(refined, w, arch)) <= max_of(mmbal::bin_loads(general, w, arch)));
  }
}
