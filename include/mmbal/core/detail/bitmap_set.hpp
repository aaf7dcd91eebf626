#pragma once
/// @file
/// A set of integers in [0, universe) as a three-level bitmap (namespace mmbal::detail): the
/// bin order of `refine`'s search when every load is an integer in a narrow range
/// (balance/refine.hpp `load_order`), where a key is (load − least load) · 2^bits + bin.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace mmbal::detail {

/// A set of integers in [0, universe): bit x of level 0 is set when x is in the set, bit w of
/// level 1 when level-0 word w is not zero, bit v of level 2 when level-1 word v is not zero.
///
/// - `insert`, `erase`: O(1) (up to three words each); `successor`: O(1) word operations plus a
///   scan of level 2 (universe / 2^18 words); `max`: a scan of level 2 from its top.
/// - Memory: universe / 8 bytes (+ 1/64 of that), zeroed at construction, O(universe / 64).
/// - Inserting an element already present or erasing one that is absent is not allowed (the
///   upper levels would disagree with level 0).
class bitmap_set {
 public:
  static constexpr std::uint64_t none = ~std::uint64_t{0};

  bitmap_set() = default;
  explicit bitmap_set(std::uint64_t universe)
      : universe_(universe), l0_(words(universe), 0), l1_(words(l0_.size()), 0), l2_(words(l1_.size()), 0) {}

  void insert(std::uint64_t x) noexcept {
    const std::uint64_t w0 = x >> 6, w1 = w0 >> 6;
    const bool was_empty = l0_[w0] == 0;
    l0_[w0] |= bit(x);
    if (!was_empty) return;
    const bool was_empty1 = l1_[w1] == 0;
    l1_[w1] |= bit(w0);
    if (was_empty1) l2_[w1 >> 6] |= bit(w1);
  }

  void erase(std::uint64_t x) noexcept {
    const std::uint64_t w0 = x >> 6, w1 = w0 >> 6;
    l0_[w0] &= ~bit(x);
    if (l0_[w0] != 0) return;
    l1_[w1] &= ~bit(w0);
    if (l1_[w1] == 0) l2_[w1 >> 6] &= ~bit(w1);
  }

  /// The least element ≥ x, or `none`.
  [[nodiscard]] std::uint64_t successor(std::uint64_t x) const noexcept {
    if (x >= universe_) return none;
    std::uint64_t w0 = x >> 6;
    if (const std::uint64_t m = l0_[w0] & above(x, 0); m != 0) return (w0 << 6) | lowest(m);
    std::uint64_t w1 = w0 >> 6;
    std::uint64_t m = l1_[w1] & above(w0, 1);
    if (m == 0) {
      std::uint64_t w2 = w1 >> 6;
      m = l2_[w2] & above(w1, 1);
      while (m == 0) {
        if (++w2 >= l2_.size()) return none;
        m = l2_[w2];
      }
      w1 = (w2 << 6) | lowest(m);
      m = l1_[w1];
    }
    w0 = (w1 << 6) | lowest(m);
    return (w0 << 6) | lowest(l0_[w0]);
  }

  /// The greatest element, or `none` when the set is empty.
  [[nodiscard]] std::uint64_t max() const noexcept {
    for (std::size_t w2 = l2_.size(); w2-- > 0;)
      if (l2_[w2] != 0) {
        const std::uint64_t w1 = (std::uint64_t{w2} << 6) | highest(l2_[w2]);
        const std::uint64_t w0 = (w1 << 6) | highest(l1_[w1]);
        return (w0 << 6) | highest(l0_[w0]);
      }
    return none;
  }

 private:
  [[nodiscard]] static std::size_t words(std::uint64_t bits) noexcept {
    return static_cast<std::size_t>((bits + 63) / 64);
  }
  [[nodiscard]] static std::uint64_t bit(std::uint64_t x) noexcept { return std::uint64_t{1} << (x & 63); }
  /// The bits of x's word at positions ≥ x's (`strictly` 0) or > x's (1).
  [[nodiscard]] static std::uint64_t above(std::uint64_t x, unsigned strictly) noexcept {
    const unsigned from = static_cast<unsigned>(x & 63) + strictly;
    return from >= 64 ? 0 : ~std::uint64_t{0} << from;
  }
  [[nodiscard]] static std::uint64_t lowest(std::uint64_t m) noexcept {
    return static_cast<std::uint64_t>(std::countr_zero(m));
  }
  [[nodiscard]] static std::uint64_t highest(std::uint64_t m) noexcept {
    return static_cast<std::uint64_t>(63 - std::countl_zero(m));
  }

  std::uint64_t universe_ = 0;
  std::vector<std::uint64_t> l0_, l1_, l2_;
};

}  // namespace mmbal::detail
