#pragma once
/// @file
/// Few distinct integral unit costs (an image phase: a hundred-odd image sizes): which of them
/// each bin holds, one bit per distinct cost, so that `refine` skips a partner that admits no
/// improving move or swap without scanning both bins (namespace mmbal::balance::detail; used
/// by balance/refine.hpp).

#include <mmbal/core/types.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <limits>
#include <span>
#include <utility>
#include <vector>

namespace mmbal::balance::detail {

/// The distinct unit costs of an instance, ascending (its classes), and per bin the set of the
/// classes its units have. Off (`on()` false) unless every unit cost is an integer in
/// [0, `max_cost`) and there are at most `max_classes` distinct ones.
class cost_classes {
 public:
  static constexpr std::uint32_t words = 4;  // bits per bin: one per class
  static constexpr std::uint32_t max_classes = 64 * words;
  static constexpr double max_cost = 0x1p20;

  cost_classes() = default;

  /// The classes of `unit_cost` over `bins` empty bins (`add` or `hold` fills them);
  /// `integral`: every cost is a non-negative integer, as the caller already checked.
  /// O(n + max cost / 64).
  cost_classes(std::span<const double> unit_cost, rank_t bins, bool integral) {
    if (!integral) return;
    double costliest = 0;
    for (const double c : unit_cost) costliest = c > costliest ? c : costliest;  // a plain loop, no iterator chase
    init(unit_cost, costliest, bins);
  }
  /// The classes of unit costs that are the items' `lengths` (`tokens` without groups), the
  /// longest of which the caller knows. O(n + longest / 64).
  cost_classes(std::span<const length_t> lengths, length_t longest, rank_t bins) { init(lengths, longest, bins); }
  /// The classes of a caller that sorted the units and filled the bins itself (`lpt_refined`):
  /// `distinct`, the instance's costs ascending, every one below `max_cost` and at most
  /// `max_classes` of them; `held`, `words` words per bin, bit j of bin b set when b holds a
  /// unit of class j (the cost `distinct[j]`). O(longest).
  cost_classes(std::span<const length_t> distinct, std::vector<std::uint64_t>&& held) {
    assign(distinct, distinct.back());
    held_ = std::move(held);
  }

  [[nodiscard]] bool on() const noexcept { return !value_.empty(); }
  /// The cost of class j.
  [[nodiscard]] double value(std::uint32_t j) const noexcept { return value_[j]; }
  /// Bin b now holds a unit of cost `cost` (one of the instance's unit costs).
  void add(rank_t b, double cost) noexcept {
    const std::uint32_t j = of(cost);
    held_[std::size_t{b} * words + (j >> 6)] |= std::uint64_t{1} << (j & 63);
  }
  /// Bin b holds the costs `cost_of(x)` (a double or a length, one of the instance's costs) of
  /// the elements x of `units`, ascending: one lookup per run of equal costs, the bin's set
  /// kept in registers (the first filling, one pass over every bin's sorted units).
  template <class Units, class CostOf>
  void hold(rank_t b, const Units& units, CostOf cost_of) noexcept {
    std::array<std::uint64_t, words> bits{};
    std::uint32_t last = std::numeric_limits<std::uint32_t>::max();
    for (const auto& x : units) {
      const std::uint32_t v = index(cost_of(x));
      if (v == last) continue;
      last = v;
      const std::uint32_t j = class_of_[v];
      bits[j >> 6] |= std::uint64_t{1} << (j & 63);
    }
    for (std::uint32_t w = 0; w < words; ++w) held_[std::size_t{b} * words + w] |= bits[w];
  }
  /// Bin b no longer holds any unit of cost `cost`.
  void remove(rank_t b, double cost) noexcept {
    const std::uint32_t j = of(cost);
    held_[std::size_t{b} * words + (j >> 6)] &= ~(std::uint64_t{1} << (j & 63));
  }
  /// Bin b's classes, one bit each.
  [[nodiscard]] std::span<const std::uint64_t, words> held(rank_t b) const noexcept {
    return std::span<const std::uint64_t, words>(held_.data() + std::size_t{b} * words, words);
  }

 private:
  template <class Cost>
  void init(std::span<const Cost> unit_cost, Cost costliest, rank_t bins) {
    if (unit_cost.empty() || !(costliest < max_cost)) return;
    const auto top = static_cast<std::size_t>(costliest);
    std::vector<std::uint64_t> seen(top / 64 + 1, 0);
    for (const Cost c : unit_cost) {
      const std::uint32_t v = index(c);
      seen[v >> 6] |= std::uint64_t{1} << (v & 63);
    }
    std::size_t count = 0;
    for (const std::uint64_t w : seen) count += static_cast<std::size_t>(std::popcount(w));
    if (count > max_classes) return;
    std::vector<std::uint32_t> distinct;
    distinct.reserve(count);
    for (std::size_t w = 0; w < seen.size(); ++w)
      for (std::uint64_t bits = seen[w]; bits != 0; bits &= bits - 1)
        distinct.push_back(static_cast<std::uint32_t>(64 * w + static_cast<std::size_t>(std::countr_zero(bits))));
    assign(distinct, top);
    held_.assign(std::size_t{bins} * words, 0);
  }
  // Class j is the j-th of the distinct costs (ascending, at most `max_classes`, none above `top`).
  template <class Values>
  void assign(const Values& distinct, std::size_t top) {
    class_of_.assign(top + 1, 0);
    value_.reserve(distinct.size());
    for (const auto v : distinct) {
      class_of_[v] = static_cast<std::uint8_t>(value_.size());
      value_.push_back(static_cast<double>(v));
    }
  }
  // The instance's costs are integers in [0, 2^20): the signed conversion is exact (and one
  // instruction, where the unsigned 64-bit one branches).
  [[nodiscard]] static std::uint32_t index(double cost) noexcept {
    return static_cast<std::uint32_t>(static_cast<std::int32_t>(cost));
  }
  [[nodiscard]] static std::uint32_t index(length_t cost) noexcept { return cost; }
  [[nodiscard]] std::uint32_t of(double cost) const noexcept { return class_of_[index(cost)]; }

  std::vector<double> value_;           // class → cost, ascending
  std::vector<std::uint8_t> class_of_;  // cost → class (only the instance's costs are read)
  std::vector<std::uint64_t> held_;     // bin b's classes: words b · words … b · words + 3
};

/// Which partners of one top bin h can admit an improving move or swap. A move of a unit of
/// cost a, or a swap of it with a partner's unit of cost b, lowers the top and leaves the
/// partner below the top's old load exactly when 0 < a − b < g (b = 0 for a move), g = the top's
/// load minus the partner's: so a partner admits one iff some class b it holds lies below a
/// class a of h by less than g. `build` lists, for every class b, its smallest positive gap to
/// a class of h (those below the first partner's g only); as the partners come in increasing
/// load, g only shrinks, and `admits` drops the classes whose gap it no longer exceeds.
/// Exact: a partner it rejects admits no improving step under any constraint, so `refine`
/// takes the same steps with it as without it.
class class_filter {
 public:
  /// For the top bin h and the largest gap g of the partners to come. O(classes log classes).
  void build(const cost_classes& classes, rank_t h, double g) {
    mask_.fill(0);
    by_gap_.clear();
    smallest_move_ = std::numeric_limits<double>::infinity();
    const std::span<const std::uint64_t, cost_classes::words> top = classes.held(h);
    std::uint32_t below = 0;  // classes below `below` were listed for a lower class of h
    for (std::uint32_t w = 0; w < cost_classes::words; ++w)
      for (std::uint64_t bits = top[w]; bits != 0; bits &= bits - 1) {
        const std::uint32_t a = 64 * w + static_cast<std::uint32_t>(std::countr_zero(bits));
        const double va = classes.value(a);
        if (va > 0 && smallest_move_ == std::numeric_limits<double>::infinity()) smallest_move_ = va;
        // Classes b in [below, a): a is the smallest class of h above them.
        for (std::uint32_t b = a; b-- > below;) {
          const double gap = va - classes.value(b);
          if (!(gap < g)) break;
          by_gap_.emplace_back(gap, b);
        }
        below = a;
      }
    std::sort(by_gap_.begin(), by_gap_.end());
    for (const auto& [gap, b] : by_gap_) mask_[b >> 6] |= std::uint64_t{1} << (b & 63);
    live_ = by_gap_.size();
  }

  /// Whether partner t, g below the top, may admit an improving move or swap (g no larger than
  /// at the previous call). O(1) amortised.
  [[nodiscard]] bool admits(const cost_classes& classes, rank_t t, double g) {
    if (smallest_move_ < g) return true;
    while (live_ > 0 && !(by_gap_[live_ - 1].first < g)) {
      const std::uint32_t b = by_gap_[--live_].second;
      mask_[b >> 6] &= ~(std::uint64_t{1} << (b & 63));
    }
    const std::span<const std::uint64_t, cost_classes::words> partner = classes.held(t);
    std::uint64_t common = 0;
    for (std::uint32_t w = 0; w < cost_classes::words; ++w) common |= mask_[w] & partner[w];
    return common != 0;
  }

 private:
  std::array<std::uint64_t, cost_classes::words> mask_{};  // classes whose gap is below the current g
  std::vector<std::pair<double, std::uint32_t>> by_gap_;   // (gap, class) ascending; the first live_ in mask_
  std::size_t live_ = 0;
  double smallest_move_ = 0;  // the top's cheapest unit of positive cost
};

}  // namespace mmbal::balance::detail
