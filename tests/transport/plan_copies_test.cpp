// The host plan arithmetic shared by every transport: copy lists (what the CUDA kernel runs),
// per-peer regions (what the MPI derived datatypes describe) and plan validation, checked
// against the reference pack/unpack on many random plans.
#include "transport/random_plans.hpp"

#include <mmbal/rearrange/alltoall_plan.hpp>
#include <mmbal/rearrange/pack.hpp>
#include <mmbal/transport/plan_copies.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

using namespace mmbal::transport;
using mmbal::alltoall_plan;

namespace {

// Bytes of a buffer region list, concatenated in order.
std::vector<std::byte> gather_regions(const peer_regions& reg, mmbal::rank_t p, std::span<const std::byte> buf) {
  std::vector<std::byte> out;
  for (std::size_t k = reg.first[p]; k < reg.first[p + 1]; ++k)
    out.insert(out.end(), buf.begin() + static_cast<std::ptrdiff_t>(reg.offset[k]),
               buf.begin() + static_cast<std::ptrdiff_t>(reg.offset[k] + reg.size[k]));
  return out;
}

}  // namespace

TEST_CASE("copy lists and peer regions reproduce pack and unpack on random plans") {
  for (std::uint64_t seed = 0; seed < 60; ++seed) {
    auto g = mmbal::make_rng(seed, 1);
    const auto d = static_cast<mmbal::rank_t>(1 + mmbal::uniform_below(g, 7));
    const auto n = static_cast<std::uint32_t>(mmbal::uniform_below(g, 50));
    const auto r = mmbal_test::random_rearrangement(g, n, d);
    const auto sizes = mmbal_test::random_sizes(g, n);
    const std::uint64_t max_chunk = seed % 3 == 0 ? 7 : UINT64_MAX;
    for (mmbal::rank_t q = 0; q < d; ++q) {
      const alltoall_plan plan = mmbal::make_alltoall_plan(r, sizes, q);
      REQUIRE_NOTHROW(validate_peer_layout(plan));
      const auto input = mmbal_test::layout_buffer(r.source, sizes, q, seed);
      REQUIRE(input.size() == plan.input_bytes);

      std::vector<std::byte> ref_send(plan.send_bytes), send(plan.send_bytes);
      mmbal::pack(plan, input, ref_send);
      const copy_list pc = pack_copies(plan, max_chunk);
      apply_copies(pc, input, send);
      CHECK(send == ref_send);
      CHECK(pc.bytes() == plan.send_bytes);
      for (std::uint64_t s : pc.size) {
        CHECK(s > 0);
        CHECK(s <= max_chunk);
      }

      // The received bytes: a random buffer of the right size is enough to compare unpacks.
      std::vector<std::byte> recv(plan.recv_bytes);
      for (std::size_t k = 0; k < recv.size(); ++k) recv[k] = mmbal_test::payload_byte(seed + 99, q, k);
      std::vector<std::byte> ref_out(plan.output_bytes), out(plan.output_bytes);
      mmbal::unpack(plan, recv, ref_out);
      const copy_list uc = unpack_copies(plan, max_chunk);
      apply_copies(uc, recv, out);
      CHECK(out == ref_out);
      CHECK(uc.bytes() == plan.recv_bytes);

      // Per-peer regions of the unpacked buffers carry exactly each peer's packed part.
      const peer_regions sr = send_regions(plan);
      const peer_regions rr = recv_regions(plan);
      REQUIRE(sr.first.size() == d + 1u);
      REQUIRE(rr.first.size() == d + 1u);
      for (mmbal::rank_t p = 0; p < d; ++p) {
        const auto part = std::span<const std::byte>(ref_send).subspan(plan.send_displs[p], plan.send_counts[p]);
        CHECK(gather_regions(sr, p, input) == std::vector<std::byte>(part.begin(), part.end()));
        const auto rpart = std::span<const std::byte>(recv).subspan(plan.recv_displs[p], plan.recv_counts[p]);
        CHECK(gather_regions(rr, p, ref_out) == std::vector<std::byte>(rpart.begin(), rpart.end()));
        for (std::size_t k = sr.first[p]; k < sr.first[p + 1]; ++k) CHECK(sr.size[k] > 0);
      }

      // item_peers: per peer, the items' sizes add up to the counts, peers never decrease,
      // and the peers of the nonzero items match an independent reference built from the
      // rearrangement (destination rank of each packed item, source rank of each received one).
      const auto to = item_peers(plan.send_counts, plan.pack_sizes);
      const auto from = item_peers(plan.recv_counts, plan.unpack_sizes);
      std::vector<std::uint64_t> sent(d, 0), got(d, 0);
      for (std::size_t k = 0; k < to.size(); ++k) sent[to[k]] += plan.pack_sizes[k];
      for (std::size_t k = 0; k < from.size(); ++k) got[from[k]] += plan.unpack_sizes[k];
      CHECK(sent == plan.send_counts);
      CHECK(got == plan.recv_counts);
      CHECK(std::is_sorted(to.begin(), to.end()));
      CHECK(std::is_sorted(from.begin(), from.end()));
      std::vector<mmbal::rank_t> ref_to, ref_from;  // items in pack / unpack order, nonzero only
      for (std::uint32_t slot : plan.pack_slots)
        for (std::size_t i = 0; i < r.size(); ++i)
          if (r.source[i] == mmbal::location{q, slot} && sizes[i] > 0) ref_to.push_back(r.destination[i].rank);
      for (std::uint32_t slot : plan.unpack_slots)
        for (std::size_t i = 0; i < r.size(); ++i)
          if (r.destination[i] == mmbal::location{q, slot} && sizes[i] > 0) ref_from.push_back(r.source[i].rank);
      std::vector<mmbal::rank_t> nz_to, nz_from;
      for (std::size_t k = 0; k < to.size(); ++k)
        if (plan.pack_sizes[k] > 0) nz_to.push_back(to[k]);
      for (std::size_t k = 0; k < from.size(); ++k)
        if (plan.unpack_sizes[k] > 0) nz_from.push_back(from[k]);
      CHECK(nz_to == ref_to);
      CHECK(nz_from == ref_from);
    }
  }
}

TEST_CASE("adjacent items merge into one copy and one region") {
  // Three items on rank 0, all to rank 1 in the same order: one contiguous run.
  mmbal::rearrangement r{2, {{0, 0}, {0, 1}, {0, 2}}, {{1, 0}, {1, 1}, {1, 2}}};
  const std::vector<std::uint64_t> sizes{5, 0, 9};
  const auto p0 = mmbal::make_alltoall_plan(r, sizes, 0);
  const auto pc = pack_copies(p0);
  REQUIRE(pc.count() == 1);
  CHECK(pc.src[0] == 0);
  CHECK(pc.dst[0] == 0);
  CHECK(pc.size[0] == 14);
  const auto sr = send_regions(p0);
  CHECK(sr.regions(0) == 0);
  REQUIRE(sr.regions(1) == 1);
  CHECK(sr.size[0] == 14);
  // Reversed destination order: the pack order is 2, 1, 0 and nothing is adjacent.
  r.destination = {{1, 2}, {1, 1}, {1, 0}};
  const auto q0 = mmbal::make_alltoall_plan(r, sizes, 0);
  const auto qc = pack_copies(q0);
  REQUIRE(qc.count() == 2);  // the zero-byte item makes no copy
  CHECK(qc.src == std::vector<std::uint64_t>{5, 0});
  CHECK(qc.dst == std::vector<std::uint64_t>{0, 9});
  CHECK(qc.size == std::vector<std::uint64_t>{9, 5});
}

TEST_CASE("validate_peer_layout rejects inconsistent plans") {
  auto g = mmbal::make_rng(7);
  const auto r = mmbal_test::random_rearrangement(g, 40, 4, 0.0);
  std::vector<std::uint64_t> sizes(40, 3);
  const alltoall_plan good = mmbal::make_alltoall_plan(r, sizes, 1);
  REQUIRE_NOTHROW(validate_peer_layout(good));
  auto bad = good;
  bad.send_displs[2] += 1;
  CHECK_THROWS_AS(validate_peer_layout(bad), mmbal::invalid_input);
  bad = good;
  bad.recv_counts[0] += 1;
  CHECK_THROWS_AS(validate_peer_layout(bad), mmbal::invalid_input);
  bad = good;
  bad.send_counts.pop_back();
  CHECK_THROWS_AS(validate_peer_layout(bad), mmbal::invalid_input);
  bad = good;
  REQUIRE(!bad.pack_offsets.empty());
  bad.pack_offsets[0] = bad.input_bytes;  // item leaves the input buffer
  CHECK_THROWS_AS(validate_peer_layout(bad), mmbal::invalid_input);
  bad = good;
  REQUIRE(!bad.unpack_sizes.empty());
  bad.unpack_sizes.pop_back();
  CHECK_THROWS_AS(validate_peer_layout(bad), mmbal::invalid_input);
  bad = good;
  bad.rank = 4;
  CHECK_THROWS_AS(validate_peer_layout(bad), mmbal::invalid_input);
  CHECK_THROWS_AS(check_buffers(good, good.input_bytes + 1, good.output_bytes), mmbal::invalid_input);
  CHECK_NOTHROW(check_buffers(good, good.input_bytes, good.output_bytes));
  CHECK_THROWS_AS(pack_copies(good, 0), mmbal::invalid_input);
  // An item larger than what is left of the last peer's range does not fit anywhere.
  const std::vector<std::uint64_t> counts{4, 0, 3}, item_sizes{4, 0, 2, 2};
  CHECK_THROWS_AS(item_peers(counts, item_sizes), mmbal::invalid_input);
  CHECK(item_peers(counts, std::vector<std::uint64_t>{4, 0, 3}) == std::vector<mmbal::rank_t>{0, 2, 2});
  std::vector<std::byte> small(1);
  std::vector<std::byte> big(good.send_bytes);
  CHECK_THROWS_AS(apply_copies(pack_copies(good), small, big), mmbal::invalid_input);
}
