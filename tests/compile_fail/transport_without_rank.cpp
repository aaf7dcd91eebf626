// compile-fail: transport
// A would-be transport without rank(), given to a generic transport operation. Without
// MMBAL_COMPILE_FAIL_CONTROL the call must be rejected naming the concept; with it the file
// compiles (the control).
#include <mmbal/transport/concepts.hpp>

#ifdef MMBAL_COMPILE_FAIL_CONTROL
#define MMBAL_MEMBER(...) __VA_ARGS__
#define MMBAL_OTHERWISE(...)
#else
#define MMBAL_MEMBER(...)
#define MMBAL_OTHERWISE(...) __VA_ARGS__
#endif

struct user_transport {
  MMBAL_MEMBER([[nodiscard]] mmbal::rank_t rank() const { return 0; })
  [[nodiscard]] mmbal::rank_t size() const { return 1; }
  mmbal::transport::gathered_words all_gather(std::span<const std::uint32_t>) { return {}; }
  void all_to_all(const mmbal::alltoall_plan&, std::span<const std::byte>, std::span<std::byte>) {}
  void all_reduce_max(std::span<std::uint64_t>) {}
};

int main() {
  user_transport t;
  (void)mmbal::transport::gather_workload(t, mmbal::workload{});
}
