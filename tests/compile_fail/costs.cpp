// Compile-fail fixture for the cost concepts `batch_cost`, `additive_cost` and `padded_cost`
// (docs/DESIGN.md §4). `user_cost` models all three; the runner compiles this file once without
// MMBAL_DROP (the control: it must compile) and once per requirement with -DMMBAL_DROP=<id>,
// which removes exactly that member: the compiler must then reject the calls below and name the
// concept. lpt needs a batch_cost, karmarkar_karp an additive_cost, padded_binary_search a
// padded_cost, so each drop breaks the concepts that need the member and no other.
#include <mmbal/balance/karmarkar_karp.hpp>
#include <mmbal/balance/lpt.hpp>
#include <mmbal/balance/padded_binary_search.hpp>
#include <mmbal/core/concepts.hpp>

#include <cstdint>
#include <vector>

#define DROP_STATE 1         // batch_cost: the `state` type
#define DROP_EMPTY 2         // batch_cost: empty()
#define DROP_ADD 3           // batch_cost: add(state, length)
#define DROP_VALUE 4         // batch_cost: value(state)
#define DROP_STATE_EQUAL 5   // batch_cost: state is std::regular (operator==)
#define DROP_ITEM 6          // additive_cost: item(length)
#define DROP_PADDED_VALUE 7  // padded_cost: padded_value(count, max)
#ifndef MMBAL_DROP
#define MMBAL_DROP 0
#endif

struct user_cost {
  struct sum {
    double total = 0;
#if MMBAL_DROP != DROP_STATE_EQUAL
    friend bool operator==(const sum&, const sum&) = default;
#endif
  };
#if MMBAL_DROP != DROP_STATE
  using state = sum;
#endif
#if MMBAL_DROP != DROP_EMPTY
  [[nodiscard]] sum empty() const { return {}; }
#endif
#if MMBAL_DROP != DROP_ADD
  [[nodiscard]] sum add(sum s, mmbal::length_t l) const { return sum{s.total + l}; }
#endif
#if MMBAL_DROP != DROP_VALUE
  [[nodiscard]] double value(sum s) const { return s.total; }
#endif
#if MMBAL_DROP != DROP_ITEM
  [[nodiscard]] double item(mmbal::length_t l) const { return l; }
#endif
#if MMBAL_DROP != DROP_PADDED_VALUE
  [[nodiscard]] double padded_value(std::uint64_t n, mmbal::length_t m) const { return double(n) * m; }
#endif
};

int main() {
  const std::vector<mmbal::length_t> w{3, 1, 2};
  (void)mmbal::balance::lpt{}(w, 2, user_cost{});
  (void)mmbal::balance::karmarkar_karp{}(w, 2, user_cost{});
  (void)mmbal::balance::padded_binary_search{}(w, 2, user_cost{});
}
