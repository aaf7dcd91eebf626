// compile-fail: phase_partitioner
// A would-be partitioner whose call operator returns a partition (no slot order) instead of an
// assignment. Without MMBAL_COMPILE_FAIL_CONTROL phase_balancer must reject it naming the
// concept; with it (returning an assignment) the file compiles (the control).
#include <mmbal/orchestrate/policy.hpp>

#ifdef MMBAL_COMPILE_FAIL_CONTROL
#define MMBAL_MEMBER(...) __VA_ARGS__
#define MMBAL_OTHERWISE(...)
#else
#define MMBAL_MEMBER(...)
#define MMBAL_OTHERWISE(...) __VA_ARGS__
#endif

struct user_partitioner {
  template <mmbal::batch_cost C>
  auto operator()(std::span<const mmbal::length_t> w, mmbal::rank_t bins, const C&,
                  const mmbal::balance::constraints&) const {
    mmbal::partition p{bins, std::vector<mmbal::rank_t>(w.size(), 0)};
    MMBAL_MEMBER(return mmbal::assignment::from_partition(p);)
    MMBAL_OTHERWISE(return p;)
  }
};

int main() {
  const mmbal::orchestrate::phase_balancer p(user_partitioner{}, mmbal::cost::tokens{}, {false, "mine", {}});
}
