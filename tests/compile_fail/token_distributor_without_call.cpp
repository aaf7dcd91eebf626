// compile-fail: token_distributor
// A would-be token distributor without d(block_workloads, ranks), given to distribute_tokens.
// Without MMBAL_COMPILE_FAIL_CONTROL the call must be rejected naming the concept; with it the
// file compiles (the control).
#include <mmbal/context/distribute.hpp>

#include <vector>

#ifdef MMBAL_COMPILE_FAIL_CONTROL
#define MMBAL_MEMBER(...) __VA_ARGS__
#define MMBAL_OTHERWISE(...)
#else
#define MMBAL_MEMBER(...)
#define MMBAL_OTHERWISE(...) __VA_ARGS__
#endif

struct user_distributor {
  MMBAL_MEMBER(std::vector<mmbal::rank_t> operator()(std::span<const std::uint64_t> w, mmbal::rank_t)
                   const { return std::vector<mmbal::rank_t>(w.size(), 0); })
};

int main() {
  const std::vector<std::uint64_t> blocks{4, 3, 2};
  (void)mmbal::distribute_tokens(blocks, 300, 128, 2, user_distributor{});
}
