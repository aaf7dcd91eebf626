// compile-fail: batch_cost
// A cost whose state has no operator== (not std::regular). Without MMBAL_COMPILE_FAIL_CONTROL the member is missing and
// the call below must be rejected naming the concept; with it the same file compiles (the control).
#include <mmbal/balance/karmarkar_karp.hpp>
#include <mmbal/balance/lpt.hpp>
#include <mmbal/balance/padded_binary_search.hpp>
#include <mmbal/core/concepts.hpp>

#include <vector>

#ifdef MMBAL_COMPILE_FAIL_CONTROL
#define MMBAL_MEMBER(...) __VA_ARGS__
#else
#define MMBAL_MEMBER(...)
#endif

struct user_cost {
  struct state {
    double sum = 0;
    MMBAL_MEMBER(friend bool operator==(const state&, const state&) = default;)
  };
  [[nodiscard]] state empty() const { return {}; }
  [[nodiscard]] state add(state s, mmbal::length_t l) const { return state{s.sum + l}; }
  [[nodiscard]] double value(state s) const { return s.sum; }
};

int main() {
  const std::vector<mmbal::length_t> w{3, 1, 2};
  (void)mmbal::balance::lpt{}(w, 2, user_cost{});
}
