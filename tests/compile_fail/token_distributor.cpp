// Compile-fail fixture for the `token_distributor` concept (docs/DESIGN.md §4), given to
// distribute_tokens. `user_distributor` models it; the runner compiles this file once without
// MMBAL_DROP (the control: it must compile) and once with -DMMBAL_DROP=DROP_CALL: the call must
// then be rejected naming the concept.
#include <mmbal/context/distribute.hpp>

#include <cstdint>
#include <span>
#include <vector>

#define DROP_CALL 1  // no call operator d(block_workloads, ranks)
#ifndef MMBAL_DROP
#define MMBAL_DROP 0
#endif

struct user_distributor {
#if MMBAL_DROP != DROP_CALL
  std::vector<mmbal::rank_t> operator()(std::span<const std::uint64_t> w, mmbal::rank_t) const {
    return std::vector<mmbal::rank_t>(w.size(), 0);
  }
#endif
};

int main() {
  const std::vector<std::uint64_t> blocks{4, 3, 2};
  (void)mmbal::distribute_tokens(blocks, 300, 128, 2, user_distributor{});
}
