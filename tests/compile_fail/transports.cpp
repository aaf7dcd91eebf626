// Compile-fail fixture for the transport concepts `transport` and `reducing_transport`
// (docs/DESIGN.md §4). `user_transport` models both; the runner compiles this file once without
// MMBAL_DROP (the control: it must compile) and once per requirement with -DMMBAL_DROP=<id>,
// which removes exactly that member: the compiler must then reject the calls below and name the
// concept. gather_workload needs a transport, check_agreement a reducing_transport.
#include <mmbal/transport/concepts.hpp>

#include <cstddef>
#include <cstdint>
#include <span>

#define DROP_RANK 1            // transport: rank()
#define DROP_SIZE 2            // transport: size()
#define DROP_ALL_GATHER 3      // transport: all_gather(words)
#define DROP_ALL_TO_ALL 4      // transport: all_to_all(plan, send, recv)
#define DROP_ALL_REDUCE_MAX 5  // reducing_transport: all_reduce_max(values)
#ifndef MMBAL_DROP
#define MMBAL_DROP 0
#endif

struct user_transport {
#if MMBAL_DROP != DROP_RANK
  [[nodiscard]] mmbal::rank_t rank() const { return 0; }
#endif
#if MMBAL_DROP != DROP_SIZE
  [[nodiscard]] mmbal::rank_t size() const { return 1; }
#endif
#if MMBAL_DROP != DROP_ALL_GATHER
  mmbal::transport::gathered_words all_gather(std::span<const std::uint32_t>) { return {}; }
#endif
#if MMBAL_DROP != DROP_ALL_TO_ALL
  void all_to_all(const mmbal::alltoall_plan&, std::span<const std::byte>, std::span<std::byte>) {}
#endif
#if MMBAL_DROP != DROP_ALL_REDUCE_MAX
  void all_reduce_max(std::span<std::uint64_t>) {}
#endif
};

int main() {
  user_transport t;
  (void)mmbal::transport::gather_workload(t, mmbal::workload{});
  mmbal::transport::check_agreement(t, 42);
}
