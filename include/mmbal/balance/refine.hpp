#pragma once
/// @file
/// `refine`: local search that lowers the maximum bin cost of any assignment — moves and
/// pairwise swaps of items between the most loaded bin and the least loaded ones while the
/// maximum strictly drops, then (additive costs) exchanges of up to two items each way, pair
/// (or triple) re-splits and pool re-differencing to escape local optima, never violating a
/// constraint (docs/DESIGN.md §5.1).

#include <mmbal/balance/constraints.hpp>
#include <mmbal/balance/detail/bin_queue.hpp>
#include <mmbal/balance/detail/cost_classes.hpp>
#include <mmbal/balance/detail/count_limits.hpp>
#include <mmbal/balance/detail/resplit.hpp>
#include <mmbal/balance/detail/units.hpp>
#include <mmbal/balance/detail/validate.hpp>
#include <mmbal/balance/karmarkar_karp.hpp>
#include <mmbal/balance/lpt.hpp>
#include <mmbal/balance/padded_binary_search.hpp>
#include <mmbal/core/concepts.hpp>
#include <mmbal/core/types.hpp>
#include <mmbal/cost/batch_stats.hpp>
#include <mmbal/cost/functions.hpp>
#include <mmbal/cost/metrics.hpp>

#include <mmbal/core/detail/bitmap_set.hpp>
#include <mmbal/core/detail/indexed_heap.hpp>
#include <mmbal/core/detail/order.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <iterator>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <span>
#include <utility>
#include <vector>

namespace mmbal::balance {

/// Work bounds of `refine`. Both bound the search; neither changes what counts as an
/// improvement.
struct refine_options {
  /// Accepted steps (one move or one swap each) are at most `max_passes` × (number of units,
  /// i.e. items, or groups when groups are given): on average every unit may move
  /// `max_passes` times. Default 4. 0 disables the search (the start is returned).
  std::uint32_t max_passes = 4;
  /// Per step, the partners of the most loaded bin are the least loaded bins in increasing
  /// load (ties by index); at most `max_partners` of them are tried, and the first that
  /// admits an improving move or swap is used with its best one. Default 256: when the few
  /// least loaded bins sit at nearly the same load, an exchange that fits the small gap is
  /// often found only a few hundred partners away (measured on the generated families at
  /// d = 2,560: 16 partners stop at 1.0003 × the bound, 256 reach the integral optimum).
  std::uint32_t max_partners = 256;
  /// Escaping local optima: when none of the first `max_partners` partners admits an improving
  /// step, the search goes on through the remaining lighter bins (in increasing load) instead
  /// of stopping. Such extended scans share one budget for the whole run of
  /// `extended_work` × units unit visits (a partner costs the units of both bins); once it is
  /// spent, a step that finds nothing in the first `max_partners` ends the search. Default 256:
  /// on omni with 8 samples per rank and equal counts the 256 lightest bins hold no improving
  /// swap while farther ones do (lpt+refine 1.0212 → 1.0062 × the bound, seed 2, d = 512).
  /// 0 restores the plain window.
  std::uint32_t extended_work = 256;
  /// Few distinct integral unit costs (at most 256 values, all below 2^20: an image phase's
  /// image sizes) and at least 64 bins: once a step's lightest partner admits nothing, the
  /// partners that hold no unit within the gap of one of the top bin's are skipped without
  /// scanning them (`detail::class_filter`). Exact: the same steps and the same result as without it, in less
  /// time (bench/RESULTS.md "Session 22 — skipping partners by cost class"). Default true;
  /// false scans every partner (the reference of the tests).
  bool cost_class_filter = true;
  /// Escaping local optima of single moves and swaps (additive costs): when no partner admits
  /// an improving move or swap, exchanges of up to two units each way (2-for-1, 1-for-2,
  /// 2-for-2, 2-for-0) between the top bin and the lighter bins (in increasing load) are
  /// tried; the first partner that admits an improving one gives its best, then the plain
  /// search resumes. One budget for the whole run of `escape_work` × units set visits (a
  /// partner costs the number of unit sets of both bins, s(s+1)/2 each). Default 64.
  /// 0 disables it.
  std::uint32_t escape_work = 64;
  /// The escape runs only between bins of at most this many units (O(s²) sets per bin); larger
  /// bins have dense enough single-unit sums that moves and swaps end near the bound. Default 32.
  std::uint32_t escape_max_units = 32;
  /// Pair re-split (additive costs), the last escape: when no move, swap or two-unit exchange
  /// improves, the top bin's units are pooled with those of one of its `resplit_partners`
  /// lightest partners (lightest first), and the best split of the pool into two bins that
  /// meets the constraints is searched by a bounded complete search (`detail::resplit_search`,
  /// `resplit_nodes` nodes each); then, as `kk`'s re-differencing does, with two of the 8
  /// lightest partners, split three ways. The first split whose new loads all end strictly below
  /// the top bin's is applied (parts go to the bins that keep the most items). One budget for
  /// the whole run of `resplit_work` × units search nodes. Default 64; 0 disables it. Not inside
  /// `migrate`'s polish.
  std::uint32_t resplit_work = 64;
  /// Nodes of one re-split search (each pool tried). Default 1,024, as `kk`'s re-splits.
  std::uint32_t resplit_nodes = 1024;
  /// Partners tried by the pair re-split. Default 64: with few items per bin the partner
  /// whose pool splits better is often not among the 8 lightest (generated LLM phases, 4 per bin).
  std::uint32_t resplit_partners = 64;
  /// The re-split runs only on pools of at most this many units (the search is exponential in
  /// the pool; larger bins end near the bound with moves and swaps). Default 64.
  std::uint32_t resplit_max_units = 64;
  /// Pool re-differencing (additive costs, no groups, free or equal counts), the escape after
  /// the pair re-split: the top bin's items are pooled with those of its 3, then 7, 15, ...
  /// lightest partners (bins tied with it last; while the pool holds at most
  /// `redifference_max_units` items) and split anew among those bins by `kk` (its equal-count
  /// form keeps every count within ⌊n/d⌋..⌈n/d⌉). The first pool whose new loads all end strictly
  /// below the top bin's is applied (parts go to the bins that keep the most items). One budget
  /// for the whole run of `redifference_work` × items pooled. Default 16; 0 disables it. Not
  /// inside `migrate`'s polish. Taking in the tied bins: 92 → 82 of the 1,080 counted (instance,
  /// X) pairs above the best shipped algorithm (bench/RESULTS.md "Session 21 — tied bins in the
  /// pool re-differencing").
  std::uint32_t redifference_work = 16;
  /// The largest pool of the re-differencing, in items. Default 128: with more items per bin
  /// moves and swaps end near the bound, and on near-ties (attention costs) larger pools keep
  /// finding tiny gains at a high price (60 items per bin, 2,560 bins: 14 × the time).
  std::uint32_t redifference_max_units = 128;
  /// The re-differencing's last pool is the whole instance: while it holds at most this many
  /// items, the first pool beyond `redifference_max_units` is replaced by every bin (once per
  /// call). The pool is split in item order, so a pool of every bin is `kk`'s own partition of
  /// the instance, and `X+refine` then never ends above `kk` (free or equal counts, no groups,
  /// no capacity; once the whole pool has been tried the top only falls). Its price is one `kk`
  /// of the instance per call: ≈ 10 × `lpt` with free counts, up to milliseconds with equal
  /// counts (kk's re-splits). Default 512: the random equal-count instances of
  /// tests/balance/refine_escape_test.cpp where `X+refine` ended up to 6e-5 above `kk` hold 163
  /// and 459 items (bench/RESULTS.md "Session 26 — the whole instance as the last pool"). 0
  /// keeps every pool within `redifference_max_units`.
  std::uint32_t redifference_whole_units = 512;
  /// A pool whose `kk` split leaves a part at or above the top bin's load is given a second
  /// chance: that split refined as an instance of its own (moves, swaps, exchanges and
  /// re-splits among the pool's bins, under the same options and constraints, without a
  /// re-differencing of its own), then taken under the same rule. `kk`'s split is often a few
  /// local steps from one whose parts all end below the top. Default true: 75 → 48 of the
  /// 1,080 counted (instance, X) pairs above the best `Y+refine`, the worst excess 2.2 % →
  /// 0.37 %; where the re-differencing runs (pools of ≤ `redifference_max_units` items: small
  /// instances, never the 2,560 × 60 phases) `lpt+refine` takes up to 1.7 × its time, 4 × on
  /// one 64-item instance (0.1 → 0.4 ms; bench/RESULTS.md "Session 36 — refined pool splits").
  /// false: `kk`'s split alone, as before.
  bool refine_pool_splits = true;
  /// Pool re-split (padded costs, no groups, free or fixed counts), their escape when no move or
  /// swap improves: the top bin and the 1, 3, 7, ... lightest other bins (those tied with it
  /// last) split anew among themselves by `padded_binary_search`, taken under the
  /// re-differencing's rule. One budget for the whole run of `padded_pool_work` × items pooled.
  /// Default 32: with 16, 2 of the 1,200 seeded (instance, X) pairs of bench/RESULTS.md
  /// "Session 19" ended above the best shipped algorithm, with 32 none, in the same time.
  /// 0 disables it. Not inside `migrate`'s polish.
  std::uint32_t padded_pool_work = 32;
  /// The largest pool of the padded pool re-split, in items. Default 1,024: a start that mixes
  /// long and short items (`lpt` under a padded cost) is undone only by regrouping many bins at
  /// once, and `padded_binary_search` splits a pool in O(P log P) (a sort and a binary search
  /// over contiguous runs). With 128, `X+refine` under the padded cost ended above the best
  /// shipped algorithm on 305 of 1,200 seeded (instance, X) pairs; with 1,024 on 35, as with
  /// 4,096, before the pool took in the bins tied with the top (bench/RESULTS.md "Session 19").
  std::uint32_t padded_pool_max_units = 1024;
};

namespace detail {

/// The longest item and the sum of the lengths of an instance.
struct length_totals {
  length_t longest = 0;
  std::uint64_t sum = 0;
};

/// Shared state of one refine run: units, their bins, per-bin counts and the slot keys that
/// give the final slot order (existing items keep their slot, moved ones are appended in
/// the order they arrive).
struct refine_state {
  const units* u = nullptr;
  std::vector<rank_t> unit_bin;
  std::vector<std::uint64_t> counts;  // items per bin
  /// Per item: start slot (< n), or n + arrival sequence. Empty when the result comes from
  /// `build_compact`, which needs only the arrivals (the additive search with an order-free fold).
  std::vector<std::uint64_t> key;
  std::uint64_t next_key = 0;
  std::vector<item_id> arrivals;   // arrivals[j]: the item that received key n + j
  std::vector<rank_t> arrived_in;  // arrived_in[j]: the bin arrivals[j] went to
  /// Hint to `refine_additive`: this start's slots probably run by cost descending within every
  /// bin (an `lpt` start), so its units sorted by cost come from the slots reversed, checked,
  /// instead of a global sort. Only a speed hint: the check falls back to the sort. Units must
  /// be items, still in the start's bins.
  const assignment* start_by_cost = nullptr;
  /// The items' longest length and Σ lengths, when the caller folded them already.
  std::optional<length_totals> lengths;

  void move_unit(std::uint32_t k, rank_t to) { move_unit(k, unit_bin[k], to); }
  /// `move_unit` when the caller knows the unit's bin `from` (no read of `unit_bin`, a cache
  /// miss on large inputs).
  void move_unit(std::uint32_t k, rank_t from, rank_t to) {
    counts[from] -= u->size(k);
    counts[to] += u->size(k);
    unit_bin[k] = to;
    u->for_each(k, [&](item_id i) {
      if (!key.empty()) key[i] = next_key;
      ++next_key;
      arrivals.push_back(i);
      arrived_in.push_back(to);
    });
  }

  /// The assignment the arrivals describe, built from a valid `start` whose bin b holds
  /// `start_begin[b + 1] − start_begin[b]` items: an item that never moved keeps its bin and its
  /// slot minus the number of its bin's items below it that left (a table of the new slots by
  /// start position), then the items that moved follow in the order of their last arrivals.
  /// `visit(bin, item)` is called for every item, in item order for the stayers, then in
  /// arrival order — for folds whose result does not depend on the order. O(n + bins), no
  /// scatter by slot; reads no keys. The result is `start`'s storage rewritten in place (a
  /// caller that hands its start over saves a copy of n locations).
  template <class Visit>
  [[nodiscard]] assignment build_compact(assignment start, std::span<const std::uint32_t> start_begin,
                                         Visit&& visit) const {
    const std::size_t n = start.size();
    const rank_t bins = start.bins;
    const std::vector<std::uint8_t> last = last_arrivals(n);
    // Per start position (start_begin[bin] + slot): the stayer's new slot — its slot minus the
    // positions of its bin below it that emptied — or `left`; one sequential pass per bin, then
    // one lookup per item (no per-item count of the emptied positions).
    constexpr std::uint32_t left = std::numeric_limits<std::uint32_t>::max();
    std::vector<std::uint32_t> new_slot(n, 0);
    std::vector<std::uint32_t> gone_in(bins, 0);
    for (std::size_t j = 0; j < arrivals.size(); ++j) {
      if (last[j] == 0) continue;  // moved again later: counted once, at its last arrival
      const location l = start.where[arrivals[j]];
      new_slot[std::size_t{start_begin[l.rank]} + l.slot] = left;
      ++gone_in[l.rank];
    }
    for (rank_t b = 0; b < bins; ++b) {
      std::uint32_t next = 0;
      for (std::uint32_t p = start_begin[b]; p < start_begin[std::size_t{b} + 1]; ++p) {
        const bool stays = new_slot[p] != left;
        new_slot[p] = stays ? next : left;
        next += static_cast<std::uint32_t>(stays);
      }
    }
    // From here on `start` turns into the result: each location is read before it is rewritten.
    for (item_id i = 0; i < n; ++i) {
      location& l = start.where[i];
      l.slot = new_slot[std::size_t{start_begin[l.rank]} + l.slot];  // an arrival's is set below
      if (l.slot != left) visit(l.rank, i);
    }
    std::vector<std::uint32_t> next_slot(bins);
    for (rank_t b = 0; b < bins; ++b) next_slot[b] = start_begin[std::size_t{b} + 1] - start_begin[b] - gone_in[b];
    place_last_arrivals(start, last, next_slot, visit);
    return start;
  }

  /// Per arrival, whether it is its item's last (no later arrival moves the item again), for n
  /// items. O(n / 64 + arrivals).
  [[nodiscard]] std::vector<std::uint8_t> last_arrivals(std::size_t n) const {
    std::vector<std::uint8_t> last(arrivals.size(), 0);
    std::vector<std::uint64_t> seen(n / 64 + 1, 0);
    for (std::size_t j = arrivals.size(); j-- > 0;) {
      const item_id i = arrivals[j];
      const std::uint64_t bit = std::uint64_t{1} << (i & 63);
      last[j] = (seen[i >> 6] & bit) == 0;
      seen[i >> 6] |= bit;
    }
    return last;
  }

  /// Puts every moved item at its last arrival (`last`: `last_arrivals`), after the
  /// `next_slot[bin]` items already in the bin, in arrival order; `visit(bin, item)` for each.
  template <class Visit>
  void place_last_arrivals(assignment& a, std::span<const std::uint8_t> last, std::vector<std::uint32_t>& next_slot,
                           Visit&& visit) const {
    for (std::size_t j = 0; j < arrivals.size(); ++j) {
      if (last[j] == 0) continue;
      const item_id i = arrivals[j];
      const rank_t b = arrived_in[j];
      a.where[i] = location{b, next_slot[b]++};
      visit(b, i);
    }
  }

  /// Calls `visit(bin, item)` for every item, in slot order (the keys' order) within each bin,
  /// bins interleaved. No sort: the start's items of every bin in slot order (`start_by_slot`,
  /// `start_begin`, when given) or the items that never moved (key < n, a slot of their bin)
  /// bucketed by (bin, key), then the arrivals in key order — O(n + bins + Σ per-bin key
  /// spans); a key layout whose spans exceed 2n is sorted instead.
  template <class Visit>
  void visit_in_slot_order(rank_t bins, Visit&& visit, std::span<const item_id> start_by_slot = {},
                           std::span<const std::uint32_t> start_begin = {}) const {
    const std::size_t n = key.size();
    std::vector<rank_t> bin_of(n);
    for (std::uint32_t k = 0; k < u->count; ++k) u->for_each(k, [&](item_id i) { bin_of[i] = unit_bin[k]; });
    auto visit_arrivals = [&] {
      for (std::size_t j = 0; j < arrivals.size(); ++j) {
        const item_id i = arrivals[j];
        if (key[i] != n + j) continue;  // moved again later
        visit(bin_of[i], i);
      }
    };
    if (!start_by_slot.empty()) {  // the start's items of every bin in slot order: keep those that never moved
      for (rank_t b = 0; b < bins; ++b)
        for (std::uint32_t p = start_begin[b]; p < start_begin[std::size_t{b} + 1]; ++p)
          if (key[start_by_slot[p]] < n) visit(b, start_by_slot[p]);
      visit_arrivals();
      return;
    }
    std::vector<std::size_t> span(std::size_t{bins} + 1, 0);  // per bin: max stayer key + 1, then offsets
    for (item_id i = 0; i < n; ++i)
      if (key[i] < n)
        span[std::size_t{bin_of[i]} + 1] = std::max<std::size_t>(span[std::size_t{bin_of[i]} + 1], key[i] + 1);
    for (rank_t b = 0; b < bins; ++b) span[std::size_t{b} + 1] += span[b];
    constexpr item_id hole = std::numeric_limits<item_id>::max();
    if (span[bins] <= 2 * n + bins && next_key - arrivals.size() == n) {
      std::vector<item_id> at(span[bins], hole);
      for (item_id i = 0; i < n; ++i)
        if (key[i] < n) at[span[bin_of[i]] + key[i]] = i;
      for (rank_t b = 0; b < bins; ++b)
        for (std::size_t p = span[b]; p < span[std::size_t{b} + 1]; ++p)
          if (at[p] != hole) visit(b, at[p]);
      visit_arrivals();
      return;
    }
    std::vector<item_id> order(n);  // fallback: sort by (bin, key)
    for (item_id i = 0; i < n; ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](item_id x, item_id y) { return bin_of[x] != bin_of[y] ? bin_of[x] < bin_of[y] : key[x] < key[y]; });
    for (const item_id i : order) visit(bin_of[i], i);
  }

  /// The assignment the keys describe; `visit(bin, item)` is called for every item, in slot
  /// order within each bin (bins interleaved). See `visit_in_slot_order`.
  template <class Visit>
  [[nodiscard]] assignment build(rank_t bins, Visit&& visit, std::span<const item_id> start_by_slot = {},
                                 std::span<const std::uint32_t> start_begin = {}) const {
    assignment a{bins, std::vector<location>(key.size())};
    std::vector<std::uint32_t> next_slot(bins, 0);
    visit_in_slot_order(
        bins,
        [&](rank_t b, item_id i) {
          a.where[i] = location{b, next_slot[b]++};
          visit(b, i);
        },
        start_by_slot, start_begin);
    return a;
  }
  [[nodiscard]] assignment build(rank_t bins) const {
    return build(bins, [](rank_t, item_id) {});
  }
};

/// Costs whose batch state is `batch_stats` folded by `stats_cost_base::add` from
/// `stats_cost_base::empty` (every built-in cost): count, Σl and max l are integers, so their
/// fold does not depend on the order of the items; Σl² is a double, exact (so order-free too)
/// while every partial sum stays below 2^53 — see `stats_fold_exact`.
template <class C>
concept stats_folded = std::same_as<typename C::state, batch_stats> && requires {
  { &C::add } -> std::same_as<decltype(&mmbal::cost::stats_cost_base::add)>;
  { &C::empty } -> std::same_as<decltype(&mmbal::cost::stats_cost_base::empty)>;
};

/// True when `C`'s state of any batch of n items no longer than `longest` is the same whatever
/// order the items are folded in: a `stats_folded` cost with n · longest² < 2^53 (every Σl²
/// partial sum is then an exact integer). O(1).
template <class C>
[[nodiscard]] bool stats_fold_exact(length_t longest, std::size_t n) {
  if constexpr (stats_folded<C>) {
    const double dl = longest;
    return dl * dl * static_cast<double>(n) < 0x1p53;  // rounding is monotone
  } else {
    return false;
  }
}

/// The most loaded bin (ties: smallest index) of a (load, bin) set.
inline bin_key most_loaded(const std::set<bin_key>& by_load) {
  const double top = std::prev(by_load.end())->load;
  return *by_load.lower_bound(bin_key{top, 0});
}

/// Bins in (load, bin) order over a load array the caller keeps (the additive search's view
/// of them): the most loaded bin (ties: smallest index), and the bins in increasing (load, bin)
/// order, enumerated lazily. (load, bin) is a strict total order, so both representations below
/// give the same answers.
///
/// Integer loads in a narrow range (`tokens`: after `lpt` the loads differ by at most the
/// longest item; 625 distinct values on the 2,560-rank omni image phase) are keys
/// (load − least) · 2^bits + bin of a three-level bitmap (`mmbal::detail::bitmap_set`, at most
/// `max_bitmap_bits` bits): an update erases and inserts one key, the top is the greatest key's
/// load with the least bin of that load, and an enumeration walks the keys upwards. A load
/// that leaves the range (a pool re-split can end a bin below the least load) rebuilds the
/// bitmap over twice the range, or falls back to the heaps when that is too wide; so does a
/// load that is not an integer (bench/RESULTS.md "Session 37 — the load order as a bitmap").
///
/// Otherwise two `mmbal::detail::indexed_heap`s over the same loads — a max-heap for the top,
/// a min-heap whose k least bins come out in order in O(k log k) — so a step costs O(log d) per
/// changed bin and no node allocation, where a `std::set` of (load, bin) erased and inserted
/// two tree nodes. Long enumerations come from a cached prefix of the order — the p least bins,
/// kept sorted across steps (a step changes two bins: O(p) to move them), formed when an
/// enumeration goes past 32 bins and refilled from the min-heap's walk at twice the length when
/// one runs past its end — or, once that length reaches an eighth of the bins, by sorting them
/// all. The search enumerates the same light bins step after step (on a 2,560-rank image phase,
/// hundreds per step near the end), and the heap's walk cost a quarter of `refine`'s time there
/// (bench/RESULTS.md "Session 22 — skipping partners by cost class"); its last step enumerates
/// nearly every bin, at ≈ 60 ns per bin from the walk ("Session 25 — fewer passes and less
/// fresh memory").
class load_order {
 public:
  static constexpr rank_t none = mmbal::detail::indexed_heap<false>::none;
  /// The widest bitmap (2 MiB); wider ranges use the heaps.
  static constexpr std::uint64_t max_bitmap_bits = std::uint64_t{1} << 24;

  explicit load_order(const std::vector<double>& load)
      : load_(load.data()), min_(std::span<const double>{}), max_(std::span<const double>{}) {
    if (!use_bitmap(load, 0)) use_heaps(load);
  }
  /// Whether the bitmap serves the order (else the heaps); for the tests.
  [[nodiscard]] bool on_bitmap() const noexcept { return bitmap_; }
  /// The most loaded bin, ties: the smallest index.
  [[nodiscard]] rank_t top() const noexcept {
    if (!bitmap_) return max_.top();
    const std::uint64_t greatest = keys_.max();
    return bin_of(keys_.successor(greatest >> bits_ << bits_));
  }
  /// Restores the order after `load[b]` changed (either direction). Several loads may change
  /// before their bins are updated one by one.
  void update(rank_t b) {
    if (bitmap_) {
      const double now = load_[b];
      if (now >= lo_ && now <= hi_ && now == std::floor(now)) {
        keys_.erase(key(stored_[b], b));
        keys_.insert(key(now, b));
        stored_[b] = now;
        return;
      }
      // The other bins keep the loads of their last update.
      std::vector<double> loads = stored_;
      loads[b] = now;
      if (use_bitmap(std::move(loads), hi_ - lo_ + 1)) return;
      use_heaps(stored_);  // b's load as of its last update; the heaps' update below moves it
    }
    const bin_key was{min_.key(b), b}, now{load_[b], b};  // the order's key: the load as of the last update
    synced_ = false;
    min_.update(b, now.load);
    max_.update(b, now.load);
    // The prefix stays the least bins: b leaves it, and comes back where it now ranks below
    // the prefix's last bin (or anywhere once the prefix holds every bin).
    if (cached_[b] != 0) {
      prefix_.erase(std::lower_bound(prefix_.begin(), prefix_.end(), was));
      cached_[b] = 0;
    }
    if (whole_ || (!prefix_.empty() && now < prefix_.back())) {
      prefix_.insert(std::lower_bound(prefix_.begin(), prefix_.end(), now), now);
      cached_[b] = 1;
    }
  }
  /// Starts an enumeration of the bins in increasing (load, bin) order.
  void restart() {
    if (!bitmap_) {
      // A prefix that only short enumerations used for a while is dropped: keeping it sorted
      // costs every step O(p).
      short_walks_ = at_ <= uncached_walk ? short_walks_ + 1 : 0;
      if (short_walks_ > uncached_walk && !prefix_.empty()) {
        for (const bin_key& k : prefix_) cached_[k.bin] = 0;
        prefix_.clear();
        whole_ = false;
      }
    }
    at_ = 0;
  }
  /// The next bin of the enumeration, or `none` after the last. The loads must not change
  /// during an enumeration.
  [[nodiscard]] rank_t next() {
    if (bitmap_) {  // `at_`: the least key not yet returned
      const std::uint64_t k = keys_.successor(at_);
      if (k == mmbal::detail::bitmap_set::none) return none;
      at_ = k + 1;
      return bin_of(k);
    }
    if (at_ < prefix_.size()) return prefix_[at_++].bin;
    if (prefix_.empty() && at_ < uncached_walk) {  // short walks: no prefix to keep
      if (at_++ == 0) {
        min_.restart();
        synced_ = false;
      }
      return min_.next();
    }
    extend();
    return at_ < prefix_.size() ? prefix_[at_++].bin : none;
  }

 private:
  /// Enumerations come straight from the min-heap's walk until one goes past this many bins
  /// with no prefix (most steps try one or two partners: keeping a prefix would cost more).
  static constexpr std::size_t uncached_walk = 32;

  [[nodiscard]] std::uint64_t key(double load, rank_t b) const noexcept {
    return (static_cast<std::uint64_t>(load - lo_) << bits_) | b;
  }
  [[nodiscard]] rank_t bin_of(std::uint64_t k) const noexcept {
    return static_cast<rank_t>(k & ((std::uint64_t{1} << bits_) - 1));
  }
  /// Switches to (or rebuilds) the bitmap over `load` when every load is an integer in [0, 2^53)
  /// and the range, with `slack` more values below it, fits `max_bitmap_bits`; false otherwise.
  bool use_bitmap(std::vector<double> load, double slack) {
    const auto d = static_cast<rank_t>(load.size());
    if (d == 0) return false;
    double lo = load[0], hi = load[0];
    for (const double l : load) {
      if (!(l >= 0 && l < 0x1p53 && l == std::floor(l))) return false;
      lo = std::min(lo, l);
      hi = std::max(hi, l);
    }
    lo = std::max(0.0, lo - slack);
    const unsigned bits = static_cast<unsigned>(std::bit_width(d - 1));
    const double values = hi - lo + 1;
    if (values > static_cast<double>(max_bitmap_bits >> bits)) return false;
    bits_ = bits;
    lo_ = lo;
    hi_ = hi;
    keys_ = mmbal::detail::bitmap_set(static_cast<std::uint64_t>(values) << bits);
    for (rank_t b = 0; b < d; ++b) keys_.insert(key(load[b], b));
    stored_ = std::move(load);
    bitmap_ = true;
    at_ = 0;
    return true;
  }
  /// Switches to the heaps over `load`.
  void use_heaps(std::span<const double> load) {
    min_ = mmbal::detail::indexed_heap<false>(load);
    max_ = mmbal::detail::indexed_heap<true>(load);
    cached_.assign(load.size(), 0);
    prefix_.clear();
    at_ = short_walks_ = 0;
    whole_ = synced_ = bitmap_ = false;
    keys_ = {};
    stored_ = {};
  }

  /// Refills the prefix with the 2 · max(p, position) (at least 64) least bins from the
  /// min-heap's walk — going on with the walk that filled it when no bin changed since — or,
  /// from an eighth of the bins on, with every bin, sorted (O(d log d), where the walk's
  /// frontier heap costs O(log k) per bin with a large constant).
  void extend() {
    if (whole_) return;
    const std::size_t want = std::max<std::size_t>(2 * uncached_walk, 2 * std::max(prefix_.size(), at_));
    if (want >= cached_.size() / 8) {
      prefix_.resize(cached_.size());
      for (rank_t b = 0; b < cached_.size(); ++b) prefix_[b] = bin_key{min_.key(b), b};
      std::sort(prefix_.begin(), prefix_.end());
      std::fill(cached_.begin(), cached_.end(), std::uint8_t{1});
      synced_ = false;
      whole_ = true;
      return;
    }
    if (!synced_) {
      for (const bin_key& k : prefix_) cached_[k.bin] = 0;
      prefix_.clear();
      min_.restart();
    }
    for (rank_t b = 0; prefix_.size() < want && (b = min_.next()) != none;) {
      prefix_.push_back(bin_key{min_.key(b), b});
      cached_[b] = 1;
    }
    synced_ = true;
    whole_ = prefix_.size() == cached_.size();
  }

  const double* load_;
  // The bitmap (`bitmap_`): one key per bin, of the load as of its last update (`stored_`).
  bool bitmap_ = false;
  unsigned bits_ = 0;
  double lo_ = 0, hi_ = 0;  // the loads the bitmap can hold
  mmbal::detail::bitmap_set keys_;
  std::vector<double> stored_;
  // The heaps.
  mmbal::detail::indexed_heap<false> min_;
  mmbal::detail::indexed_heap<true> max_;
  std::vector<std::uint8_t> cached_;  // per bin: in the prefix
  std::vector<bin_key> prefix_;       // the least bins in (load, bin) order
  std::size_t at_ = 0;                // the enumeration's position (bitmap: the least key not yet returned)
  bool whole_ = false;                // the prefix holds every bin
  bool synced_ = false;               // the min-heap's walk has returned exactly the prefix
  std::size_t short_walks_ = 0;       // enumerations in a row that stayed within uncached_walk
};

/// Parts of a pool split to the pool's bins. The pool lists its units bin by bin in the order
/// of `pool_bins`; `bin_of(x)` is the bin of the pool's unit x and `split` puts it in part
/// `split.where[x].rank`. Largest overlaps (units already in the bin) first, ties by (part,
/// position), so the split moves few units. Shared by the pool re-splits of both paths.
template <class BinOf>
std::vector<rank_t> parts_to_bins(const assignment& split, BinOf bin_of, std::span<const rank_t> pool_bins) {
  const std::size_t ways = pool_bins.size();
  std::vector<std::uint32_t> overlap(ways * ways, 0);  // [part · ways + pool bin position]
  for (std::size_t x = 0, at = 0; x < split.where.size(); ++x) {
    while (bin_of(x) != pool_bins[at]) ++at;
    ++overlap[split.where[x].rank * ways + at];
  }
  std::vector<std::uint32_t> pairs(ways * ways);
  std::iota(pairs.begin(), pairs.end(), 0u);
  std::stable_sort(pairs.begin(), pairs.end(),
                   [&](std::uint32_t x, std::uint32_t y) { return overlap[x] > overlap[y]; });
  std::vector<rank_t> bin_of_part(ways, std::numeric_limits<rank_t>::max());
  std::vector<bool> taken(ways, false);
  for (const std::uint32_t pr : pairs) {
    const std::size_t p = pr / ways, at = pr % ways;
    if (bin_of_part[p] != std::numeric_limits<rank_t>::max() || taken[at]) continue;
    bin_of_part[p] = pool_bins[at];
    taken[at] = true;
  }
  return bin_of_part;
}

/// A candidate step: unit `out` leaves the top bin for `partner`; with a swap, unit `in`
/// comes back. `quality` = the larger of the two new loads (lower is better).
struct refine_step {
  bool found = false;
  double quality = 0;
  double new_top = 0, new_partner = 0;
  rank_t partner = 0;
  std::uint32_t out = 0;
  std::uint32_t in = std::numeric_limits<std::uint32_t>::max();  // max = plain move
  [[nodiscard]] bool swap() const noexcept { return in != std::numeric_limits<std::uint32_t>::max(); }
};

/// A candidate exchange of the additive path: up to two units leave the top bin for
/// `partner` and up to two come back (`none` = unused). `quality` = the larger new load.
struct refine_exchange {
  static constexpr std::uint32_t none = std::numeric_limits<std::uint32_t>::max();
  bool found = false;
  double quality = 0;
  double new_top = 0, new_partner = 0;
  rank_t partner = 0;
  std::uint32_t out[2] = {none, none};
  std::uint32_t in[2] = {none, none};
  double out_cost[2] = {0, 0};  // the units' costs (their pool entries), so applying reads no cost array
  double in_cost[2] = {0, 0};
};

/// A unit in a bin's segment of the additive search: its cost and index, ordered by cost,
/// then unit. Holds any cost in 16 bytes.
struct wide_entry {
  double c = 0;
  std::uint32_t k = 0;
  wide_entry() = default;
  constexpr wide_entry(double cost, std::uint32_t unit) noexcept : c(cost), k(unit) {}
  [[nodiscard]] constexpr double cost() const noexcept { return c; }
  [[nodiscard]] constexpr std::uint32_t unit() const noexcept { return k; }
  /// The least entry of cost ≥ `cost`.
  [[nodiscard]] static constexpr wide_entry at_least(double cost) noexcept { return {cost, 0}; }
  friend constexpr bool operator<(const wide_entry& x, const wide_entry& y) noexcept {
    return x.c < y.c || (!(y.c < x.c) && x.k < y.k);
  }
};

/// `wide_entry` for integral costs in [0, 2^32) in one word, cost << 32 | unit (the same order
/// in half the memory): `tokens` without groups, whose unit costs are the items' lengths. The
/// segments' fill and moves are memory-bound on large phases (bench/RESULTS.md "Session 23 —
/// refine on half the memory").
struct packed_entry {
  std::uint64_t key = 0;
  packed_entry() = default;
  packed_entry(double cost, std::uint32_t unit) noexcept : key((static_cast<std::uint64_t>(cost) << 32) | unit) {}
  /// The entry of an integral cost (a unit's length).
  [[nodiscard]] static packed_entry of(std::uint32_t cost, std::uint32_t unit) noexcept {
    packed_entry e;
    e.key = (std::uint64_t{cost} << 32) | unit;
    return e;
  }
  // Through 32 bits: one conversion instruction, where a 64-bit unsigned one branches.
  [[nodiscard]] double cost() const noexcept { return static_cast<double>(static_cast<std::uint32_t>(key >> 32)); }
  [[nodiscard]] std::uint32_t unit() const noexcept { return static_cast<std::uint32_t>(key); }
  /// The cost as the integer it is.
  [[nodiscard]] std::uint32_t length() const noexcept { return static_cast<std::uint32_t>(key >> 32); }
  /// The least entry of cost ≥ `cost` (any double: at most 0 gives the first entry, 2^32 or
  /// more one above every entry, as units are below 2^32 − 1).
  [[nodiscard]] static packed_entry at_least(double cost) noexcept {
    packed_entry e;
    if (!(cost > 0)) return e;
    if (!(cost < 0x1p32)) {
      e.key = ~std::uint64_t{0};
      return e;
    }
    auto least = static_cast<std::uint64_t>(cost);  // ⌈cost⌉ without a libm call (a hot path)
    least += static_cast<std::uint64_t>(static_cast<double>(least) < cost);
    e.key = least < (std::uint64_t{1} << 32) ? least << 32 : ~std::uint64_t{0};
    return e;
  }
  friend bool operator<(const packed_entry& x, const packed_entry& y) noexcept { return x.key < y.key; }
};

/// Bins' units as one flat array of (cost, unit) entries (`wide_entry` or `packed_entry`), each
/// bin a segment sorted by (cost, unit) with spare room; a segment that outgrows its room moves
/// to the end of the pool with twice the room (amortised O(1) per arrival, no per-bin
/// allocations). When `classes` is set, it follows which costs every bin holds.
template <class Entry>
struct sorted_segments {
  using entry = Entry;
  std::vector<entry> pool;
  std::vector<std::uint32_t> begin, size, room;
  cost_classes* classes = nullptr;

  /// Lays out one segment per bin of `size[b]` units (set by the caller, who fills them), each
  /// with room for 4 arrivals before it moves.
  void lay_out() {
    begin.resize(size.size());
    room.resize(size.size());
    std::uint32_t at = 0;
    for (std::size_t b = 0; b < size.size(); ++b) {
      begin[b] = at;
      room[b] = size[b] + 4;
      at += room[b];
    }
    pool.resize(at);
  }
  [[nodiscard]] std::span<const entry> of(rank_t b) const { return {pool.data() + begin[b], size[b]}; }
  void erase(rank_t b, entry e) {
    entry* first = pool.data() + begin[b];
    entry* last = first + size[b];
    entry* at = std::lower_bound(first, last, e);
    if (classes != nullptr && (at == first || at[-1].cost() != e.cost()) &&
        (at + 1 == last || at[1].cost() != e.cost()))
      classes->remove(b, e.cost());  // the bin's last unit of this cost
    std::move(at + 1, last, at);
    --size[b];
  }
  void insert(rank_t b, entry e) {
    if (size[b] == room[b]) {
      const auto fresh = static_cast<std::uint32_t>(pool.size());
      room[b] = std::max<std::uint32_t>(4, 2 * room[b]);
      pool.resize(pool.size() + room[b]);
      std::copy_n(pool.begin() + begin[b], size[b], pool.begin() + fresh);
      begin[b] = fresh;
    }
    entry* first = pool.data() + begin[b];
    entry* last = first + size[b];
    entry* at = std::upper_bound(first, last, e);
    std::move_backward(at, last, last + 1);
    *at = e;
    ++size[b];
    if (classes != nullptr) classes->add(b, e.cost());
  }
};

/// The cost-class filter of the additive search (`cost_classes`, `class_filter`) runs from 64
/// bins on, where a step has partners to skip: below, building the classes cost more than it
/// saved (8 and 32 bins: about 1 µs more on 64 items; bench/RESULTS.md "Session 22").
inline constexpr rank_t class_filter_min_bins = 64;

/// Bins as the additive search starts from them, built by a caller (`lpt_refined`): every bin's
/// units in (cost, unit) order and its load, and, when the caller built them, the cost classes
/// every bin holds (off when the costs are no classes; empty: the search builds them if needed).
template <class Entry>
struct filled_bins {
  sorted_segments<Entry> seg;
  std::vector<double> load;
  std::optional<cost_classes> classes;
};

/// One or two units of a bin as the escape exchanges them: Σ cost, Σ items, the units (`b`
/// = `refine_exchange::none` for one, both for the empty set). Ordered by cost, then units.
struct unit_set {
  double cost;
  std::uint32_t items;
  std::uint32_t a, b;
  friend bool operator<(const unit_set& x, const unit_set& y) noexcept {
    return x.cost != y.cost ? x.cost < y.cost : (x.a != y.a ? x.a < y.a : x.b < y.b);
  }
};

/// Order key of a double: unsigned and monotone in the value (IEEE bits, negatives flipped).
[[nodiscard]] inline std::uint64_t double_order_key(double x) noexcept {
  if (x == 0) x = 0;  // -0 sorts as +0
  const auto bits = std::bit_cast<std::uint64_t>(x);
  return (bits >> 63) != 0 ? ~bits : bits | (std::uint64_t{1} << 63);
}

// `refine` itself (defined below): the re-differencing refines a pool's split as an instance.
template <batch_cost C>
[[nodiscard]] assignment refine_from(std::span<const length_t> weights, const assignment& start,
                                     assignment* handed_over, const C& cost, const constraints& limits,
                                     const refine_options& opts, bool check_slots = true);

/// Additive fast path: a bin is its load (Σ unit costs) and its units sorted by (cost, unit)
/// in one flat pool (from the start's slots when they run by cost descending, as `lpt`'s do,
/// else one global radix order of the unit costs; no per-bin sort); the bins' (load, bin)
/// order is kept in two indexed heaps (`load_order`); the best partner unit is found by
/// binary search. When no move or swap improves, the
/// escape (`refine_options::escape_work`) tries exchanges of up to two units each way.
template <class Entry, batch_cost C>
void refine_additive_with(refine_state& st, std::span<const length_t> weights, const C& cost, const constraints& limits,
                          const count_bounds& cb, rank_t bins, const refine_options& opts,
                          const std::vector<bool>* movable, double stop_at, filled_bins<Entry>* given = nullptr) {
  const units& u = *st.u;
  using entry = Entry;
  static_assert(!std::same_as<entry, packed_entry> || std::same_as<C, mmbal::cost::tokens>,
                "packed entries hold integral costs: tokens without groups only");
  // One pass: unit costs, and what the search and the order below need of them (the same
  // values, in the same unit order, as separate passes would give). With packed entries (`tokens`
  // without groups) a unit's cost is its item's length: no array of them.
  constexpr bool costs_are_lengths = std::same_as<entry, packed_entry>;
  std::vector<double> unit_cost(costs_are_lengths ? 0 : u.count);
  auto cost_of_unit = [&](std::uint32_t k) {
    if constexpr (costs_are_lengths)
      return static_cast<double>(weights[k]);
    else
      return unit_cost[k];
  };
  // Integral costs (tokens): every exchanged amount is a whole number, so a partner within 1
  // of the top admits nothing, and the top cannot go below ⌈Σ / d⌉.
  bool integral = true, non_negative = true;
  double total = 0, max_cost = 0;
  bool summed = false;
  if constexpr (std::same_as<C, mmbal::cost::tokens>) {
    if (u.trivial) {
      // A unit's cost is its length: integral and ≥ 0; the double partial sums are exact below
      // 2^53, so when the integer Σ is below 2^52 it is the same total (a plain loop the compiler
      // vectorises; otherwise the general pass below).
      length_totals t;
      if (costs_are_lengths && st.lengths) {
        t = *st.lengths;
      } else {
        for (std::uint32_t k = 0; k < u.count; ++k) {
          if constexpr (!costs_are_lengths) unit_cost[k] = static_cast<double>(weights[k]);
          t.sum += weights[k];
          t.longest = std::max(t.longest, weights[k]);
        }
      }
      summed = t.sum < (std::uint64_t{1} << 52);
      if (summed) {
        total = static_cast<double>(t.sum);
        max_cost = t.longest;
      }
    }
  }
  for (std::uint32_t k = 0; k < u.count && !summed; ++k) {
    double c = 0.0;
    if (u.trivial)
      c += cost.item(weights[k]);
    else
      u.for_each(k, [&](item_id i) { c += cost.item(weights[i]); });
    if constexpr (!costs_are_lengths) unit_cost[k] = c;
    // c == ⌊c⌋ for |c| < 2^52, without a libm call (the conversion is exact there).
    integral = integral && std::abs(c) < 0x1p52 && c == static_cast<double>(static_cast<std::int64_t>(c));
    non_negative = non_negative && c >= 0;
    total += c;
    max_cost = std::max(max_cost, c);
  }
  integral = integral && std::abs(total) < 0x1p52;
  const double quantum = integral ? 1.0 : 0.0;
  // No placement's maximum is below the mean (⌈mean⌉ for integral costs) or, with costs ≥ 0,
  // below the costliest unit: a top bin at that floor cannot improve.
  const double mean_floor = integral ? std::ceil(total / bins) : total / bins;
  const double floor_of_max = non_negative ? std::max(mean_floor, max_cost) : mean_floor;

  sorted_segments<entry> seg;
  std::vector<double> load;
  if (given != nullptr) {
    seg = std::move(given->seg);
    load = std::move(given->load);
  } else {
    load.assign(bins, 0.0);
    seg.size.assign(bins, 0);
    if (u.trivial)
      for (rank_t b = 0; b < bins; ++b) seg.size[b] = static_cast<std::uint32_t>(st.counts[b]);  // unit = item
    else
      for (std::uint32_t k = 0; k < u.count; ++k) ++seg.size[st.unit_bin[k]];
    seg.lay_out();
  }
  // Every bin's units sorted by (cost, unit) — a unique order, however it is reached — with the
  // loads folded in that order. From the start's slots when they (nearly) give it: an `lpt`
  // start places each bin's items by weight descending, ties by ascending id, so the slots
  // reversed, with each run of equal costs turned around, are the order; a bin that is not
  // sorted then is sorted alone. O(n) for such a start; when the slots are no such order
  // (more than n/16 units in unsorted bins), the global radix order below.
  auto entry_of = [&](std::uint32_t k) {
    if constexpr (std::same_as<entry, packed_entry>)
      return packed_entry::of(weights[k], k);  // `tokens` without groups: the unit's cost is its item's length
    else
      return entry{unit_cost[k], k};
  };
  bool filled = given != nullptr;
  if (!filled && u.trivial && st.start_by_cost != nullptr) {
    filled = true;
    for (std::uint32_t k = 0; k < u.count && filled; ++k) {
      const auto [b, slot] = st.start_by_cost->where[k];
      filled = slot < seg.size[b];  // the start's slots: 0 .. count − 1 of the bin
      if (filled) seg.pool[seg.begin[b] + seg.size[b] - 1 - slot] = entry_of(k);
    }
    std::uint64_t unsorted = 0;
    for (rank_t b = 0; b < bins && filled; ++b) {
      entry* const first = seg.pool.data() + seg.begin[b];
      const std::uint32_t s = seg.size[b];
      bool sorted = true;
      for (std::uint32_t i = 1; i < s; ++i) {
        if (first[i].cost() == first[i - 1].cost()) {  // a run of equal costs, ids descending
          std::uint32_t j = i + 1;
          while (j < s && first[j].cost() == first[i - 1].cost()) ++j;
          std::reverse(first + (i - 1), first + j);
          i = j - 1;
        }
      }
      double l = 0;  // folded in the (cost, unit) order, as the sorted fill below folds it
      for (std::uint32_t i = 0; i < s; ++i) {
        sorted = sorted && (i == 0 || first[i - 1] < first[i]);  // strict: no duplicate survives
        l += first[i].cost();
      }
      if (!sorted) {
        unsorted += s;
        if (unsorted > u.count / 16) {
          filled = false;
          break;
        }
        std::sort(first, first + s);
        l = 0;
        for (std::uint32_t i = 0; i < s; ++i) {
          if (i > 0 && !(first[i - 1] < first[i])) filled = false;  // a duplicate: slots not 0 .. count − 1
          l += first[i].cost();
        }
      }
      load[b] = l;
    }
  }
  if (!filled) {
    // One global order by (cost, unit); integral costs sort as packed (cost << 32 | unit) words.
    std::vector<std::uint32_t> order;
    std::vector<std::uint64_t> words;  // sorted (cost << 32 | unit) when the costs pack
    if (integral && max_cost < 0x1p32 && floor_of_max >= 0 && non_negative) {
      std::vector<std::uint64_t> spare;
      words.resize(u.count);
      for (std::uint32_t k = 0; k < u.count; ++k) words[k] = (static_cast<std::uint64_t>(cost_of_unit(k)) << 32) | k;
      mmbal::detail::sort_packed(words, spare, static_cast<std::uint64_t>(max_cost));
    } else {
      std::vector<std::uint64_t> order_key(u.count);
      for (std::uint32_t k = 0; k < u.count; ++k) order_key[k] = double_order_key(cost_of_unit(k));
      order = mmbal::detail::order_by_key(order_key);  // ties: ascending unit
    }
    std::fill(seg.size.begin(), seg.size.end(), 0u);
    std::fill(load.begin(), load.end(), 0.0);
    auto place = [&](std::uint32_t k) {  // loads fold in each bin's (cost, unit) order
      const rank_t b = st.unit_bin[k];
      seg.pool[seg.begin[b] + seg.size[b]++] = entry_of(k);
      load[b] += cost_of_unit(k);
    };
    if (!words.empty())
      for (const std::uint64_t w : words) place(static_cast<std::uint32_t>(w & 0xffffffffu));
    else
      for (const std::uint32_t k : order) place(k);
  }
  load_order by_load(load);
  constexpr rank_t no_bin = load_order::none;

  const bool has_cap = limits.capacity.has_value();
  const double cap = has_cap ? *limits.capacity : 0.0;
  const std::uint64_t max_steps = std::uint64_t{opts.max_passes} * u.count;
  constexpr std::uint32_t none = refine_exchange::none;
  std::uint64_t extended_left = std::uint64_t{opts.extended_work} * u.count;
  std::uint64_t escape_left = std::uint64_t{opts.escape_work} * u.count;
  auto fixed = [&](std::uint32_t k) { return movable != nullptr && !(*movable)[k]; };

  // Few distinct integral costs (`cost_classes`): the classes every bin holds, built the first
  // time a step goes past its lightest partner (most steps of most instances never do) unless
  // the caller built them with the bins, then kept by `seg`; per such step a `class_filter` of
  // the top bin skips the partners it rejects.
  cost_classes classes;
  bool classes_pending = bins >= class_filter_min_bins;
  if (given != nullptr && given->classes.has_value()) {
    classes = std::move(*given->classes);
    classes_pending = false;
    if (classes.on()) seg.classes = &classes;
  }
  class_filter filter;
  auto build_classes = [&] {
    classes_pending = false;
    if constexpr (costs_are_lengths) {
      classes = cost_classes(weights, static_cast<length_t>(max_cost), bins);  // max_cost: the longest item
      if (!classes.on()) return;
      for (rank_t b = 0; b < bins; ++b) classes.hold(b, seg.of(b), [](const entry& e) { return e.length(); });
    } else {
      classes = cost_classes(unit_cost, bins, integral && non_negative);
      if (!classes.on()) return;
      for (rank_t b = 0; b < bins; ++b) classes.hold(b, seg.of(b), [](const entry& e) { return e.cost(); });
    }
    seg.classes = &classes;
  };

  // Escape scratch: the top bin's sets of one or two units, a partner's sets of zero to two.
  std::vector<unit_set> out_sets, in_sets;
  auto make_sets = [&](std::span<const entry> c, bool with_empty, std::vector<unit_set>& sets) {
    sets.clear();
    if (with_empty) sets.push_back(unit_set{0.0, 0, none, none});
    for (std::size_t x = 0; x < c.size(); ++x) {
      const std::uint32_t kx = c[x].unit();
      if (fixed(kx)) continue;
      sets.push_back(unit_set{c[x].cost(), u.size(kx), kx, none});
      for (std::size_t y = x + 1; y < c.size(); ++y)
        if (!fixed(c[y].unit()))
          sets.push_back(unit_set{c[x].cost() + c[y].cost(), u.size(kx) + u.size(c[y].unit()), kx, c[y].unit()});
    }
    std::sort(sets.begin(), sets.end());
  };

  // Pair (and triple) re-split: pool the top bin with its lightest partners and search the
  // best split of the pool under the constraints. Taken when every new load ends strictly below
  // the top's, so the pair (maximum, bins at the maximum) still strictly drops.
  std::uint64_t resplit_left = std::uint64_t{opts.resplit_work} * u.count;
  const std::uint64_t resplit_nodes = opts.resplit_nodes;
  std::vector<rank_t> resplit_partners;
  std::vector<entry> pool;             // (cost, unit) in gathering order: the bins in turn, each by (cost, unit)
  std::vector<std::uint32_t> by_cost;  // pool positions by cost descending, then unit
  std::vector<double> pool_cost;
  std::vector<std::uint32_t> pool_size;
  // Moves the pooled units to their new bins (`destination(x)` for pool position x), in
  // gathering order: the order of the arrivals. Shared by the re-split and the re-differencing.
  auto move_pool = [&](auto&& destination) {
    for (std::size_t x = 0; x < pool.size(); ++x) {
      const std::uint32_t k = pool[x].unit();
      const rank_t from = st.unit_bin[k], to = destination(x);
      if (to == from) continue;
      seg.erase(from, pool[x]);
      seg.insert(to, pool[x]);
      st.move_unit(k, from, to);
    }
  };
  auto resplit_group = [&](const std::array<rank_t, 3>& group, std::size_t ways, double lh) {
    pool.clear();
    for (std::size_t g = 0; g < ways; ++g) {
      const std::span<const entry> c = seg.of(group[g]);
      if (pool.size() + c.size() > opts.resplit_max_units) return false;
      pool.insert(pool.end(), c.begin(), c.end());
    }
    by_cost.resize(pool.size());
    std::iota(by_cost.begin(), by_cost.end(), 0u);
    std::sort(by_cost.begin(), by_cost.end(), [&](std::uint32_t x, std::uint32_t y) {
      return pool[x].cost() != pool[y].cost() ? pool[x].cost() > pool[y].cost() : pool[x].unit() < pool[y].unit();
    });
    pool_cost.clear();
    pool_size.clear();
    for (const std::uint32_t x : by_cost) {
      if (!(pool[x].cost() >= 0)) return false;  // the search's cuts assume loads only grow
      pool_cost.push_back(pool[x].cost());
      pool_size.push_back(u.size(pool[x].unit()));
    }
    const resplit_result r =
        resplit_search(pool_cost, pool_size, ways, cb.lo, cb.hi, lh, std::min(resplit_nodes, resplit_left));
    resplit_left -= r.nodes;
    if (!r.found) return false;
    if (has_cap)
      for (const double l : r.load)
        if (l > cap) return false;
    // Parts to bins: the assignment that moves the fewest items (ties: the first permutation).
    std::array<std::uint8_t, 3> perm{0, 1, 2}, best_perm = perm;
    std::uint64_t fewest = std::numeric_limits<std::uint64_t>::max();
    do {
      std::uint64_t moved = 0;
      for (std::size_t j = 0; j < by_cost.size(); ++j)
        if (group[perm[r.part[j]]] != st.unit_bin[pool[by_cost[j]].unit()]) moved += pool_size[j];
      if (moved < fewest) {
        fewest = moved;
        best_perm = perm;
      }
    } while (std::next_permutation(perm.begin(), perm.begin() + static_cast<std::ptrdiff_t>(ways)));
    std::vector<rank_t> dest(pool.size());
    for (std::size_t j = 0; j < by_cost.size(); ++j) dest[by_cost[j]] = group[best_perm[r.part[j]]];
    move_pool([&](std::size_t x) { return dest[x]; });
    for (std::size_t p = 0; p < ways; ++p) load[group[best_perm[p]]] = r.load[p];
    for (std::size_t g = 0; g < ways; ++g) by_load.update(group[g]);
    return true;
  };
  // Pool re-differencing: the top bin and the m − 1 lightest other bins (m = 4, 8, 16, ...) split
  // anew by `kk` as a balancer of those bins alone; taken under the same rule as the re-split.
  // Units must be items (no groups) and the counts free or equal (`kk` takes no fixed cap).
  std::uint64_t redifference_left =
      u.trivial && limits.counts.kind != count_cap::mode::fixed ? std::uint64_t{opts.redifference_work} * u.count : 0;
  constraints pool_limits;
  pool_limits.counts.kind = limits.counts.kind;
  std::vector<rank_t> pool_bins;
  std::vector<length_t> pool_weights;
  std::vector<std::uint32_t> by_item;  // pool positions in item order
  std::vector<double> part_load;
  bool whole_pool_tried = false;
  auto redifference = [&](rank_t h, double lh) {
    pool_bins.assign(1, h);
    by_load.restart();
    // Bins in increasing load: the lighter ones first, those tied with the top last (a pool that
    // takes them in can lower the maximum where several bins share it; each must end below it).
    bool bins_left = true;
    auto take_bins = [&](std::size_t m) {
      while (bins_left && pool_bins.size() < m) {
        const rank_t t = by_load.next();
        bins_left = t != no_bin;
        if (bins_left && t != h) pool_bins.push_back(t);
      }
      pool.clear();
      for (const rank_t b : pool_bins) {
        const std::span<const entry> c = seg.of(b);
        pool.insert(pool.end(), c.begin(), c.end());
      }
    };
    for (std::size_t m = 4;; m *= 2) {
      take_bins(m);
      if (pool_bins.size() < 3) return false;  // two bins: the pair re-split's case
      if (pool.size() > opts.redifference_max_units) {
        if (whole_pool_tried || weights.size() > opts.redifference_whole_units) return false;
        take_bins(std::numeric_limits<std::size_t>::max());  // the last pool: every bin
      }
      if (pool.size() > redifference_left) return false;
      redifference_left -= pool.size();
      whole_pool_tried = whole_pool_tried || !bins_left;
      // `kk` sees the pooled items in item order: on a pool of every bin it returns exactly its
      // partition of the instance (its ties are broken by position).
      by_item.resize(pool.size());
      std::iota(by_item.begin(), by_item.end(), 0u);
      std::sort(by_item.begin(), by_item.end(),
                [&](std::uint32_t x, std::uint32_t y) { return pool[x].unit() < pool[y].unit(); });
      pool_weights.clear();
      for (const std::uint32_t x : by_item) pool_weights.push_back(weights[pool[x].unit()]);  // a unit is its item
      const std::size_t ways = pool_bins.size();
      auto take_split = [&](const assignment& by_item_split) {
        assignment split;  // the same split with the pool's positions
        split.bins = by_item_split.bins;
        split.where.resize(pool.size());
        for (std::size_t j = 0; j < pool.size(); ++j) split.where[by_item[j]] = by_item_split.where[j];
        part_load.assign(ways, 0.0);
        for (std::size_t x = 0; x < pool.size(); ++x) part_load[split.where[x].rank] += pool[x].cost();
        bool better = true;
        for (std::size_t p = 0; p < ways && better; ++p)
          better = part_load[p] < lh && (!has_cap || part_load[p] <= cap);
        if (!better) return false;
        const std::vector<rank_t> bin_of_part = parts_to_bins(
            split, [&](std::size_t x) { return st.unit_bin[pool[x].unit()]; }, pool_bins);
        move_pool([&](std::size_t x) { return bin_of_part[split.where[x].rank]; });
        for (std::size_t p = 0; p < ways; ++p) load[bin_of_part[p]] = part_load[p];
        for (const rank_t b : pool_bins) by_load.update(b);
        return true;
      };
      // The pool's `kk` split; when one of its parts ends at or above the top, that split refined
      // as an instance of its own (`refine_options::refine_pool_splits`).
      assignment pool_split = karmarkar_karp{}(pool_weights, static_cast<rank_t>(ways), cost, pool_limits);
      if (take_split(pool_split)) return true;
      if (opts.refine_pool_splits) {
        refine_options within_pool = opts;
        within_pool.redifference_work = 0;  // the pool is its own last pool
        if (take_split(refine_from(std::span<const length_t>(pool_weights), pool_split, &pool_split, cost, pool_limits,
                                   within_pool)))
          return true;
      }
      if (!bins_left) return false;  // no partner left to add
    }
  };
  auto resplit = [&](rank_t h, double lh) {
    resplit_partners.clear();
    by_load.restart();
    for (rank_t t = by_load.next(); t != no_bin && resplit_partners.size() < opts.resplit_partners;
         t = by_load.next()) {
      if (t == h) continue;
      if (!(load[t] + quantum < lh)) break;
      resplit_partners.push_back(t);
    }
    for (const rank_t t : resplit_partners) {
      if (resplit_left == 0) return false;
      if (resplit_group({h, t, 0}, 2, lh)) return true;
    }
    const std::size_t triple_partners = std::min<std::size_t>(resplit_partners.size(), 8);
    for (std::size_t x = 0; x < triple_partners; ++x)
      for (std::size_t y = x + 1; y < triple_partners; ++y) {
        if (resplit_left == 0) return false;
        if (resplit_group({h, resplit_partners[x], resplit_partners[y]}, 3, lh)) return true;
      }
    return false;
  };

  for (std::uint64_t steps = 0; steps < max_steps; ++steps) {
    const rank_t h = by_load.top();
    const double lh = load[h];
    if (lh <= stop_at || lh <= floor_of_max) return;  // at the floor nothing can improve
    const std::span<const entry> hc = seg.of(h);
    refine_exchange best;
    std::uint32_t tried = 0;
    by_load.restart();
    for (rank_t t = by_load.next(); t != no_bin; t = by_load.next()) {
      if (t == h) continue;
      const double lt = load[t];
      if (!(lt + quantum < lh)) break;   // this partner and all heavier ones admit nothing
      if (tried >= opts.max_partners) {  // beyond the window: pay from the shared budget
        const std::uint64_t cost_here = hc.size() + seg.size[t];
        if (extended_left < cost_here) break;
        extended_left -= cost_here;
      }
      ++tried;
      if (tried > 1 && opts.cost_class_filter) {  // the lightest partner admitted nothing
        if (classes_pending) build_classes();
        if (classes.on()) {
          if (tried == 2) filter.build(classes, h, lh - lt);
          if (!filter.admits(classes, t, lh - lt)) continue;
        }
      }
      const std::span<const entry> tc = seg.of(t);
      const double half = (lh - lt) / 2;
      auto consider = [&](const entry& out, const entry& in, double new_h, double new_t) {
        const double q = std::max(new_h, new_t);
        if (!(q < lh)) return false;
        if (has_cap && new_t > cap) return false;
        if (!best.found || q < best.quality)
          best = refine_exchange{
              true, q, new_h, new_t, t, {out.unit(), none}, {in.unit(), none}, {out.cost(), 0}, {in.cost(), 0}};
        return true;
      };
      const entry no_unit{0.0, none};
      auto counts_ok = [&](std::uint32_t so, std::uint32_t si) {
        return cb.admits(st.counts[h] - so + si) && cb.admits(st.counts[t] + so - si);
      };
      // Moves: the pair maximum is max(lh − c, lt + c), unimodal in the moved cost c with its
      // minimum at c = half; on each side of half the first admissible unit is that side's best.
      {
        const auto p = std::lower_bound(hc.begin(), hc.end(), entry::at_least(half));
        for (auto q = p; q != hc.end(); ++q) {
          if (!(lt + q->cost() < lh) || (has_cap && lt + q->cost() > cap)) break;
          if (fixed(q->unit()) || !counts_ok(u.size(q->unit()), 0)) continue;
          consider(*q, no_unit, lh - q->cost(), lt + q->cost());
          break;
        }
        for (auto q = p; q != hc.begin();) {
          --q;
          if (!(q->cost() > 0)) break;
          if (fixed(q->unit()) || !counts_ok(u.size(q->unit()), 0)) continue;
          consider(*q, no_unit, lh - q->cost(), lt + q->cost());
          break;
        }
      }
      // Swaps: for every unit a of the top bin the exchanged amount is δ = cost(a) − cost(b),
      // best at δ = half; the partner's units are sorted, so the best b on each side of
      // cost(a) − half is the first admissible one found scanning outward. The target grows
      // with a: a moving pointer replaces the binary search (O(s_h + s_t) plus the scans).
      // Integral costs: the new loads are exact and sum to lh + lt, so no step beats
      // ⌈(lh + lt) / 2⌉; once the best reaches it, the rest cannot be strictly better.
      const double pair_floor = integral ? std::ceil((lh + lt) / 2) : -std::numeric_limits<double>::infinity();
      // Units of equal cost (image sizes repeat; integral costs only, where lengths are the
      // costs) give the same candidates: after the first of a run, the others cannot be strictly
      // better (the counts check sees one item each), so a run is passed by galloping (a bin of
      // an image phase holds a few dozen units of each size).
      const bool repeats = integral && u.trivial && movable == nullptr;
      auto after_run = [&](const entry* at) {
        const double c = at->cost();
        const entry* lo = at;  // lo->cost() == c
        std::ptrdiff_t step = 1;
        for (; hc.data() + hc.size() - lo > step && lo[step].cost() == c; step *= 2) lo += step;
        const entry* hi = std::min(lo + step, hc.data() + hc.size());
        return std::partition_point(lo + 1, hi, [c](const entry& e) { return e.cost() == c; });
      };
      auto p = tc.begin();
      for (const entry *at = hc.data(), *next = at; at != hc.data() + hc.size(); at = next) {
        const entry& a = *at;
        next = repeats ? after_run(at) : at + 1;
        if (best.found && best.quality <= pair_floor) break;
        if (!(a.cost() > 0) || fixed(a.unit())) continue;
        const entry want = entry::at_least(a.cost() - half);
        while (p != tc.end() && *p < want) ++p;
        for (auto q = p; q != tc.end(); ++q) {
          if (!(q->cost() < a.cost())) break;
          if (fixed(q->unit()) || !counts_ok(u.size(a.unit()), u.size(q->unit()))) continue;
          if (consider(a, *q, (lh - a.cost()) + q->cost(), (lt - q->cost()) + a.cost())) break;
        }
        for (auto q = p; q != tc.begin();) {
          --q;
          const double nt = (lt - q->cost()) + a.cost();
          if (!(nt < lh) || (has_cap && nt > cap)) break;  // smaller b only raises the partner
          if (fixed(q->unit()) || !counts_ok(u.size(a.unit()), u.size(q->unit()))) continue;
          consider(a, *q, (lh - a.cost()) + q->cost(), nt);
          break;
        }
      }
      if (best.found) break;
    }
    // Escape: no single move or swap improves. Exchanges of up to two units each way (2-for-1,
    // 1-for-2, 2-for-2, 2-for-0) with the lighter bins in increasing load; the first partner
    // that admits an improving one gives its best. Only for top bins of ≤ escape_max_units
    // units (larger bins have dense enough single-unit sums), paid from `escape_left`; not
    // inside `migrate` (its polish moves only some units and stops at its target).
    if (!best.found && movable == nullptr && hc.size() <= opts.escape_max_units && escape_left > 0) {
      make_sets(hc, false, out_sets);
      by_load.restart();
      for (rank_t t = by_load.next(); t != no_bin && !best.found; t = by_load.next()) {
        if (t == h) continue;
        const double lt = load[t];
        if (!(lt + quantum < lh)) break;
        const std::span<const entry> tc = seg.of(t);
        if (tc.size() > opts.escape_max_units) continue;
        make_sets(tc, true, in_sets);
        const std::uint64_t cost_here = out_sets.size() + in_sets.size();
        if (escape_left < cost_here) break;
        escape_left -= cost_here;
        const double half = (lh - lt) / 2;
        auto consider = [&](const unit_set& o, const unit_set& i) {
          if (!cb.admits(st.counts[h] - o.items + i.items) || !cb.admits(st.counts[t] + o.items - i.items))
            return false;
          const double new_h = (lh - o.cost) + i.cost, new_t = (lt - i.cost) + o.cost;
          const double q = std::max(new_h, new_t);
          if (!(q < lh) || (has_cap && new_t > cap)) return false;
          if (!best.found || q < best.quality) {
            auto cost_of = [&](std::uint32_t k) { return k == none ? 0.0 : cost_of_unit(k); };
            best = refine_exchange{true,
                                   q,
                                   new_h,
                                   new_t,
                                   t,
                                   {o.a, o.b},
                                   {i.a, i.b},
                                   {cost_of(o.a), cost_of(o.b)},
                                   {cost_of(i.a), cost_of(i.b)}};
          }
          return true;
        };
        for (const unit_set& o : out_sets) {
          if (!(o.cost > 0)) continue;
          const auto pos = std::lower_bound(in_sets.begin(), in_sets.end(), unit_set{o.cost - half, 0, 0, 0});
          for (auto q = pos; q != in_sets.end(); ++q) {  // δ ≤ half: the partner's side bounds
            if (!(q->cost < o.cost)) break;
            if (consider(o, *q)) break;
          }
          for (auto q = pos; q != in_sets.begin();) {  // δ > half: the new partner load bounds
            --q;
            if (!((lt - q->cost) + o.cost < lh)) break;
            if (consider(o, *q)) break;
          }
        }
      }
    }
    if (!best.found) {
      if (movable == nullptr && resplit_left > 0 && resplit(h, lh)) continue;
      if (movable == nullptr && redifference_left > 0 && redifference(h, lh)) continue;
      return;
    }

    // Apply.
    const rank_t t = best.partner;
    for (std::size_t x = 0; x < 2; ++x)
      if (const std::uint32_t k = best.out[x]; k != none) {
        seg.erase(h, entry{best.out_cost[x], k});
        seg.insert(t, entry{best.out_cost[x], k});
        st.move_unit(k, h, t);
      }
    for (std::size_t x = 0; x < 2; ++x)
      if (const std::uint32_t k = best.in[x]; k != none) {
        seg.erase(t, entry{best.in_cost[x], k});
        seg.insert(h, entry{best.in_cost[x], k});
        st.move_unit(k, t, h);
      }
    load[h] = best.new_top;
    load[t] = best.new_partner;
    by_load.update(h);
    by_load.update(t);
  }
}

/// `refine_additive_with` on the segment layout of the cost: `packed_entry` for `tokens`
/// without groups (every unit cost an item's length), else `wide_entry`.
template <batch_cost C>
void refine_additive(refine_state& st, std::span<const length_t> weights, const C& cost, const constraints& limits,
                     const count_bounds& cb, rank_t bins, const refine_options& opts,
                     const std::vector<bool>* movable = nullptr,
                     double stop_at = -std::numeric_limits<double>::infinity()) {
  if constexpr (std::same_as<C, mmbal::cost::tokens>)
    if (st.u->trivial)
      return refine_additive_with<packed_entry>(st, weights, cost, limits, cb, bins, opts, movable, stop_at);
  refine_additive_with<wide_entry>(st, weights, cost, limits, cb, bins, opts, movable, stop_at);
}

/// A bin as the padded fast path of `refine_general` keeps it: its item count and longest
/// item, all that a `padded_cost` reads (`value(s) == padded_value(s.count, s.max)`).
struct padded_state {
  std::uint64_t count = 0;
  length_t max = 0;
};

/// The longest unit of a bin (a unit's length: its longest item), how many of its units reach
/// it, and the longest below it (0 when none): the bin's longest item without any one of its
/// units in O(1).
struct longest_units {
  length_t first = 0, second = 0;
  std::uint32_t at_first = 0;
  void add(length_t x) noexcept {
    if (x > first) {
      second = first;
      first = x;
      at_first = 1;
    } else if (x == first) {
      ++at_first;
    } else {
      second = std::max(second, x);
    }
  }
  [[nodiscard]] length_t without(length_t unit) const noexcept {
    return unit == first && at_first == 1 ? second : first;
  }
};

/// Any-cost path: a bin keeps its units in slot-key order and its `C::state`; the cost of a
/// bin without one of its units is refolded (O(s²) per bin and step, s = units per bin).
/// Padded costs (`padded_cost`) keep (count, longest item) per bin instead: a bin without a
/// unit, or with one more, costs O(1) — the same loads, so the same steps — and, without
/// groups, a partner is skipped in O(1) when no move or swap with it can improve: a move
/// makes it cost at least padded_value(its count + 1, max(its longest, the top's shortest)),
/// and a swap lowers the top only when it gives away the top's only longest item, leaving the
/// partner at least padded_value(its count, that length) (padded_value is non-decreasing in
/// the length at a fixed count).
template <batch_cost C>
void refine_general(refine_state& st, std::span<const length_t> weights, const C& cost, const constraints& limits,
                    const count_bounds& cb, rank_t bins, const refine_options& opts,
                    const std::vector<bool>* movable = nullptr,
                    double stop_at = -std::numeric_limits<double>::infinity()) {
  const units& u = *st.u;
  constexpr bool padded = padded_cost<C>;
  using state = std::conditional_t<padded, padded_state, typename C::state>;
  // Every bin's units in slot order (a group where its first item is), the order `bin_loads`
  // folds the items in.
  std::vector<std::vector<std::uint32_t>> content(bins);
  if (u.trivial && st.arrivals.empty()) {  // nothing moved yet: an item's key is its slot
    for (rank_t b = 0; b < bins; ++b) content[b].resize(st.counts[b]);
    for (item_id i = 0; i < u.count; ++i) content[st.unit_bin[i]][st.key[i]] = i;
  } else if (u.trivial) {
    for (rank_t b = 0; b < bins; ++b) content[b].reserve(st.counts[b]);
    st.visit_in_slot_order(bins, [&](rank_t b, item_id i) { content[b].push_back(i); });
  } else {
    for (rank_t b = 0; b < bins; ++b) content[b].reserve(st.counts[b]);
    std::vector<std::uint32_t> unit_of(st.key.size());
    for (std::uint32_t k = 0; k < u.count; ++k) u.for_each(k, [&](item_id i) { unit_of[i] = k; });
    std::vector<bool> listed(u.count, false);
    st.visit_in_slot_order(bins, [&](rank_t b, item_id i) {
      if (!listed[unit_of[i]]) content[b].push_back(unit_of[i]);
      listed[unit_of[i]] = true;
    });
  }
  // Padded costs: a unit's longest item (an item's own length without groups: no table).
  std::vector<length_t> group_length;
  if (padded && !u.trivial) {
    group_length.assign(u.count, 0);
    for (std::uint32_t k = 0; k < u.count; ++k)
      u.for_each(k, [&](item_id i) { group_length[k] = std::max(group_length[k], weights[i]); });
  }
  auto unit_length = [&](std::uint32_t k) { return u.trivial ? weights[k] : group_length[k]; };
  auto longest_of = [&](const std::vector<std::uint32_t>& c) {
    longest_units top;
    for (const std::uint32_t k : c) top.add(unit_length(k));
    return top;
  };
  // Bin b (its units `c`, its longest units `top` for padded costs) without unit `skip`
  // (`none`: the whole bin); a state with unit k added; a state's cost.
  constexpr std::uint32_t none = std::numeric_limits<std::uint32_t>::max();
  auto without = [&](const std::vector<std::uint32_t>& c, rank_t b, const longest_units& top, std::uint32_t skip) {
    if constexpr (padded)
      return skip == none ? state{st.counts[b], top.first}
                          : state{st.counts[b] - u.size(skip), top.without(unit_length(skip))};
    else
      return fold_units(u, std::span<const std::uint32_t>(c), skip, weights, cost);
  };
  auto with = [&](std::uint32_t k, const state& s) {
    if constexpr (padded)
      return state{s.count + u.size(k), std::max(s.max, unit_length(k))};
    else
      return unit_state(u, k, weights, cost, s);
  };
  auto value = [&](const state& s) {
    if constexpr (padded)
      return cost.padded_value(s.count, s.max);
    else
      return cost.value(s);
  };
  auto whole = [&](rank_t b) {
    if constexpr (padded)
      return without(content[b], b, longest_of(content[b]), none);
    else
      return without(content[b], b, longest_units{}, none);
  };
  std::vector<state> states(bins);
  std::vector<double> load(bins);
  std::set<bin_key> by_load;
  // Bin b refolded in slot order, so the tracked load is what `bin_loads` recomputes, and filed
  // by its load (the caller has taken its old key out of `by_load`).
  auto refile = [&](rank_t b) {
    states[b] = whole(b);
    load[b] = value(states[b]);
    by_load.insert(bin_key{load[b], b});
  };
  for (rank_t b = 0; b < bins; ++b) refile(b);
  // Unit k leaves bin `from` for the end of bin `to` (the slot order a move gives it).
  auto move_to = [&](std::uint32_t k, rank_t from, rank_t to) {
    auto& c = content[from];
    c.erase(std::find(c.begin(), c.end(), k));
    content[to].push_back(k);
    st.move_unit(k, from, to);
  };
  const bool has_cap = limits.capacity.has_value();
  const double cap = has_cap ? *limits.capacity : 0.0;
  const std::uint64_t max_steps = std::uint64_t{opts.max_passes} * u.count;

  // Bounded work per step for large bins: the top bin offers its `max_candidates` costliest
  // units, a partner its `max_candidates` cheapest (positions kept in slot order, so ties are
  // broken as without the cap), and a step stops trying partners after `refold_budget` unit
  // folds. The padded path does not refold, but it counts the folds the refolding path would
  // make (skipped partners included), so that both stop at the same partner: the same steps.
  constexpr std::size_t max_candidates = 32;
  constexpr std::uint64_t refold_budget = std::uint64_t{1} << 22;
  // A unit's cost alone (padded costs: from its size and length, no table).
  std::vector<double> solo_table;
  if (!padded) {
    solo_table.resize(u.count);
    for (std::uint32_t k = 0; k < u.count; ++k)
      solo_table[k] = cost.value(unit_state(u, k, weights, cost, cost.empty()));
  }
  auto solo = [&](std::uint32_t k) {
    if constexpr (padded)
      return cost.padded_value(u.size(k), unit_length(k));
    else
      return solo_table[k];
  };
  // A bin holding a unit costs at least that unit alone (costs are monotone as items are
  // added): a top bin at the costliest unit's cost cannot improve.
  double floor_of_max = 0;
  for (std::uint32_t k = 0; k < u.count; ++k) floor_of_max = std::max(floor_of_max, solo(k));
  auto candidates = [&](const std::vector<std::uint32_t>& c, bool costliest, std::vector<std::size_t>& out) {
    out.resize(c.size());
    std::iota(out.begin(), out.end(), std::size_t{0});
    if (c.size() <= max_candidates) return;
    auto before = [&](std::size_t x, std::size_t y) {
      if (solo(c[x]) != solo(c[y])) return costliest ? solo(c[x]) > solo(c[y]) : solo(c[x]) < solo(c[y]);
      return c[x] < c[y];
    };
    // `before` is a strict total order, so the first `max_candidates` are one set, found in O(s).
    std::nth_element(out.begin(), out.begin() + max_candidates, out.end(), before);
    out.resize(max_candidates);
    std::sort(out.begin(), out.end());
  };

  std::vector<state> without_h, without_t;
  std::vector<std::size_t> cand_h, cand_t;
  longest_units top_h, top_t;
  std::uint64_t extended_left = std::uint64_t{opts.extended_work} * u.count;

  // Pool re-split (`refine_options::padded_pool_work`): the top bin and the m − 1 lightest
  // other bins (m = 2, 4, 8, ...; bins tied with the top come last) split anew by
  // `padded_binary_search` among those bins — the pool's items sorted, cut into contiguous
  // runs, the best such grouping — taken when every new load ends strictly below the top's, so
  // the bins at the maximum never grow in number; parts go to the bins they overlap most. `lpt` under a padded cost
  // mixes long and short items in every bin, which moves and swaps cannot undo, and often leaves many bins at the same
  // maximum (weights with many ties): only a pool that takes them in lowers it.
  std::uint64_t pool_left = padded && u.trivial && limits.counts.kind != count_cap::mode::equal
                                ? std::uint64_t{opts.padded_pool_work} * u.count
                                : 0;
  constraints pool_limits;
  pool_limits.counts = limits.counts;
  std::vector<rank_t> pool_bins;
  std::vector<std::uint32_t> pool_units;
  std::vector<length_t> pool_weights;
  std::vector<state> part;  // the pool split's parts
  auto pool_resplit = [&](rank_t h, double lh) {
    if constexpr (!padded) {
      return false;
    } else {
      pool_bins.assign(1, h);
      auto next = by_load.begin();
      for (std::size_t m = 2;; m *= 2) {
        const std::size_t before = pool_bins.size();
        for (; next != by_load.end() && pool_bins.size() < m; ++next)
          if (next->bin != h) pool_bins.push_back(next->bin);
        if (pool_bins.size() < 2 || (m > 2 && pool_bins.size() == before)) return false;  // no new partner
        pool_units.clear();
        pool_weights.clear();
        for (const rank_t b : pool_bins)
          for (const std::uint32_t k : content[b]) {
            pool_units.push_back(k);
            pool_weights.push_back(weights[k]);  // a unit is its item
          }
        if (pool_units.size() > opts.padded_pool_max_units || pool_units.size() > pool_left) return false;
        pool_left -= pool_units.size();
        const std::size_t ways = pool_bins.size();
        const assignment split = padded_binary_search{}(pool_weights, static_cast<rank_t>(ways), cost, pool_limits);
        part.assign(ways, state{});
        for (std::size_t x = 0; x < pool_units.size(); ++x) {
          state& p = part[split.where[x].rank];
          p = with(pool_units[x], p);
        }
        bool better = true;
        for (std::size_t p = 0; p < ways && better; ++p) {
          const double l = value(part[p]);
          better = l < lh && (!has_cap || l <= cap);
        }
        if (!better) continue;
        const std::vector<rank_t> bin_of_part = parts_to_bins(
            split, [&](std::size_t x) { return st.unit_bin[pool_units[x]]; }, pool_bins);
        for (const rank_t b : pool_bins) by_load.erase(bin_key{load[b], b});
        for (std::size_t x = 0; x < pool_units.size(); ++x) {
          const std::uint32_t k = pool_units[x];
          const rank_t from = st.unit_bin[k], to = bin_of_part[split.where[x].rank];
          if (to != from) move_to(k, from, to);
        }
        for (const rank_t b : pool_bins) refile(b);
        return true;
      }
    }
  };

  for (std::uint64_t steps = 0; steps < max_steps; ++steps) {
    const rank_t h = most_loaded(by_load).bin;
    const double lh = load[h];
    if (lh <= stop_at || lh <= floor_of_max) return;
    const auto& hc = content[h];
    auto fixed = [&](std::uint32_t k) { return movable != nullptr && !(*movable)[k]; };
    candidates(hc, true, cand_h);
    length_t shortest_h = std::numeric_limits<length_t>::max();
    if constexpr (padded) {
      top_h = longest_of(hc);
      for (const std::uint32_t k : hc) shortest_h = std::min(shortest_h, unit_length(k));
    }
    without_h.clear();
    for (std::size_t a : cand_h) without_h.push_back(without(hc, h, top_h, hc[a]));
    std::uint64_t refolds = std::uint64_t{cand_h.size()} * hc.size();
    refine_step best;
    std::uint32_t tried = 0;
    for (auto it = by_load.begin(); it != by_load.end() && refolds < refold_budget; ++it) {
      if (it->bin == h) continue;
      const rank_t t = it->bin;
      if (!(load[t] < lh)) break;
      const auto& tc = content[t];
      if (tried >= opts.max_partners) {  // beyond the window: pay from the shared budget
        const std::uint64_t cost_here = hc.size() + tc.size();
        if (extended_left < cost_here) break;
        extended_left -= cost_here;
      }
      ++tried;
      const std::uint64_t partner_refolds =
          std::uint64_t{std::min(tc.size(), max_candidates)} * (tc.size() + cand_h.size()) + cand_h.size();
      if constexpr (padded) {
        if (u.trivial) {
          const bool move_may = cb.admits(st.counts[h] - 1) && cb.admits(st.counts[t] + 1) &&
                                cost.padded_value(st.counts[t] + 1, std::max(states[t].max, shortest_h)) < lh;
          const bool swap_may = top_h.at_first == 1 && cost.padded_value(st.counts[t], top_h.first) < lh;
          if (!move_may && !swap_may) {
            refolds += partner_refolds;
            continue;
          }
        }
        top_t = longest_of(tc);
      }
      candidates(tc, false, cand_t);
      without_t.clear();
      for (std::size_t b : cand_t) without_t.push_back(without(tc, t, top_t, tc[b]));
      refolds += partner_refolds;
      auto consider = [&](std::uint32_t out, std::uint32_t in, double new_h, double new_t) {
        const double q = std::max(new_h, new_t);
        if (!(q < lh) || (has_cap && new_t > cap)) return;
        if (!best.found || q < best.quality) best = refine_step{true, q, new_h, new_t, t, out, in};
      };
      for (std::size_t ia = 0; ia < cand_h.size(); ++ia) {
        const std::uint32_t ka = hc[cand_h[ia]], sa = u.size(ka);
        if (fixed(ka)) continue;
        if (cb.admits(st.counts[h] - sa) && cb.admits(st.counts[t] + sa))
          consider(ka, none, value(without_h[ia]), value(with(ka, states[t])));
        for (std::size_t ib = 0; ib < cand_t.size(); ++ib) {
          const std::uint32_t kb = tc[cand_t[ib]], sb = u.size(kb);
          if (fixed(kb)) continue;
          if (!cb.admits(st.counts[h] - sa + sb) || !cb.admits(st.counts[t] + sb - sa)) continue;
          consider(ka, kb, value(with(kb, without_h[ia])), value(with(ka, without_t[ib])));
        }
      }
      if (best.found) break;
    }
    if (!best.found) {
      if (movable == nullptr && pool_left > 0 && pool_resplit(h, lh)) continue;
      return;
    }
    const rank_t t = best.partner;
    by_load.erase(bin_key{load[h], h});
    by_load.erase(bin_key{load[t], t});
    move_to(best.out, h, t);
    if (best.swap()) move_to(best.in, t, h);
    refile(h);
    refile(t);
  }
}

/// `refine` (below); `handed_over` is `&start` when the caller gave its start away, whose
/// storage then becomes the result (`tokens` with exact loads: the search needs no copy of the
/// start to fall back on), else null. Without `check_slots` the start's slots are taken to be
/// valid (its ranks are still checked): `refine_valid_start`.
template <batch_cost C>
[[nodiscard]] assignment refine_from(std::span<const length_t> weights, const assignment& start,
                                     assignment* handed_over, const C& cost, const constraints& limits,
                                     const refine_options& opts, bool check_slots) {
  const char* name = "refine";
  if (start.size() != weights.size())
    mmbal::detail::throw_invalid(name, ": start assignment has ", start.size(), " items but there are ", weights.size(),
                                 " weights");
  detail::check_problem(name, weights, start.bins, limits);
  const rank_t bins = start.bins;
  const std::size_t n = weights.size();
  // One pass validates the start (ranks < bins, each bin's slots exactly 0..size−1) and lists
  // every bin's items in slot order, the order `bin_loads` folds them in.
  // The same pass folds the lengths' maximum and sum (each further pass over the weights is
  // a read of n words from beyond the caches on large inputs).
  // When units are items, the same pass keeps every unit's bin.
  const detail::units u = detail::make_units(n, limits.groups);
  detail::refine_state st;
  st.u = &u;
  st.unit_bin.resize(u.count);
  std::vector<std::uint32_t> bin_begin(std::size_t{bins} + 1, 0);
  detail::length_totals lengths;
  for (item_id i = 0; i < n; ++i) {
    const location l = start.where[i];
    if (l.rank >= bins) {
      start.validate();  // throws, naming the item
      mmbal::detail::throw_invalid(name, ": start rank ", l.rank, " >= bins ", bins);
    }
    ++bin_begin[std::size_t{l.rank} + 1];
    if (u.trivial) st.unit_bin[i] = l.rank;
    lengths.longest = std::max(lengths.longest, weights[i]);
    lengths.sum += weights[i];
  }
  st.lengths = lengths;
  for (rank_t b = 0; b < bins; ++b) bin_begin[std::size_t{b} + 1] += bin_begin[b];
  // When the cost's fold does not depend on the item order (`stats_fold_exact`: every built-in
  // cost unless n · (max l)² ≥ 2^53), the slots are checked with a bitmap and the loads folded in
  // item order; otherwise every bin's items are listed in slot order, the order `bin_loads`
  // folds them in.
  const bool order_free = detail::stats_fold_exact<C>(lengths.longest, n);
  // `tokens` with an order-free fold: Σ l ≤ n · (max l)² < 2^53, so every load the search tracks
  // (a sum of a subset of the integer item costs) is exact and equals what `bin_loads` folds;
  // the search only takes steps whose new loads are below the top's and within the capacity,
  // so the result's maximum is ≤ the start's and ≤ the capacity by construction. The start's
  // loads are then needed only to check the capacity, and the safety net below cannot fire:
  // both folds are skipped.
  const bool exact_loads = std::same_as<C, mmbal::cost::tokens> && order_free;
  const bool fold_start = !exact_loads || limits.capacity.has_value();
  std::vector<typename C::state> before;
  constexpr item_id hole = std::numeric_limits<item_id>::max();
  std::vector<item_id> by_slot;
  auto bad_slot = [&](item_id i) {
    start.validate();  // throws, naming the slot
    mmbal::detail::throw_invalid(name, ": start slot ", start.where[i].slot, " of item ", i,
                                 " is out of range or taken");
  };
  // The additive search with an order-free fold ends in `build_compact`, which reads no keys:
  // none are kept (n words fewer to write, and fresh memory is a page fault per 4 KiB).
  const bool keyless = additive_cost<C> && order_free;
  if (!keyless) st.key.resize(n);
  if (order_free) {
    std::vector<std::uint64_t> taken(check_slots ? n / 64 + 1 : 0, 0);
    // Checks item i's slot and, in the same pass, keeps its start slot (its key).
    auto check = [&](item_id i, const location l) {
      if (check_slots) {
        const std::size_t at = std::size_t{bin_begin[l.rank]} + l.slot;
        const std::uint64_t bit = std::uint64_t{1} << (at & 63);
        if (l.slot >= bin_begin[std::size_t{l.rank} + 1] - bin_begin[l.rank] || (taken[at >> 6] & bit) != 0)
          bad_slot(i);
        taken[at >> 6] |= bit;
      }
      if (!keyless) st.key[i] = l.slot;
    };
    if (fold_start) {
      before.assign(bins, cost.empty());
      for (item_id i = 0; i < n; ++i) {
        const location l = start.where[i];
        check(i, l);
        before[l.rank] = cost.add(before[l.rank], weights[i]);
      }
    } else if (check_slots || !keyless) {  // else nothing to check or keep: no pass
      for (item_id i = 0; i < n; ++i) check(i, start.where[i]);
    }
  } else {
    by_slot.assign(n, hole);
    for (item_id i = 0; i < n; ++i) {
      const location l = start.where[i];
      const std::size_t at = std::size_t{bin_begin[l.rank]} + l.slot;
      if (l.slot >= bin_begin[std::size_t{l.rank} + 1] - bin_begin[l.rank] || by_slot[at] != hole) bad_slot(i);
      by_slot[at] = i;
    }
  }
  st.counts.assign(bins, 0);
  st.next_key = n;
  st.start_by_cost = &start;
  if (!order_free)  // the pass above kept them otherwise
    for (item_id i = 0; i < n; ++i) st.key[i] = start.where[i].slot;
  if (u.trivial)  // unit = item: the counts are the bins' sizes
    for (rank_t b = 0; b < bins; ++b) st.counts[b] = bin_begin[std::size_t{b} + 1] - bin_begin[b];
  for (std::uint32_t k = 0; k < u.count && !u.trivial; ++k) {
    bool first = true;
    u.for_each(k, [&](item_id i) {
      const rank_t b = start.where[i].rank;
      if (first)
        st.unit_bin[k] = b;
      else if (b != st.unit_bin[k])
        mmbal::detail::throw_invalid(name, ": the start splits group ", limits.groups[i], " across bins ",
                                     st.unit_bin[k], " and ", b);
      first = false;
    });
    st.counts[st.unit_bin[k]] += u.size(k);
  }
  const detail::count_bounds cb = detail::make_count_bounds(limits.counts, n, bins);
  for (rank_t b = 0; b < bins; ++b)
    if (!cb.admits(st.counts[b]))
      mmbal::detail::throw_invalid(name, ": the start violates the count cap: bin ", b, " holds ", st.counts[b],
                                   " items, allowed ", cb.lo, "..", cb.hi);
  double max_before = 0;
  for (rank_t b = 0; b < bins && fold_start; ++b) {
    typename C::state s = cost.empty();
    if (order_free)
      s = before[b];
    else
      for (std::uint32_t p = bin_begin[b]; p < bin_begin[std::size_t{b} + 1]; ++p) s = cost.add(s, weights[by_slot[p]]);
    const double l = cost.value(s);
    if (limits.capacity && l > *limits.capacity)
      mmbal::detail::throw_invalid(name, ": the start violates the capacity: bin ", b, " costs ", l, " > ",
                                   *limits.capacity);
    max_before = b == 0 ? l : std::max(max_before, l);
  }
  if (bins < 2 || n == 0 || opts.max_passes == 0) return start;

  if constexpr (additive_cost<C>)
    refine_additive(st, weights, cost, limits, cb, bins, opts);
  else
    refine_general(st, weights, cost, limits, cb, bins, opts);

  // `build_compact` reads only the arrivals: freeing the units' bins first lets its table of
  // new slots reuse their memory (a smaller peak, fewer fresh pages).
  if (order_free) st.unit_bin = {};
  if (exact_loads) {
    auto visit_none = [](rank_t, item_id) {};
    return handed_over != nullptr ? st.build_compact(std::move(*handed_over), bin_begin, visit_none)
                                  : st.build_compact(start, bin_begin, visit_none);
  }
  // Safety net against rounding of the incremental additive loads: the result's loads are
  // folded in slot order while it is built, exactly as `bin_loads` folds them.
  std::vector<typename C::state> states(bins, cost.empty());
  auto fold = [&](rank_t b, item_id i) { states[b] = cost.add(states[b], weights[i]); };
  assignment out = order_free ? st.build_compact(start, bin_begin, fold) : st.build(bins, fold, by_slot, bin_begin);
  for (rank_t b = 0; b < bins; ++b) {
    const double l = cost.value(states[b]);
    if (l > max_before || (limits.capacity && l > *limits.capacity)) return start;
  }
  return out;
}

}  // namespace detail

/// Local search after any partitioner: repeatedly takes the most loaded bin (ties: smallest
/// index) and its partners — the least loaded bins, in increasing load — and applies the best
/// move of one unit to the first partner that admits an improving step, or the best pairwise
/// swap of a unit of the top bin with a lighter unit of that partner. A step is improving when
/// both new loads are strictly below the top bin's load, so every step strictly lowers the
/// pair (maximum, number of bins at the maximum) and the maximum never rises; the search stops
/// when the most loaded bin admits no improving step or the work bound is reached.
///
/// - Guarantee: max(result) ≤ max(start) (recomputed with `bin_loads`; if floating-point
///   rounding of the incremental loads ever disagreed, the start is returned); every
///   constraint the start satisfies stays satisfied: `count_cap` (per-bin counts stay within
///   ⌊n/d⌋…⌈n/d⌉ for `equal`, ≤ cap for `fixed`), `capacity` (a receiving bin stays ≤ cap),
///   `groups` (a group moves as one unit, so its items move together or not at all).
/// - Stops early when the maximum reaches a lower bound of every placement — Σ cost / d
///   (⌈Σ / d⌉ for integral costs such as tokens; additive costs) or the costliest unit alone
///   (costs ≥ 0; any cost): it is then optimal, though other bins may still sit at it.
/// - Escape (additive costs, `escape_work`): when no move or swap improves, exchanges of up to
///   two units each way with the lighter bins; only between bins of ≤ `escape_max_units` units.
///   Then (`resplit_work`) the pair re-split: the top bin's units pooled with a lighter partner's
///   (the `resplit_partners` lightest, lightest first; then pairs of the 8 lightest, split three
///   ways) are split anew by a bounded complete search that keeps every constraint (count
///   ranges, capacity, groups as one unit), taken when every new load ends strictly below the
///   top's; only for pools of ≤ `resplit_max_units` units. Then (`redifference_work`; no
///   groups, free or equal counts) the pool re-differencing: the top bin and its 3, 7, 15, ...
///   lightest other bins (those tied with it last) split anew by `kk` among themselves (given in item order), pools of
///   ≤ `redifference_max_units` items, under the same acceptance rule; on instances of ≤ `redifference_whole_units`
///   items the first larger pool is replaced, once per call, by every bin: `kk`'s own partition of the instance, so
///   once it has been tried the result cannot end above `kk`. Padded costs (no groups, free or fixed counts)
///   escape by the pool re-split (`padded_pool_work`): the top bin and the 1, 3, 7, ... lightest other bins (those tied
///   with it last) split anew by `padded_binary_search` (the pool's items sorted and cut into contiguous runs), same
///   rule, pools of ≤ `padded_pool_max_units` items — `lpt` under a padded cost mixes long and short items in every
///   bin, which moves and swaps cannot regroup. All run only when the plain search is stuck. On seeded random and
///   generated instances with 2–32 items per bin `X+refine` ends within 1e-5 of the best plain shipped algorithm on
///   every one of 2,280 (instance, X) pairs (asserted in tests/balance/refine_escape_test.cpp). Not a guarantee of
///   matching another start's `Y+refine` (another local optimum): 48 of 1,080 pairs end above the best of every Y and
///   Y+refine by more than 1e-5 (up to 0.37 % with ≤ 3 items per bin; ≤ 0.05 % otherwise) — bench/RESULTS.md
///   "Session 16 — refine pool re-differencing", "Session 21 — tied bins in the pool re-differencing", "Session 26 —
///   the whole instance as the last pool", "Session 36 — refined pool splits" (75 of 1,080 and up to 2.2 % before a
///   pool whose `kk` split fails is refined as an instance of its own: `refine_pool_splits`); under the padded cost
///   none of the 1,200 pairs ("Session 19").
/// - Complexity: O(n + d) to validate and build (no sort: stayers keep the start's order);
///   additive costs: every bin's units sorted by cost in a flat pool (8-byte entries for `tokens` without groups,
///   else 16), O(n) from a start whose slots run by cost descending (`lpt`'s), else one radix order of the unit costs,
///   O(n · ⌈bits / 11⌉); per step O(log d) to keep the bins' order (plus O(p) while a prefix of the p lightest bins
///   is cached for long partner enumerations), or O(1) word operations when every load is an integer within a range
///   of ≤ 2^24 / 2^⌈log2 d⌉ values (`tokens`: a bitmap of (load, bin) keys; `detail::load_order`), and per partner
///   O(s_h + s_t) (s = units per bin), the partners in increasing load, skipped once the gap admits nothing (≤ 1 for
///   integral costs); with few distinct integral unit costs (≤ 256), O(1) for a partner whose costs admit no improving
///   move or swap (`cost_class_filter`; O(n) once to build the classes, O(256 log 256) per step that goes past its
///   lightest partner); an escape step costs O(s² log s) per partner from its budget, a re-split ≤ 1,024 search nodes
///   of O(1) per pool from its budget, a re-differencing one `kk` (padded costs: one `padded_binary_search`) of ≤ 128
///   items per pool (padded: ≤ 1,024) and, where `kk`'s split fails, one `refine` of the pool under the same options,
///   and once per call one of the whole instance when it holds ≤ 512 items. Other costs refold bins: per step the 32
///   costliest units of the top bin and the 32 cheapest of each partner are tried (all of them in bins of ≤ 32 units),
///   O(32 · s) per partner, and a step stops trying partners after about 4 M unit folds; padded costs
///   (`padded_cost`) keep (count, longest item) per bin, so a pair costs O(1), O(s) per partner, and without groups a
///   partner that admits no improving step is skipped in O(1) (the same steps: bench/RESULTS.md "Session 18 — the
///   padded path of refine"). At most `max_passes` × units steps.
/// - Determinism: ties broken by bin index, then by unit order; no randomness.
/// - Slot order: items that stay keep their relative slot order, items that arrive go last in
///   arrival order, and the remaining slots are compacted to 0..k−1.
/// - Errors (`invalid_input`): `start` invalid or of another size than `weights`, a group
///   split across bins, or a start that already violates a count cap or the capacity.
/// @param weights cost weight (length) per item
/// @param start   the assignment to improve (e.g. the output of `lpt`); it carries the bins
/// @param opts    work bounds, see `refine_options` (defaults: 4 passes, 256 partners, extended,
///                escape, re-split and re-differencing budgets 256, 64, 64 and 16 × units)
/// @see OrchMLLM §5.1 (objective: minimise the maximum); docs/DESIGN.md §5.1 `refine`.
template <batch_cost C>
[[nodiscard]] assignment refine(std::span<const length_t> weights, const assignment& start, const C& cost,
                                const constraints& limits, const refine_options& opts = {}) {
  return detail::refine_from(weights, start, nullptr, cost, limits, opts);
}

/// `refine` of a start the caller no longer needs, e.g. `refine(w, lpt{}(w, d, c), c, limits)`:
/// the same result; with `tokens` (exact loads) it is built in the start's storage, saving a
/// copy of n locations and their fresh memory.
template <batch_cost C>
[[nodiscard]] assignment refine(std::span<const length_t> weights, assignment&& start, const C& cost,
                                const constraints& limits, const refine_options& opts = {}) {
  return detail::refine_from(weights, start, &start, cost, limits, opts);
}

namespace detail {
/// `refine(weights, std::move(start), ...)` of a start known to be valid — a shipped
/// partitioner's output, which the tests validate instead (`orchestrate::phase_balancer`):
/// with an order-free fold the slots are not checked (its ranks still are), 3–4 % of
/// `lpt+refine` on an image phase (bench/RESULTS.md "Session 37 — the load order as a bitmap").
/// Same result as `refine` on a valid start; on an invalid one the result is unspecified.
template <batch_cost C>
[[nodiscard]] assignment refine_valid_start(std::span<const length_t> weights, assignment&& start, const C& cost,
                                            const constraints& limits, const refine_options& opts = {}) {
  return refine_from(weights, start, &start, cost, limits, opts, false);
}

/// `refine_valid_start(weights, lpt{}(weights, bins, cost), cost, {}, opts)` for `tokens` without
/// constraints — the same assignment — with the two fused where they pass over the same data:
/// `lpt`'s placement is kept as one bin per placed item instead of n locations; the bins'
/// segments are filled from its sorted order (weight ascending, each run of one weight in the
/// order it was placed: (cost, unit) order with no per-bin reversal or check) with their counts
/// and loads; no start is validated; and the result is written once, in placement order for the
/// items that stay (their start slots compacted, as `build_compact` keeps them), then the
/// arrivals. Falls back to the two calls where a fold would not be exact (Σ ≥ 2^52, or
/// n · (max l)² ≥ 2^53) or there is nothing to search. Where the search would use cost classes,
/// the fill builds them too (run r of one weight = class r). O(lpt + refine's search), about a
/// seventh less than the two calls on an image phase (bench/RESULTS.md "Session 38 — lpt and
/// refine fused", "Session 39 — the cost classes built with the bins").
template <class C>
requires std::same_as<C, mmbal::cost::tokens>
[[nodiscard]] assignment lpt_refined(std::span<const length_t> weights, rank_t bins, const C& cost,
                                     const refine_options& opts = {}) {
  const std::size_t n = weights.size();
  check_problem("lpt", weights, bins, {});
  auto unfused = [&] { return refine_valid_start(weights, lpt_unconstrained(weights, bins, cost), cost, {}, opts); };
  if (n == 0 || bins < 2 || opts.max_passes == 0) return unfused();
  const lpt_order order = lpt_sorted(weights, cost);
  const length_t longest = static_cast<length_t>(order.words.back() >> 32);
  if (!(order.total < 0x1p52) || !stats_fold_exact<C>(longest, n)) return unfused();
  // Placement: the bin of the k-th placed item, and every bin's count.
  const auto bin_of_placed = std::make_unique_for_overwrite<rank_t[]>(n);  // every entry written by the deal
  filled_bins<packed_entry> given;
  sorted_segments<packed_entry>& seg = given.seg;
  seg.size.assign(bins, 0);
  lpt_deal(order, bins, cost, [&](std::size_t k, rank_t b) {
    bin_of_placed[k] = b;
    ++seg.size[b];
  });
  const units u = make_units(n, {});
  refine_state st;
  st.u = &u;
  st.counts.assign(seg.size.begin(), seg.size.end());
  st.next_key = n;
  st.lengths = length_totals{longest, static_cast<std::uint64_t>(order.total)};
  st.unit_bin.resize(n);
  // Segments: the words ascending are weight ascending, each run of one weight by descending
  // id; placement order within a run is ascending id, so each run is read backwards. The runs
  // are the cost classes (run r: class r) where the search would build them: each bin's
  // classes are set here, with its units, instead of in a pass of their own.
  seg.lay_out();
  // What the fill writes per bin, together: one cache line per unit placed, not one per array.
  struct bin_fill {
    std::uint64_t sum = 0;
    std::array<std::uint64_t, cost_classes::words> held{};
    std::uint32_t at = 0;  // the next slot of the bin's segment
  };
  std::vector<bin_fill> fill(bins);
  for (rank_t b = 0; b < bins; ++b) fill[b].at = seg.begin[b];
  const bool with_classes = opts.cost_class_filter && bins >= class_filter_min_bins && longest < cost_classes::max_cost;
  bool classes_on = with_classes;  // no more runs than max_classes so far
  std::vector<length_t> distinct;  // the runs' weights
  for (std::size_t j = 0; j < n;) {
    const std::uint64_t w = order.words[j] >> 32;
    std::size_t end = j + 1;
    while (end < n && (order.words[end] >> 32) == w) ++end;
    classes_on = classes_on && distinct.size() < cost_classes::max_classes;
    const std::size_t word = distinct.size() >> 6;
    const std::uint64_t bit = classes_on ? std::uint64_t{1} << (distinct.size() & 63) : 0;
    if (classes_on) distinct.push_back(static_cast<length_t>(w));
    for (std::size_t x = end; x-- > j;) {
      const item_id i = lpt_order::id_of(order.words[x]);
      const rank_t b = bin_of_placed[n - 1 - x];
      bin_fill& f = fill[b];
      seg.pool[f.at++] = packed_entry::of(static_cast<length_t>(w), i);
      f.sum += w;
      f.held[word & (cost_classes::words - 1)] |= bit;  // bit 0 once the classes are off; the mask keeps word in range
      st.unit_bin[i] = b;
    }
    j = end;
  }
  given.load.resize(bins);
  for (rank_t b = 0; b < bins; ++b) given.load[b] = static_cast<double>(fill[b].sum);
  if (with_classes) {
    std::vector<std::uint64_t> held(classes_on ? std::size_t{bins} * cost_classes::words : 0);
    for (std::size_t b = 0; classes_on && b < bins; ++b)
      std::copy_n(fill[b].held.begin(), cost_classes::words, held.begin() + b * cost_classes::words);
    given.classes =
        classes_on ? cost_classes(distinct, std::move(held)) : cost_classes{};  // off: more runs than classes
  }
  const count_bounds cb = make_count_bounds(count_cap{}, n, bins);
  refine_additive_with<packed_entry>(st, weights, cost, constraints{}, cb, bins, opts, nullptr,
                                     -std::numeric_limits<double>::infinity(), &given);
  st.unit_bin = {};
  // The result: the items that never moved in placement order (their compacted start slots),
  // then each moved item at its last arrival, in arrival order (as `build_compact` builds it).
  const std::vector<std::uint8_t> last = st.last_arrivals(n);
  std::vector<std::uint64_t> moved(n / 64 + 1, 0);
  for (std::size_t j = 0; j < last.size(); ++j)
    if (last[j] != 0) moved[st.arrivals[j] >> 6] |= std::uint64_t{1} << (st.arrivals[j] & 63);
  assignment a{bins, std::vector<location>(n)};
  std::vector<std::uint32_t> next(bins, 0);
  for (std::size_t k = 0; k < n; ++k) {
    const item_id i = lpt_order::id_of(order.placed(k));
    if ((moved[i >> 6] >> (i & 63) & 1) == 0) a.where[i] = location{bin_of_placed[k], next[bin_of_placed[k]]++};
  }
  st.place_last_arrivals(a, last, next, [](rank_t, item_id) {});
  return a;
}
}  // namespace detail

}  // namespace mmbal::balance
