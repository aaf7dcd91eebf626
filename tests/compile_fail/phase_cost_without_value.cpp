// compile-fail: batch_cost
// A user's cost without `value(state)`, handed to the orchestrator's phase_balancer with lpt.
// Without MMBAL_COMPILE_FAIL_CONTROL the construction must be rejected naming the concept;
// with it the file compiles (the control).
#include <mmbal/orchestrate/policy.hpp>

#include <string>

#ifdef MMBAL_COMPILE_FAIL_CONTROL
#define MMBAL_MEMBER(...) __VA_ARGS__
#else
#define MMBAL_MEMBER(...)
#endif

struct user_cost {
  using state = double;
  [[nodiscard]] state empty() const { return 0; }
  [[nodiscard]] state add(state s, mmbal::length_t l) const { return s + l; }
  MMBAL_MEMBER([[nodiscard]] double value(state s) const { return s; })
  [[nodiscard]] std::string name() const { return "mine"; }
};

int main() { const mmbal::orchestrate::phase_balancer p(mmbal::balance::lpt{}, user_cost{}); }
