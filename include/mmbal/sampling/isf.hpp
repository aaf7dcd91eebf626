#pragma once
/// @file
/// OmniBal's Iterative Sampling and Filtering (ISF): balanced dynamic mini-batches whose
/// vision size and LLM tokens both stay within a narrow band, so that every device of a step
/// gets a similar ViT and LLM load (docs/DESIGN.md §5.2). Also the paper's statistical choice of
/// the thresholds and a search that tunes them for a target average batch size.
/// @see OmniBal §4.1 (Alg. 1), §5.2 ("How to get Qv and Qt"), Tables 3 and 6.

#include <mmbal/core/error.hpp>
#include <mmbal/core/rng.hpp>
#include <mmbal/core/types.hpp>
#include <mmbal/sampling/grouping.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <vector>

namespace mmbal::detail {

/// One pooled sample with its sizes next to it, so a pass over the shuffled pool reads
/// memory sequentially instead of gathering v[i], t[i] at random.
struct isf_record {
  std::uint32_t index;
  length_t vision;
  length_t text;
};

/// Reorders groups [first, size) of `g` by descending Σt, then descending Σv, then ascending
/// first member (a strict total order: groups are disjoint), rebuilding that part of the CSR.
inline void sort_groups_by_load(sampling::grouping& g, std::size_t first, std::span<const length_t> vision,
                                std::span<const length_t> text) {
  struct key {
    std::uint64_t t, v;
    std::uint32_t first_member;
    std::size_t group;
  };
  std::vector<key> keys;
  keys.reserve(g.size() - first);
  for (std::size_t k = first; k < g.size(); ++k) {
    key x{0, 0, g.group(k).front(), k};
    for (std::uint32_t i : g.group(k)) {
      x.t += text[i];
      x.v += vision[i];
    }
    keys.push_back(x);
  }
  std::sort(keys.begin(), keys.end(), [](const key& a, const key& b) {
    if (a.t != b.t) return a.t > b.t;
    if (a.v != b.v) return a.v > b.v;
    return a.first_member < b.first_member;
  });
  const std::uint32_t base = g.offsets[first];
  std::vector<std::uint32_t> members;
  members.reserve(g.members.size() - base);
  std::vector<std::uint32_t> offsets;
  offsets.reserve(keys.size());
  for (const key& x : keys) {
    const auto m = g.group(x.group);
    members.insert(members.end(), m.begin(), m.end());
    offsets.push_back(base + static_cast<std::uint32_t>(members.size()));
  }
  std::copy(members.begin(), members.end(), g.members.begin() + base);
  std::copy(offsets.begin(), offsets.end(), g.offsets.begin() + static_cast<std::ptrdiff_t>(first) + 1);
}

}  // namespace mmbal::detail

namespace mmbal::sampling {

/// What ISF does with a sample that alone exceeds a cap (v > Qv or t > Qt): no group can
/// hold it within the caps.
enum class oversize_policy : std::uint8_t {
  singleton,  ///< (default) it forms a group of its own, reported in `isf_result::singletons`
  reject,     ///< throw `invalid_input` naming the first such sample (strict mode)
  drop,       ///< leave it out of every group; reported in `isf_result::dropped`
};

/// ISF parameters. Units of `qv` follow the caller's vision measure (images or vision tokens);
/// `qt` is in LLM tokens over the whole sequence (OmniBal's `token_num`).
struct isf_options {
  std::uint64_t qv = 0;                    ///< Qv, vision cap per group (required, > 0)
  std::uint64_t qt = 0;                    ///< Qt, LLM-token cap per group (required, > 0)
  std::optional<std::uint64_t> qv_target;  ///< Qv', default Qv (paper §5.2); must be <= Qv
  std::optional<std::uint64_t> qt_target;  ///< Qt', default Qt − 128 (paper §5.2; Qt when Qt <= 128); <= Qt
  /// T, sampling+filtering rounds (paper: 10; at most `max_isf_iterations`); 0 = final pass only.
  std::uint32_t iterations = 10;
  std::uint64_t seed = 0;                                 ///< shuffle seed; pass p uses `make_rng(seed, p)`
  oversize_policy oversize = oversize_policy::singleton;  ///< samples above a cap on their own
  bool drop_unfilled = false;  ///< drop (and count) final-pass groups that miss both targets; default keep
  /// Order the final-pass groups, and separately the singletons, by descending Σt (then Σv,
  /// then first member), so consecutive steps deal groups of similar load; default true.
  /// false keeps draw order (final pass) and ascending index (singletons).
  bool sort_tail = true;
};

/// The thresholds ISF actually used (defaults resolved).
struct isf_thresholds {
  std::uint64_t qv = 0;         ///< Qv
  std::uint64_t qt = 0;         ///< Qt
  std::uint64_t qv_target = 0;  ///< Qv'
  std::uint64_t qt_target = 0;  ///< Qt'
  friend bool operator==(const isf_thresholds&, const isf_thresholds&) = default;
};

/// Default Qt' of the paper (§5.2, Table 6): Qt − 128. For Qt <= 128 the relaxation would
/// accept empty groups, so the target is then Qt itself.
[[nodiscard]] constexpr std::uint64_t default_qt_target(std::uint64_t qt) noexcept { return qt > 128 ? qt - 128 : qt; }

/// Counters of one ISF run.
struct isf_stats {
  isf_thresholds thresholds;         ///< resolved Qv, Qt, Qv', Qt'
  std::uint32_t iterations_run = 0;  ///< rounds run (< T once the pool is empty or its Σv < Qv' and Σt < Qt')
  std::vector<std::uint32_t> kept_per_iteration;  ///< groups kept by each round's filter
  std::uint32_t leftover_samples = 0;             ///< samples still pooled after the T rounds
  std::uint32_t final_groups = 0;                 ///< groups formed by the final pass (kept ones)
};

/// ISF's output. `groups` holds, in this order: the groups kept by round 1, 2, …, T (each
/// round's in draw order), the final-pass groups, then one group per oversize singleton; the
/// last two blocks are each sorted by descending load with `sort_tail` (default; else draw
/// order and ascending sample index). Dealing consecutive groups to the d devices of a step
/// then pairs near-full groups with each other, and leftovers with leftovers of similar size.
/// `singletons` lists the oversize samples in ascending index. Every
/// sample index in [0, n) is in exactly one group, or in `dropped` (only with
/// `oversize_policy::drop` or `drop_unfilled`).
struct isf_result {
  grouping groups;                        ///< sample indices per group
  std::vector<std::uint32_t> singletons;  ///< oversize samples, each the only member of one of the last groups
  std::vector<std::uint32_t> dropped;     ///< samples in no group (ascending), only when an option asks for it
  isf_stats stats;
};

/// The most sampling+filtering rounds an ISF run takes: 2^16 (the paper uses 10). Rounds that
/// keep nothing cost as much as any other, and whether a pool can still form a group that
/// meets a target is a subset-sum question, so they are not skipped: the bound keeps a
/// mistyped T (10^8) from running for minutes on a two-sample pool.
inline constexpr std::uint32_t max_isf_iterations = 1u << 16;

/// Resolves and checks ISF thresholds: Qv, Qt > 0, Qv' <= Qv, Qt' <= Qt (a target above its
/// cap can never be met by a capped group and would only ever keep oversize singletons), and
/// T ≤ `max_isf_iterations`. Throws `invalid_input` naming the value.
[[nodiscard]] inline isf_thresholds resolve_thresholds(const isf_options& o) {
  if (o.iterations > max_isf_iterations)
    detail::throw_invalid("isf: iterations = ", o.iterations, " exceeds max_isf_iterations = ", max_isf_iterations);
  if (o.qv == 0) detail::throw_invalid("isf: qv = 0 (the vision cap must be > 0; use a large qv to ignore vision)");
  if (o.qt == 0) detail::throw_invalid("isf: qt = 0 (the LLM-token cap must be > 0)");
  isf_thresholds q{o.qv, o.qt, o.qv_target.value_or(o.qv), o.qt_target.value_or(default_qt_target(o.qt))};
  if (q.qv_target > q.qv) detail::throw_invalid("isf: qv_target = ", q.qv_target, " exceeds qv = ", q.qv);
  if (q.qt_target > q.qt) detail::throw_invalid("isf: qt_target = ", q.qt_target, " exceeds qt = ", q.qt);
  return q;
}

/// Iterative Sampling and Filtering (OmniBal Alg. 1) over n samples; sample i has vision size
/// `vision[i]` (images or vision encoder tokens, the caller's choice) and LLM tokens `text[i]`.
///
/// Each round p = 0..T−1: shuffle the pool (`make_rng(seed, p)`, portable Fisher–Yates);
/// sampling stage — walk it, adding samples to the open group while Σv <= Qv and Σt <= Qt;
/// the sample that would overflow a cap closes the group and opens the next one (the open
/// group at the end of the walk is a candidate too); filtering stage — keep the groups with
/// Σv >= Qv' or Σt >= Qt' and take their samples out of the pool; the rest return to it.
/// After T rounds (or earlier, once the pool is empty or too small to reach either target as a
/// whole, when further rounds could keep nothing) a final pass (shuffle `make_rng(seed, T)`,
/// sampling stage only) groups whatever remains, so no sample is lost; with `drop_unfilled`
/// the final-pass groups that miss both targets are dropped instead and counted. Oversize
/// samples (v > Qv or t > Qt) never enter the pool (see `oversize_policy`).
///
/// Guarantees: every group except oversize singletons has Σv <= Qv and Σt <= Qt; every group
/// kept by a round also has Σv >= Qv' or Σt >= Qt'; every sample is in exactly one group or
/// in `dropped`; the result depends only on the inputs and the seed (bit-identical on every
/// rank). Group order: see `isf_result` (`sort_tail`). Complexity O(Σ_p |pool_p|) =
/// O(n · (T + 1)) time in the worst case (the pool shrinks each round; on InternVL data
/// Σ_p |pool_p| ≈ 3.2 n for T = 10), plus O(g log g) to sort g tail groups; O(n) extra memory.
///
/// Throws `invalid_input` for sizes that differ, more than 2^32 − 1 samples, bad thresholds
/// (see `resolve_thresholds`), or, with `oversize_policy::reject`, the first sample that alone
/// exceeds a cap (named with its index and sizes).
/// @see OmniBal §4.1, Alg. 1; §5.2 for Qv' = Qv, Qt' = Qt − 128.
[[nodiscard]] inline isf_result isf(std::span<const length_t> vision, std::span<const length_t> text,
                                    const isf_options& options) {
  if (vision.size() != text.size())
    detail::throw_invalid("isf: ", vision.size(), " vision sizes but ", text.size(), " text sizes");
  const std::uint32_t n = checked_count(text.size(), "isf samples");
  isf_result out;
  const isf_thresholds q = resolve_thresholds(options);
  out.stats.thresholds = q;

  std::vector<detail::isf_record> pool;
  pool.reserve(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    if (vision[i] <= q.qv && text[i] <= q.qt) {
      pool.push_back({i, vision[i], text[i]});
      continue;
    }
    if (options.oversize == oversize_policy::reject)
      detail::throw_invalid("isf: sample ", i, " alone exceeds a cap (vision ", vision[i], ", qv = ", q.qv, "; tokens ",
                            text[i], ", qt = ", q.qt,
                            ") and oversize samples are rejected (strict mode); raise qv/qt or allow singletons");
    (options.oversize == oversize_policy::singleton ? out.singletons : out.dropped).push_back(i);
  }
  out.groups.members.reserve(n);

  // One sampling stage over `pool` (shuffled with stream `pass`); `keep` decides each closed
  // group's fate. Kept groups go to the output; the others' records are compacted in place to
  // the front of `pool` (the write position never passes the group being read) and returned.
  std::uint64_t pool_v = 0, pool_t = 0;  // Σv, Σt of the pool
  for (const detail::isf_record& r : pool) {
    pool_v += r.vision;
    pool_t += r.text;
  }
  const auto pass = [&](std::uint64_t stream, auto&& keep, auto&& reject_group) -> std::uint32_t {
    rng_engine rng = make_rng(options.seed, stream);
    shuffle(std::span<detail::isf_record>(pool), rng);
    std::uint32_t kept = 0;
    std::size_t write = 0, start = 0;
    std::uint64_t sum_v = 0, sum_t = 0;
    const auto close = [&](std::size_t end) {
      if (keep(sum_v, sum_t)) {
        for (std::size_t k = start; k < end; ++k) out.groups.members.push_back(pool[k].index);
        out.groups.close_group();
        ++kept;
        pool_v -= sum_v;
        pool_t -= sum_t;
      } else {
        for (std::size_t k = start; k < end; ++k) reject_group(pool[k], write);
      }
    };
    for (std::size_t k = 0; k < pool.size(); ++k) {
      const detail::isf_record& r = pool[k];
      if (k > start && (sum_v + r.vision > q.qv || sum_t + r.text > q.qt)) {
        close(k);
        start = k;
        sum_v = sum_t = 0;
      }
      sum_v += r.vision;
      sum_t += r.text;
    }
    if (start < pool.size()) close(pool.size());
    pool.resize(write);
    return kept;
  };
  const auto meets_target = [&](std::uint64_t sum_v, std::uint64_t sum_t) {
    return sum_v >= q.qv_target || sum_t >= q.qt_target;
  };
  const auto back_to_pool = [&](const detail::isf_record& r, std::size_t& write) { pool[write++] = r; };

  // A round can only keep a group when the whole pool reaches a target; once it cannot, the
  // remaining rounds would keep nothing, so stop (this also bounds the work for huge T).
  const auto can_keep = [&] { return pool_v >= q.qv_target || pool_t >= q.qt_target; };
  for (std::uint32_t p = 0; p < options.iterations && !pool.empty() && can_keep(); ++p) {
    out.stats.kept_per_iteration.push_back(pass(p, meets_target, back_to_pool));
    ++out.stats.iterations_run;
  }
  out.stats.leftover_samples = static_cast<std::uint32_t>(pool.size());
  const std::size_t first_final = out.groups.size();
  if (!pool.empty()) {
    const auto final_keep = [&](std::uint64_t sum_v, std::uint64_t sum_t) {
      return !options.drop_unfilled || meets_target(sum_v, sum_t);
    };
    const auto drop = [&](const detail::isf_record& r, std::size_t&) { out.dropped.push_back(r.index); };
    out.stats.final_groups = pass(options.iterations, final_keep, drop);
  }
  if (options.sort_tail) {
    // Sort the final-pass groups by size so that each step deals groups of similar load.
    detail::sort_groups_by_load(out.groups, first_final, vision, text);
  }
  const std::size_t first_singleton = out.groups.size();
  for (std::uint32_t i : out.singletons) {
    out.groups.members.push_back(i);
    out.groups.close_group();
  }
  if (options.sort_tail) detail::sort_groups_by_load(out.groups, first_singleton, vision, text);
  std::sort(out.dropped.begin(), out.dropped.end());
  return out;
}

/// Dataset statistics the paper derives the thresholds from.
struct length_stats {
  std::uint64_t samples = 0;       ///< n
  std::uint64_t total_vision = 0;  ///< Σ v
  std::uint64_t total_text = 0;    ///< Σ t
  length_t max_vision = 0;         ///< max v
  length_t max_text = 0;           ///< max t (the longest sample)
};

/// Σ, max and count of the per-sample sizes. O(n). Throws when the sizes differ.
[[nodiscard]] inline length_stats compute_length_stats(std::span<const length_t> vision,
                                                       std::span<const length_t> text) {
  if (vision.size() != text.size())
    detail::throw_invalid("compute_length_stats: ", vision.size(), " vision sizes but ", text.size(), " text sizes");
  length_stats s;
  s.samples = text.size();
  for (std::size_t i = 0; i < text.size(); ++i) {
    s.total_vision += vision[i];
    s.total_text += text[i];
    s.max_vision = std::max(s.max_vision, vision[i]);
    s.max_text = std::max(s.max_text, text[i]);
  }
  return s;
}

/// OmniBal's statistical choice of the thresholds (§5.2): "Qt is set to the longest text token
/// length, and the text-to-image ratio determines Qv", with Qv' = Qv and Qt' = Qt − 128:
///
///   Qt = max t                                   (target_batch = 0, the paper's rule)
///   Qt = round(target_batch · Σt / n)            (target_batch > 0: room for that many
///                                                 average samples; longer ones become singletons)
///   Qv = max(1, round(Qt · Σv / Σt))             (the dataset's vision per LLM token, scaled to Qt)
///
/// So a group at the text cap carries the dataset's average vision load, and neither cap is
/// systematically the binding one. (InternVL-Chat-1.2: Qt = 4K, Qv = 9 images.) O(1).
/// Throws `invalid_input` for an empty dataset, Σt = 0, or a negative / non-finite target.
/// @see OmniBal §5.2, Table 6.
[[nodiscard]] inline isf_thresholds derive_thresholds(const length_stats& stats, double target_batch = 0) {
  if (stats.samples == 0) detail::throw_invalid("derive_thresholds: no samples");
  if (stats.total_text == 0) detail::throw_invalid("derive_thresholds: every sample has 0 LLM tokens");
  if (!std::isfinite(target_batch) || target_batch < 0)
    detail::throw_invalid("derive_thresholds: target_batch = ", target_batch, " (must be >= 0; 0 = paper's rule)");
  isf_thresholds q;
  if (target_batch == 0) {
    q.qt = stats.max_text;
  } else {
    const double qt =
        std::round(target_batch * static_cast<double>(stats.total_text) / static_cast<double>(stats.samples));
    if (!(qt < 9.0e18)) detail::throw_invalid("derive_thresholds: target_batch = ", target_batch, " is too large");
    q.qt = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(qt));
  }
  const double qv = std::round(static_cast<double>(q.qt) * static_cast<double>(stats.total_vision) /
                               static_cast<double>(stats.total_text));
  q.qv = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::min(qv, 9.0e18)));
  q.qv_target = q.qv;
  q.qt_target = default_qt_target(q.qt);
  return q;
}

/// Options of `search_thresholds`. Defaults: 10 rounds, seed 0, 12 calibration steps, a 7 × 7
/// grid of scales around the calibrated statistical choice, average batch within 10 % of the
/// target.
struct threshold_search_options {
  std::uint32_t iterations = 10;  ///< T of every ISF run
  std::uint64_t seed = 0;         ///< seed of every ISF run (the same for all candidates)
  /// Bisection steps that scale the statistical (Qv, Qt) together (ratio kept) until ISF's
  /// average batch meets the target, before the grid; 0 = grid around the statistical choice.
  std::uint32_t calibration_steps = 12;
  std::vector<double> qt_scales{0.8, 0.9, 1.0, 1.1, 1.2, 1.35, 1.5};   ///< Qt candidates = round(scale · Qt₀)
  std::vector<double> qv_scales{0.6, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5};  ///< Qv candidates = round(scale · Qv₀)
  double batch_tolerance = 0.1;  ///< admissible |average batch − target| / target
  bool sort_tail = true;         ///< `isf_options::sort_tail` of every ISF run
};

/// The chosen thresholds and how they did.
struct threshold_search_result {
  isf_thresholds start;           ///< the grid's centre: the calibrated statistical choice
  isf_thresholds thresholds;      ///< best candidate (Qv' = Qv, Qt' = default_qt_target(Qt))
  grouping_metrics metrics;       ///< its pad ratio, dist ratios, average batch
  double objective = 0;           ///< pad ratio + dist ratio (vision) + dist ratio (text)
  std::size_t candidates = 0;     ///< distinct (Qv, Qt) pairs evaluated
  bool within_tolerance = false;  ///< whether the best meets the batch tolerance
};

/// Tunes (Qv, Qt) for a target average batch size the way OmniBal tunes its thresholds
/// (Table 6): start from `derive_thresholds(stats, target_batch)`; calibrate it — a bisection
/// on a common factor s ∈ [1/4, 4] of Qv and Qt (log scale, `calibration_steps` ISF runs),
/// because the greedy fill leaves groups below Qt and the statistical Qt therefore yields
/// fewer samples per group than the target, the more so the smaller the target; then run ISF
/// (oversize samples as singletons) for the statistical pair and for every pair on the grid
/// of scales around the calibrated centre (`start`), deal the groups to `ranks` devices per
/// step, and keep the pair minimising pad ratio + dist ratio (ViT) + dist ratio (LLM) among
/// those whose average batch is within `batch_tolerance` of the target. If none is, the pair
/// whose average batch is closest to the target wins. Ties go to the earlier candidate (the
/// statistical pair, then Qt scales outer, Qv scales inner), so the result is deterministic.
/// Complexity O((calibration_steps + 1 + |qt_scales| · |qv_scales|) · n · (T + 1)).
/// Throws `invalid_input` for ranks = 0 or above `max_ranks`, target_batch <= 0, empty scale
/// lists or non-positive scales, and whatever `derive_thresholds` rejects.
/// @see OmniBal §5.2, Tables 3 and 6.
[[nodiscard]] inline threshold_search_result search_thresholds(std::span<const length_t> vision,
                                                               std::span<const length_t> text, rank_t ranks,
                                                               double target_batch,
                                                               const threshold_search_options& options = {}) {
  (void)checked_ranks(ranks, "search_thresholds: ranks");
  if (!(target_batch > 0) || !std::isfinite(target_batch))
    detail::throw_invalid("search_thresholds: target_batch = ", target_batch, " (must be > 0)");
  if (options.qt_scales.empty() || options.qv_scales.empty())
    detail::throw_invalid("search_thresholds: empty scale grid");
  for (double s : options.qt_scales)
    if (!(s > 0) || !std::isfinite(s)) detail::throw_invalid("search_thresholds: qt scale ", s, " must be > 0");
  for (double s : options.qv_scales)
    if (!(s > 0) || !std::isfinite(s)) detail::throw_invalid("search_thresholds: qv scale ", s, " must be > 0");
  if (!(options.batch_tolerance >= 0))
    detail::throw_invalid("search_thresholds: batch_tolerance = ", options.batch_tolerance);
  const isf_thresholds statistical = derive_thresholds(compute_length_stats(vision, text), target_batch);
  const auto scaled = [](std::uint64_t x, double s) {
    return std::max<std::uint64_t>(
        1, static_cast<std::uint64_t>(std::min(std::round(static_cast<double>(x) * s), 9.0e18)));
  };
  const auto run = [&](std::uint64_t qv, std::uint64_t qt) {
    isf_options o;
    o.qv = qv;
    o.qt = qt;
    o.iterations = options.iterations;
    o.seed = options.seed;
    o.sort_tail = options.sort_tail;
    return evaluate_grouping(isf(vision, text, o).groups, vision, text, ranks);
  };
  // Average batch grows with the common scale (more room per group), up to ISF's randomness;
  // bisection in log scale keeps the ratio Qv / Qt of the statistical rule.
  double lo = 0.25, hi = 4.0;
  for (std::uint32_t step = 0; step < options.calibration_steps; ++step) {
    const double mid = std::sqrt(lo * hi);
    if (run(scaled(statistical.qv, mid), scaled(statistical.qt, mid)).average_batch < target_batch)
      lo = mid;
    else
      hi = mid;
  }
  const double factor = options.calibration_steps > 0 ? std::sqrt(lo * hi) : 1.0;
  isf_options centre;
  centre.qv = scaled(statistical.qv, factor);
  centre.qt = scaled(statistical.qt, factor);
  const isf_thresholds base = resolve_thresholds(centre);

  threshold_search_result best;
  best.start = base;
  bool have = false;
  double best_gap = 0;
  std::vector<isf_thresholds> seen;
  // Candidates: the statistical choice itself first (the search never does worse than it when
  // it is admissible), then the grid around the calibrated centre.
  std::vector<isf_thresholds> candidates{statistical};
  for (double st : options.qt_scales) {
    for (double sv : options.qv_scales) {
      isf_options o;
      o.qt = scaled(base.qt, st);
      o.qv = scaled(base.qv, sv);
      candidates.push_back(resolve_thresholds(o));
    }
  }
  for (const isf_thresholds& q : candidates) {
    if (std::find(seen.begin(), seen.end(), q) != seen.end()) continue;  // rounding made a duplicate
    seen.push_back(q);
    const grouping_metrics m = run(q.qv, q.qt);
    const double objective = m.pad_ratio + m.dist_ratio_vision + m.dist_ratio_text;
    const double gap = std::abs(m.average_batch - target_batch);
    const bool ok = gap <= options.batch_tolerance * target_batch;
    const bool better =
        !have || (ok && !best.within_tolerance) || (ok && best.within_tolerance && objective < best.objective) ||
        (!ok && !best.within_tolerance && (gap < best_gap || (gap == best_gap && objective < best.objective)));
    if (better) {
      best.thresholds = q;
      best.metrics = m;
      best.objective = objective;
      best.within_tolerance = ok;
      best_gap = gap;
      have = true;
    }
  }
  best.candidates = seen.size();
  return best;
}

}  // namespace mmbal::sampling
