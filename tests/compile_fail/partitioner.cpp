// Compile-fail fixture for what the orchestrator's boundary requires of a (partitioner, cost)
// pair (`phase_partitioner`, docs/DESIGN.md §4), handed to the type-erased phase_balancer.
// `user_partitioner` and `user_cost` model it; the runner compiles this file once without
// MMBAL_DROP (the control: it must compile) and once per requirement with -DMMBAL_DROP=<id>:
// the construction must then be rejected naming the concept.
#include <mmbal/orchestrate/policy.hpp>

#include <span>
#include <string>
#include <vector>

#define DROP_CALL 1        // no call operator p(weights, bins, cost, constraints)
#define DROP_ASSIGNMENT 2  // the call returns a partition (no slot order), not an assignment
#define DROP_ANY_COST 3    // the call takes only another cost type than the one it is paired with
#define DROP_COST_VALUE 4  // the user's cost has no value(state)
#ifndef MMBAL_DROP
#define MMBAL_DROP 0
#endif

struct user_cost {
  using state = double;
  [[nodiscard]] state empty() const { return 0; }
  [[nodiscard]] state add(state s, mmbal::length_t l) const { return s + l; }
#if MMBAL_DROP != DROP_COST_VALUE
  [[nodiscard]] double value(state s) const { return s; }
#endif
  [[nodiscard]] std::string name() const { return "mine"; }
};

struct user_partitioner {
#if MMBAL_DROP != DROP_CALL
#if MMBAL_DROP != DROP_ANY_COST
  template <mmbal::batch_cost C>
  auto operator()(std::span<const mmbal::length_t> w, mmbal::rank_t bins, const C&,
                  const mmbal::balance::constraints&) const {
#else
  auto operator()(std::span<const mmbal::length_t> w, mmbal::rank_t bins, const mmbal::cost::padded&,
                  const mmbal::balance::constraints&) const {
#endif
      mmbal::partition p{bins, std::vector<mmbal::rank_t>(w.size(), 0)};
#if MMBAL_DROP != DROP_ASSIGNMENT
  return mmbal::assignment::from_partition(p);
#else
    return p;
#endif
}
#endif
}
;

int main() { const mmbal::orchestrate::phase_balancer p(user_partitioner{}, user_cost{}, {false, "mine", {}}); }
