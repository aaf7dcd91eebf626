// Compile-fail fixture for the `partitioner` concept (docs/DESIGN.md §4), handed to the
// orchestrator's type-erased any_partitioner. `user_partitioner` models it; the runner compiles
// this file once without MMBAL_DROP (the control: it must compile) and once per requirement with
// -DMMBAL_DROP=<id>: the construction must then be rejected naming the concept.
#include <mmbal/orchestrate/policy.hpp>

#include <span>
#include <vector>

#define DROP_CALL 1        // no call operator p(weights, bins, cost, constraints)
#define DROP_ASSIGNMENT 2  // the call returns a partition (no slot order), not an assignment
#ifndef MMBAL_DROP
#define MMBAL_DROP 0
#endif

struct user_partitioner {
#if MMBAL_DROP != DROP_CALL
  template <mmbal::batch_cost C>
  auto operator()(std::span<const mmbal::length_t> w, mmbal::rank_t bins, const C&,
                  const mmbal::balance::constraints&) const {
    mmbal::partition p{bins, std::vector<mmbal::rank_t>(w.size(), 0)};
#if MMBAL_DROP != DROP_ASSIGNMENT
    return mmbal::assignment::from_partition(p);
#else
    return p;
#endif
  }
#endif
};

int main() { const mmbal::orchestrate::any_partitioner p("mine", user_partitioner{}); }
