// Conformance of the transport concepts: the real transports model them, and one negative
// type per requirement does not.
#include <mmbal/transport/concepts.hpp>
#include <mmbal/transport/loopback.hpp>

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <span>

namespace {

using mmbal::alltoall_plan;
using mmbal::rank_t;
using mmbal::transport::gathered_words;

// Positive: every requirement, plus the reducing and device capabilities.
struct full_transport {
  rank_t rank() const { return 0; }
  rank_t size() const { return 1; }
  gathered_words all_gather(std::span<const std::uint32_t>) { return {}; }
  void all_to_all(const alltoall_plan&, std::span<const std::byte>, std::span<std::byte>) {}
  void all_reduce_max(std::span<std::uint64_t>) {}
  void exchange_device(const alltoall_plan&, const std::byte*, std::byte*) {}
};

struct no_rank {
  rank_t size() const { return 1; }
  gathered_words all_gather(std::span<const std::uint32_t>) { return {}; }
  void all_to_all(const alltoall_plan&, std::span<const std::byte>, std::span<std::byte>) {}
};
struct rank_not_const {  // rank() must be callable on a const transport
  rank_t rank() { return 0; }
  rank_t size() const { return 1; }
  gathered_words all_gather(std::span<const std::uint32_t>) { return {}; }
  void all_to_all(const alltoall_plan&, std::span<const std::byte>, std::span<std::byte>) {}
};
struct rank_wrong_type {
  int rank() const { return 0; }
  rank_t size() const { return 1; }
  gathered_words all_gather(std::span<const std::uint32_t>) { return {}; }
  void all_to_all(const alltoall_plan&, std::span<const std::byte>, std::span<std::byte>) {}
};
struct no_size {
  rank_t rank() const { return 0; }
  gathered_words all_gather(std::span<const std::uint32_t>) { return {}; }
  void all_to_all(const alltoall_plan&, std::span<const std::byte>, std::span<std::byte>) {}
};
struct no_all_gather {
  rank_t rank() const { return 0; }
  rank_t size() const { return 1; }
  void all_to_all(const alltoall_plan&, std::span<const std::byte>, std::span<std::byte>) {}
};
struct all_gather_wrong_result {
  rank_t rank() const { return 0; }
  rank_t size() const { return 1; }
  std::vector<std::uint32_t> all_gather(std::span<const std::uint32_t>) { return {}; }
  void all_to_all(const alltoall_plan&, std::span<const std::byte>, std::span<std::byte>) {}
};
struct no_all_to_all {
  rank_t rank() const { return 0; }
  rank_t size() const { return 1; }
  gathered_words all_gather(std::span<const std::uint32_t>) { return {}; }
};
struct all_to_all_without_plan {
  rank_t rank() const { return 0; }
  rank_t size() const { return 1; }
  gathered_words all_gather(std::span<const std::uint32_t>) { return {}; }
  void all_to_all(std::span<const std::byte>, std::span<std::byte>) {}
};
struct no_reduce {  // a transport, but not a reducing one
  rank_t rank() const { return 0; }
  rank_t size() const { return 1; }
  gathered_words all_gather(std::span<const std::uint32_t>) { return {}; }
  void all_to_all(const alltoall_plan&, std::span<const std::byte>, std::span<std::byte>) {}
  void exchange_device(const alltoall_plan&, const std::byte*, std::byte*) {}
};
struct reduce_by_value {  // all_reduce_max must accept any number of values (dynamic span)
  rank_t rank() const { return 0; }
  rank_t size() const { return 1; }
  gathered_words all_gather(std::span<const std::uint32_t>) { return {}; }
  void all_to_all(const alltoall_plan&, std::span<const std::byte>, std::span<std::byte>) {}
  void all_reduce_max(std::span<std::uint64_t, 3>) {}
};
struct no_device {  // reducing, but no device exchange
  rank_t rank() const { return 0; }
  rank_t size() const { return 1; }
  gathered_words all_gather(std::span<const std::uint32_t>) { return {}; }
  void all_to_all(const alltoall_plan&, std::span<const std::byte>, std::span<std::byte>) {}
  void all_reduce_max(std::span<std::uint64_t>) {}
};

}  // namespace

TEST_CASE("transport concept: positives") {
  using namespace mmbal::transport;
  STATIC_REQUIRE(transport<full_transport>);
  STATIC_REQUIRE(reducing_transport<full_transport>);
  STATIC_REQUIRE(device_transport<full_transport>);
  STATIC_REQUIRE(transport<loopback_transport>);
  STATIC_REQUIRE(reducing_transport<loopback_transport>);
  STATIC_REQUIRE_FALSE(device_transport<loopback_transport>);
}

TEST_CASE("transport concept: one negative per requirement") {
  using namespace mmbal::transport;
  STATIC_REQUIRE_FALSE(transport<no_rank>);
  STATIC_REQUIRE_FALSE(transport<rank_not_const>);
  STATIC_REQUIRE_FALSE(transport<rank_wrong_type>);
  STATIC_REQUIRE_FALSE(transport<no_size>);
  STATIC_REQUIRE_FALSE(transport<no_all_gather>);
  STATIC_REQUIRE_FALSE(transport<all_gather_wrong_result>);
  STATIC_REQUIRE_FALSE(transport<no_all_to_all>);
  STATIC_REQUIRE_FALSE(transport<all_to_all_without_plan>);
}

TEST_CASE("capability concepts: one negative per requirement") {
  using namespace mmbal::transport;
  STATIC_REQUIRE(transport<no_reduce>);
  STATIC_REQUIRE_FALSE(reducing_transport<no_reduce>);
  STATIC_REQUIRE_FALSE(reducing_transport<reduce_by_value>);
  STATIC_REQUIRE_FALSE(reducing_transport<no_all_to_all>);  // a capability requires the base concept
  STATIC_REQUIRE(device_transport<no_reduce>);
  STATIC_REQUIRE_FALSE(device_transport<no_device>);
  STATIC_REQUIRE_FALSE(device_transport<no_all_gather>);
}
