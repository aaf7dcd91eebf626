// compile-fail: phase_partitioner
// A would-be partitioner without the call operator p(weights, bins, cost, constraints), handed
// to the orchestrator's type-erased phase_balancer. Without MMBAL_COMPILE_FAIL_CONTROL the
// construction must be rejected naming the concept; with it the file compiles (the control).
#include <mmbal/orchestrate/policy.hpp>

#ifdef MMBAL_COMPILE_FAIL_CONTROL
#define MMBAL_MEMBER(...) __VA_ARGS__
#define MMBAL_OTHERWISE(...)
#else
#define MMBAL_MEMBER(...)
#define MMBAL_OTHERWISE(...) __VA_ARGS__
#endif

struct user_partitioner {
  MMBAL_MEMBER(template <mmbal::batch_cost C> mmbal::assignment operator()(std::span<const mmbal::length_t> w,
                                                                           mmbal::rank_t bins, const C&,
                                                                           const mmbal::balance::constraints&) const {
    mmbal::partition p{bins, std::vector<mmbal::rank_t>(w.size(), 0)};
    return mmbal::assignment::from_partition(p);
  })
};

int main() {
  const mmbal::orchestrate::phase_balancer p(user_partitioner{}, mmbal::cost::tokens{}, {false, "mine", {}});
}
