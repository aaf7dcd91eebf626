// MPI transport tests, run under mpiexec (ctest: 4 and 3 ranks). Every payload byte is a pure
// function of (seed, item, byte index) and every plan a pure function of (seed, ranks), so each
// rank verifies what it receives without further communication. Catch2 with a custom main
// that initializes MPI; all ranks run the same test cases in the same order.
#define CATCH_CONFIG_RUNNER
#include "transport/random_plans.hpp"

#include <mmbal/core/rng.hpp>
#include <mmbal/rearrange/alltoall_plan.hpp>
#include <mmbal/rearrange/pack.hpp>
#include <mmbal/transport/concepts.hpp>
#include <mmbal/transport/mpi.hpp>

#include <mpi.h>
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

using namespace mmbal::transport;
using mmbal::rank_t;

namespace {

// A rank's local samples, a pure function of (seed, rank): any rank can regenerate any other's.
mmbal::workload local_samples(std::uint64_t seed, rank_t rank) {
  auto g = mmbal::make_rng(seed, rank, 77);
  mmbal::workload w;
  const auto image = w.intern_modality("image");
  const auto audio = w.intern_modality("audio");
  const auto n = mmbal::uniform_below(g, 2 + rank);  // rank 0 may hold nothing
  for (std::uint64_t i = 0; i < n; ++i) {
    mmbal::sample s;
    s.id = 1000 * rank + i;
    if (i % 3 == 0) s.group = mmbal::uniform_below(g, 1u << 20);
    const auto segs = 1 + mmbal::uniform_below(g, 5);
    for (std::uint64_t k = 0; k < segs; ++k) {
      const mmbal::modality_id m = k % 2 == 0 ? mmbal::text_modality : (mmbal::uniform01(g) < 0.5 ? image : audio);
      const auto len = static_cast<mmbal::length_t>(1 + mmbal::uniform_below(g, 600));
      s.segments.push_back({m, len, m == mmbal::text_modality ? len : 4 * len});
    }
    w.samples.push_back(s);
  }
  return w;
}

/// Runs `execute` on every rank, each expecting `runtime_failure` containing `message`;
/// returns how many ranks threw it (all of them, or the plan check let a rank through).
int ranks_that_disagreed(mpi_transport& t, const mmbal::rearrangement& r, const std::vector<std::uint64_t>& sizes,
                         const std::string& message) {
  const auto plan = mmbal::make_alltoall_plan(r, sizes, t.rank());
  std::vector<std::byte> in(plan.input_bytes), out(plan.output_bytes);
  int threw = 0;
  try {
    execute(t, r, sizes, in, out);
  } catch (const mmbal::runtime_failure& e) {
    threw = 1;
    CHECK_THAT(e.what(), Catch::Contains(message));
  }
  CHECK(threw == 1);
  int all = 0;
  MPI_Allreduce(&threw, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  return all;
}

}  // namespace

TEST_CASE("mpi: rank, size and a duplicated communicator") {
  mpi_transport t;
  int r = 0;
  int n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  CHECK(t.rank() == static_cast<rank_t>(r));
  CHECK(t.size() == static_cast<rank_t>(n));
  int cmp = MPI_UNEQUAL;
  MPI_Comm_compare(t.comm(), MPI_COMM_WORLD, &cmp);
  CHECK(cmp == MPI_CONGRUENT);  // a duplicate, not the caller's communicator
  mpi_transport moved = std::move(t);
  CHECK(moved.size() == static_cast<rank_t>(n));
}

TEST_CASE("mpi: byte-exact delivery forward and backward, both methods, random plans") {
  mpi_transport t;
  const rank_t d = t.size();
  for (std::uint64_t seed = 0; seed < 24; ++seed) {
    auto g = mmbal::make_rng(seed, 5);
    const auto n = static_cast<std::uint32_t>(mmbal::uniform_below(g, 120));
    const auto r = mmbal_test::random_rearrangement(g, n, d, seed % 4 == 0 ? 0.5 : 0.2);
    const auto sizes = mmbal_test::random_sizes(g, n, seed % 2 ? 40.0 : 3000.0);
    t.set_method(seed % 3 == 0 ? mpi_method::alltoallv : (seed % 3 == 1 ? mpi_method::alltoallw : mpi_method::p2p));
    const auto in = mmbal_test::layout_buffer(r.source, sizes, t.rank(), seed);
    const auto expected = mmbal_test::layout_buffer(r.destination, sizes, t.rank(), seed);
    std::vector<std::byte> out(expected.size(), std::byte{0xEE});
    const auto plan = execute(t, r, sizes, in, out);
    CHECK(plan.output_bytes == expected.size());
    CHECK(out == expected);
    std::vector<std::byte> back(in.size(), std::byte{0xEE});
    execute(t, r.inverse(), sizes, out, back);
    CHECK(back == in);
  }
}

TEST_CASE("mpi: large items travel in several p2p messages; every method gives the same bytes") {
  mpi_transport t;
  // A few items above the 2^30-byte message limit would need > 1 GiB per rank; instead check
  // that items of very different sizes (0 B .. 1 MiB) agree across the three methods.
  auto g = mmbal::make_rng(77, 7);
  const auto r = mmbal_test::random_rearrangement(g, 40, t.size(), 0.1);
  auto sizes = mmbal_test::random_sizes(g, 40, 20000.0);
  sizes[0] = 1 << 20;
  const auto in = mmbal_test::layout_buffer(r.source, sizes, t.rank(), 77);
  const auto expected = mmbal_test::layout_buffer(r.destination, sizes, t.rank(), 77);
  for (const mpi_method method : {mpi_method::alltoallv, mpi_method::alltoallw, mpi_method::p2p}) {
    t.set_method(method);
    std::vector<std::byte> out(expected.size());
    execute(t, r, sizes, in, out);
    CHECK(out == expected);
  }
}

TEST_CASE("mpi: p2p delivers the same bytes for every small-item coalescing threshold, alltoallv too") {
  // Thresholds from "every item its own message" (0) to "all items packed per peer" (above
  // the largest item), with zero-size items and plans that keep many items on their rank.
  mpi_transport t;
  for (std::uint64_t seed = 0; seed < 6; ++seed) {
    auto g = mmbal::make_rng(seed, 11);
    const auto n = static_cast<std::uint32_t>(1 + mmbal::uniform_below(g, 150));
    const auto r = mmbal_test::random_rearrangement(g, n, t.size(), seed % 2 ? 0.6 : 0.1);
    auto sizes = mmbal_test::random_sizes(g, n, 2000.0);
    sizes[0] = 0;
    const auto in = mmbal_test::layout_buffer(r.source, sizes, t.rank(), seed);
    const auto expected = mmbal_test::layout_buffer(r.destination, sizes, t.rank(), seed);
    t.set_method(mpi_method::p2p);
    for (const std::uint64_t below :
         {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{500}, std::uint64_t{2000}, std::uint64_t{1} << 40}) {
      INFO("seed " << seed << " coalesce below " << below);
      t.set_p2p_coalesce_below(below);
      std::vector<std::byte> out(expected.size(), std::byte{0xEE});
      execute(t, r, sizes, in, out);
      CHECK(out == expected);
      std::vector<std::byte> back(in.size(), std::byte{0xEE});
      execute(t, r.inverse(), sizes, out, back);
      CHECK(back == in);
    }
    t.set_p2p_coalesce_below(mmbal::transport::mpi_options{}.p2p_coalesce_below);
    // alltoallv on the same plans: kept items bypass the staging buffers.
    t.set_method(mpi_method::alltoallv);
    std::vector<std::byte> out(expected.size(), std::byte{0xEE});
    execute(t, r, sizes, in, out);
    CHECK(out == expected);
  }
}

TEST_CASE("mpi: the packed exchanges (Alltoallv and the region-type Alltoallw) agree") {
  mpi_transport t;
  auto g = mmbal::make_rng(42, 6);
  const auto r = mmbal_test::random_rearrangement(g, 200, t.size(), 0.2);
  const auto sizes = mmbal_test::random_sizes(g, 200);
  const auto plan = mmbal::make_alltoall_plan(r, sizes, t.rank());
  const auto in = mmbal_test::layout_buffer(r.source, sizes, t.rank(), 42);
  std::vector<std::byte> send(plan.send_bytes), recv_v(plan.recv_bytes), recv_w(plan.recv_bytes);
  mmbal::pack(plan, in, send);
  t.exchange_packed(plan, send, recv_v);
  t.exchange_packed_w(plan, send, recv_w);
  CHECK(recv_v == recv_w);
  std::vector<std::byte> out(plan.output_bytes);
  mmbal::unpack(plan, recv_w, out);
  CHECK(out == mmbal_test::layout_buffer(r.destination, sizes, t.rank(), 42));
}

TEST_CASE("mpi: metadata all-gather gives every rank the global workload") {
  mpi_transport t;
  for (std::uint64_t seed = 0; seed < 5; ++seed) {
    const auto global = gather_workload(t, local_samples(seed, t.rank()));
    std::size_t k = 0;
    for (rank_t q = 0; q < t.size(); ++q)
      for (const auto& s : local_samples(seed, q).samples) {
        REQUIRE(k < global.samples.size());
        const auto& m = global.samples[k++];
        CHECK(m.rank == q);
        CHECK(m.id == s.id);
        CHECK(m.group == s.group);
        CHECK(m.segments == s.segments);  // same modality table on every rank
      }
    CHECK(k == global.samples.size());
    // Uneven raw gather including empty contributions.
    const std::vector<std::uint32_t> mine(t.rank() % 2 == 0 ? 0 : t.rank() + 1, t.rank());
    const auto all = t.all_gather(mine);
    for (rank_t q = 0; q < t.size(); ++q) {
      const auto block = all.of(q);
      CHECK(block.size() == (q % 2 == 0 ? 0u : q + 1u));
      for (auto w : block) CHECK(w == q);
    }
  }
}

TEST_CASE("mpi: one rank's altered metadata makes every rank throw, none hangs") {
  mpi_transport t;
  for (const mpi_method method : {mpi_method::alltoallv, mpi_method::alltoallw, mpi_method::p2p}) {
    t.set_method(method);
    for (rank_t culprit : {rank_t{0}, static_cast<rank_t>(t.size() - 1)}) {
      auto global = gather_workload(t, local_samples(3, t.rank()));
      REQUIRE(!global.samples.empty());
      if (t.rank() == culprit) global.samples.back().segments.front().llm_tokens += 1;  // diverged metadata
      // A plan from the metadata: every sample moves to rank (id mod size), slots by id.
      const auto items = mmbal::llm_phase_items(global);
      mmbal::partition target{t.size(), {}};
      std::vector<std::uint64_t> sizes;
      for (std::size_t i = 0; i < items.size(); ++i) {
        target.bin_of.push_back(static_cast<rank_t>(global.samples[i].id % t.size()));
        sizes.push_back(items.weights[i]);
      }
      const auto r = mmbal::rearrangement::from_origin(items.origin, mmbal::assignment::from_partition(target));
      CHECK(ranks_that_disagreed(t, r, sizes, "disagree") == static_cast<int>(t.size()));
    }
  }
}

TEST_CASE("mpi: a wrong buffer on one rank throws on every rank through execute") {
  mpi_transport t;
  auto g = mmbal::make_rng(8);
  const auto r = mmbal_test::random_rearrangement(g, 50, t.size(), 0.0);
  const std::vector<std::uint64_t> sizes(50, 16);
  const auto plan = mmbal::make_alltoall_plan(r, sizes, t.rank());
  const bool culprit = t.rank() == 1 % t.size();
  std::vector<std::byte> in(plan.input_bytes), out(plan.output_bytes + (culprit ? 1 : 0));
  int threw = 0;
  try {
    execute(t, r, sizes, in, out);
  } catch (const mmbal::invalid_input& e) {  // the rank with the wrong buffer names it
    threw = culprit ? 1 : 0;
    CHECK_THAT(e.what(), Catch::Contains("buffers of"));
  } catch (const mmbal::runtime_failure& e) {
    threw = culprit ? 0 : 1;
    CHECK_THAT(e.what(), Catch::Contains("another rank's plan or buffers are invalid"));
  }
  int all = 0;
  MPI_Allreduce(&threw, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  CHECK(all == static_cast<int>(t.size()));
}

namespace {

/// Runs `call` on every rank; returns how many ranks threw: the culprit `invalid_input`
/// containing `message`, every other rank `runtime_failure` (none may hang or pass).
template <class F>
int ranks_that_threw(rank_t culprit, rank_t me, const std::string& message, F call) {
  int threw = 0;
  try {
    call();
  } catch (const mmbal::invalid_input& e) {
    threw = me == culprit ? 1 : 0;
    CHECK_THAT(e.what(), Catch::Contains(message));
  } catch (const mmbal::runtime_failure& e) {
    threw = me == culprit ? 0 : 1;
    INFO(e.what());
  }
  int all = 0;
  MPI_Allreduce(&threw, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  return all;
}

}  // namespace

TEST_CASE("mpi: input invalid on one rank only throws there and on every other rank, none hangs") {
  // Each failed on the culprit before the collective check, and the others waited in it.
  mpi_transport t;
  // every item moves to the next rank: each rank sends and receives
  mmbal::rearrangement r{t.size(), {}, {}};
  for (std::uint32_t i = 0; i < 4 * t.size(); ++i) {
    r.source.push_back({i % t.size(), i / t.size()});
    r.destination.push_back({(i + 1) % t.size(), i / t.size()});
  }
  const std::vector<std::uint64_t> sizes(r.size(), 8);
  const auto plan = mmbal::make_alltoall_plan(r, sizes, t.rank());
  std::vector<std::byte> in(plan.input_bytes), out(plan.output_bytes);
  const rank_t culprit = t.size() - 1, me = t.rank();
  const auto one_rank = [&](const auto& bad, const auto& good) { return me == culprit ? bad : good; };
  const mmbal::rearrangement wider{t.size() + 1, r.source, r.destination};
  CHECK(ranks_that_threw(culprit, me, "on a transport of", [&] { execute(t, one_rank(wider, r), sizes, in, out); }) ==
        static_cast<int>(t.size()));
  std::vector<std::uint64_t> more = sizes;
  more.push_back(8);
  CHECK(ranks_that_threw(culprit, me, "", [&] { execute(t, r, one_rank(more, sizes), in, out); }) ==
        static_cast<int>(t.size()));
  mmbal::rearrangement twice = r;
  twice.source[1] = twice.source[0];
  CHECK(ranks_that_threw(culprit, me, "", [&] { execute(t, one_rank(twice, r), sizes, in, out); }) ==
        static_cast<int>(t.size()));
  // send and receive in one buffer: delivered bytes were wrong, without an error
  std::vector<std::byte> both(plan.input_bytes + 1);
  const std::span<const std::byte> send_part(both.data(), plan.input_bytes);
  const std::span<std::byte> recv_part(both.data() + 1, plan.output_bytes);
  CHECK(ranks_that_threw(culprit, me, "overlap", [&] {
          execute(t, r, sizes, me == culprit ? send_part : std::span<const std::byte>(in),
                  me == culprit ? recv_part : std::span<std::byte>(out));
        }) == static_cast<int>(t.size()));
  // Called directly: exchange_packed and all_to_all_v report a bad buffer into their
  // collective (the others waited in it); every method refuses one buffer for both sides
  // (wrong bytes before).
  std::vector<std::byte> packed_in(plan.send_bytes), packed_out(plan.recv_bytes - (me == culprit ? 1 : 0));
  CHECK(ranks_that_threw(culprit, me, "packed buffers of", [&] { t.exchange_packed(plan, packed_in, packed_out); }) ==
        static_cast<int>(t.size()));
  std::vector<std::byte> short_out(plan.output_bytes - (me == culprit ? 1 : 0));
  CHECK(ranks_that_threw(culprit, me, "buffers of", [&] { t.all_to_all_v(plan, in, short_out); }) ==
        static_cast<int>(t.size()));
  std::vector<std::byte> one(std::max(plan.send_bytes, plan.recv_bytes) +
                             std::max(plan.input_bytes, plan.output_bytes));
  CHECK_THROWS_WITH(t.all_to_all_w(plan, std::span<const std::byte>(one.data(), plan.input_bytes),
                                   std::span<std::byte>(one.data(), plan.output_bytes)),
                    Catch::Contains("overlap"));
  CHECK_THROWS_WITH(t.all_to_all_p2p(plan, std::span<const std::byte>(one.data(), plan.input_bytes),
                                     std::span<std::byte>(one.data() + 1, plan.output_bytes)),
                    Catch::Contains("overlap"));
  CHECK(ranks_that_threw(culprit, me, "overlap", [&] {
          t.exchange_packed(plan, std::span<const std::byte>(one.data(), plan.send_bytes),
                            me == culprit ? std::span<std::byte>(one.data(), plan.recv_bytes)
                                          : std::span<std::byte>(packed_out.data(), plan.recv_bytes));
        }) == static_cast<int>(t.size()));
  // one rank's samples name a modality its workload lacks: it cannot serialize them
  mmbal::workload local = local_samples(4, me);
  if (me == culprit) local.samples.push_back(mmbal::sample{7, me, {}, {{mmbal::modality_id{9}, 3, 3}}});
  CHECK(ranks_that_threw(culprit, me, "modality id 9", [&] { (void)gather_workload(t, local); }) ==
        static_cast<int>(t.size()));
  // still in step
  const mmbal::workload global = gather_workload(t, local_samples(4, me));
  CHECK(global.samples.size() >= local_samples(4, me).samples.size());
}

TEST_CASE("mpi: a setting that differs on one rank throws on every rank, none corrupts or hangs") {
  // p2p_coalesce_below differing delivered wrong bytes; the method differing hung.
  auto g = mmbal::make_rng(10);
  const rank_t d = [] {
    int n = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    return static_cast<rank_t>(n);
  }();
  const auto r = mmbal_test::random_rearrangement(g, 30, d, 0.0);
  const std::vector<std::uint64_t> sizes(30, 300);
  for (int setting = 0; setting < 2; ++setting) {
    mpi_transport t;
    const bool culprit = t.rank() == 0;
    if (culprit && setting == 0) t.set_p2p_coalesce_below(0);
    if (culprit && setting == 1) t.set_method(mpi_method::alltoallw);
    CHECK(ranks_that_disagreed(t, r, sizes, "transport's settings") == static_cast<int>(t.size()));
  }
}

TEST_CASE("mpi: a moved-from transport and MPI_COMM_NULL are invalid_input, not an MPI abort") {
  CHECK_THROWS_WITH(mpi_transport(MPI_COMM_NULL), Catch::Contains("MPI_COMM_NULL"));
  mpi_transport a;
  mpi_transport b = std::move(a);
  CHECK_THROWS_WITH(a.barrier(), Catch::Contains("used after it was moved from"));
  CHECK_THROWS_AS(a.all_gather({}), mmbal::invalid_input);
  b.barrier();
}

TEST_CASE("mpi: MPI errors become runtime_failure with the call, file and MPI message") {
  mpi_transport t;
  int dummy = 0;
  try {
    MMBAL_MPI_CHECK(MPI_Send(&dummy, 1, MPI_INT, static_cast<int>(t.size()) + 5, 0, t.comm()));
    FAIL("no exception");
  } catch (const mmbal::runtime_failure& e) {
    const std::string what = e.what();
    CHECK_THAT(what, Catch::Contains("MPI_Send"));
    CHECK_THAT(what, Catch::Contains("transport_mpi_test.cpp"));
    CHECK_THAT(what, Catch::Contains("MPI_ERR_RANK") || Catch::Contains("rank"));
  }
  // A plan for another communicator size is rejected before any communication.
  mmbal::rearrangement r{t.size() + 1, {}, {}};
  CHECK_THROWS_AS(execute(t, r, {}, {}, {}), mmbal::invalid_input);
}

int main(int argc, char* argv[]) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  Catch::Session session;
  if (rank != 0) session.configData().reporterName = "compact";  // rank 0 prints the usual report
  int failed = session.run(argc, argv);
  int any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0) std::printf("mpi tests: %s on every rank\n", any == 0 ? "passed" : "FAILED");
  MPI_Finalize();
  return any == 0 ? 0 : 1;
}
