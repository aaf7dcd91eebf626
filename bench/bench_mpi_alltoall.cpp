// MPI plan execution vs raw MPI_Alltoallv (docs/DESIGN.md §7: ≤ 1.3 ×). Run under mpiexec, e.g.
//   mpiexec --allow-run-as-root --oversubscribe -np 4 build/release/bench/bench_mpi_alltoall
// Every rank runs the same fixed number of iterations; only rank 0 prints. Each iteration
// starts with an MPI_Barrier and its time is the SLOWEST rank's (MPI_Allreduce MAX of the
// per-rank times, outside the timed region), reported as manual time.
//
// Data: a realistic omni global batch (workload/generators.hpp, 60 samples per rank), LLM
// phase balanced by `lpt` on tokens; item bytes = LLM tokens × B bytes per token. B = 64
// (benchmark arg) stands for a hidden state far smaller than a real one (4096 × 2 B = 8 KiB
// per token would need ~1.5 GiB per rank for this batch, too much for this 2-core VM);
// B = 2 gives small items (token ids + metadata scale) where per-item overheads dominate.
//
// Each plan benchmark times, in the same iteration, the raw MPI_Alltoallv of the already
// packed byte matrix (baseline) and the plan execution, and reports counters raw_us and
// ratio_vs_raw (plan time / raw time, summed over iterations).
#include <mmbal/balance/lpt.hpp>
#include <mmbal/cost/functions.hpp>
#include <mmbal/rearrange/alltoall_plan.hpp>
#include <mmbal/rearrange/pack.hpp>
#include <mmbal/transport/concepts.hpp>
#include <mmbal/transport/mpi.hpp>
#include <mmbal/workload/generators.hpp>
#include <mmbal/workload/length_data.hpp>
#include <mmbal/workload/sample.hpp>

#include <benchmark/benchmark.h>
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

namespace {

using namespace mmbal;
using transport::mpi_transport;

constexpr int iterations = 40;

struct fixture {
  rearrangement r;
  std::vector<std::uint64_t> sizes;
  alltoall_plan plan;
  std::vector<std::byte> input, output, send, recv;
  std::vector<int> sc, sd, rc, rd;  // raw MPI_Alltoallv arguments
};

mpi_transport& comm() {
  static mpi_transport t;  // destroyed after MPI_Finalize would be too late: see main
  return t;
}

fixture& data(std::uint64_t bytes_per_token) {
  static std::map<std::uint64_t, std::unique_ptr<fixture>> cache;
  auto& f = cache[bytes_per_token];
  if (!f) {
    f = std::make_unique<fixture>();
    const rank_t d = comm().size();
    generator_options o;
    o.samples = std::uint64_t{d} * 60;
    o.ranks = d;
    o.seed = 2026;
    const workload w = generate(family::omni, o, default_length_data());
    const auto items = llm_phase_items(w);
    f->r = rearrangement::from_origin(items.origin, balance::lpt{}(items.weights, d, cost::tokens{}));
    for (length_t len : items.weights) f->sizes.push_back(std::uint64_t{len} * bytes_per_token);
    f->plan = make_alltoall_plan(f->r, f->sizes, comm().rank());
    f->input.assign(f->plan.input_bytes, std::byte{1});
    f->output.resize(f->plan.output_bytes);
    f->send.resize(f->plan.send_bytes);
    f->recv.resize(f->plan.recv_bytes);
    pack(f->plan, f->input, f->send);
    for (rank_t p = 0; p < d; ++p) {
      f->sc.push_back(static_cast<int>(f->plan.send_counts[p]));
      f->sd.push_back(static_cast<int>(f->plan.send_displs[p]));
      f->rc.push_back(static_cast<int>(f->plan.recv_counts[p]));
      f->rd.push_back(static_cast<int>(f->plan.recv_displs[p]));
    }
  }
  return *f;
}

/// Runs `op` on every rank after a barrier; returns the slowest rank's seconds.
double timed(const std::function<void()>& op) {
  MPI_Barrier(comm().comm());
  const double t0 = MPI_Wtime();
  op();
  double dt = MPI_Wtime() - t0;
  MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, comm().comm());
  return dt;
}

void raw_alltoallv(fixture& f) {
  MPI_Alltoallv(f.send.data(), f.sc.data(), f.sd.data(), MPI_BYTE, f.recv.data(), f.rc.data(), f.rd.data(), MPI_BYTE,
                comm().comm());
}

void report(benchmark::State& state, const fixture& f, double plan_total, double raw_total) {
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * f.plan.send_bytes));
  state.counters["raw_us"] = 1e6 * raw_total / static_cast<double>(state.iterations());
  state.counters["ratio_vs_raw"] = raw_total > 0 ? plan_total / raw_total : 0.0;
  state.counters["items"] = static_cast<double>(f.plan.pack_sizes.size());
  state.counters["MiB_sent"] = static_cast<double>(f.plan.send_bytes) / (1 << 20);
  std::uint64_t gaps = 0;  // pack runs: how fragmented the local items are
  for (std::size_t i = 1; i < f.plan.pack_offsets.size(); ++i)
    gaps += f.plan.pack_offsets[i] != f.plan.pack_offsets[i - 1] + f.plan.pack_sizes[i - 1];
  state.counters["pack_runs"] = static_cast<double>(gaps + (f.plan.pack_offsets.empty() ? 0 : 1));
}

// Baseline alone: MPI_Alltoallv of the already packed byte matrix.
void BM_raw_alltoallv(benchmark::State& state) {
  fixture& f = data(static_cast<std::uint64_t>(state.range(0)));
  double total = 0;
  for (auto _ : state) {
    const double dt = timed([&] { raw_alltoallv(f); });
    state.SetIterationTime(dt);
    total += dt;
  }
  report(state, f, total, total);
}

// Times `method` (one plan execution) and, in the same iterations, the raw MPI_Alltoallv of
// the same bytes; reports both.
template <class Method>
void time_against_raw(benchmark::State& state, Method method) {
  fixture& f = data(static_cast<std::uint64_t>(state.range(0)));
  double plan_total = 0;
  double raw_total = 0;
  for (auto _ : state) {
    raw_total += timed([&] { raw_alltoallv(f); });
    const double dt = timed([&] { method(f); });
    state.SetIterationTime(dt);
    plan_total += dt;
  }
  report(state, f, plan_total, raw_total);
}

// Plan execution, method v: pack (memcpy runs) + MPI_Alltoallv + unpack.
void BM_plan_alltoallv(benchmark::State& state) {
  time_against_raw(state, [](fixture& f) { comm().all_to_all_v(f.plan, f.input, f.output); });
}

// Plan execution, method w: one MPI_Alltoallw with hindexed datatypes (no user pack copy);
// datatypes built and freed in every iteration.
void BM_plan_alltoallw(benchmark::State& state) {
  time_against_raw(state, [](fixture& f) { comm().all_to_all_w(f.plan, f.input, f.output); });
}

// Plan execution, method p2p (the default): one Isend/Irecv per item of ≥ 32 KiB straight
// between input and output (contiguous messages: OpenMPI's shared-memory single-copy path
// applies), smaller items packed into one message per peer, self items memcpy.
void BM_plan_p2p(benchmark::State& state) {
  time_against_raw(state, [](fixture& f) { comm().all_to_all_p2p(f.plan, f.input, f.output); });
}

// The same with every item its own message (`p2p_coalesce_below` = 0, the method before small
// items were coalesced per peer).
void BM_plan_p2p_each_item(benchmark::State& state) {
  comm().set_p2p_coalesce_below(0);
  time_against_raw(state, [](fixture& f) { comm().all_to_all_p2p(f.plan, f.input, f.output); });
  comm().set_p2p_coalesce_below(transport::mpi_options{}.p2p_coalesce_below);
}

// Everything a step does: build the plan from the rearrangement, fingerprint it, all-reduce
// the check, then the exchange with the default method (p2p).
void BM_execute_checked(benchmark::State& state) {
  fixture& f = data(static_cast<std::uint64_t>(state.range(0)));
  comm().set_method(transport::mpi_options{}.method);
  double plan_total = 0;
  double raw_total = 0;
  for (auto _ : state) {
    raw_total += timed([&] { raw_alltoallv(f); });
    const double dt = timed([&] { transport::execute(comm(), f.r, f.sizes, f.input, f.output); });
    state.SetIterationTime(dt);
    plan_total += dt;
  }
  report(state, f, plan_total, raw_total);
}

// Fixed iterations (every rank must run exactly the same collectives) and 3 repetitions,
// reported as mean / median / stddev, so the noise of a shared machine is visible.
#define MMBAL_MPI_BENCH(fn)        \
  BENCHMARK(fn)                    \
      ->Arg(64)                    \
      ->Arg(2)                     \
      ->Iterations(iterations)     \
      ->Repetitions(3)             \
      ->ReportAggregatesOnly(true) \
      ->UseManualTime()            \
      ->Unit(benchmark::kMicrosecond)
MMBAL_MPI_BENCH(BM_raw_alltoallv);
MMBAL_MPI_BENCH(BM_plan_alltoallv);
MMBAL_MPI_BENCH(BM_plan_alltoallw);
MMBAL_MPI_BENCH(BM_plan_p2p);
MMBAL_MPI_BENCH(BM_plan_p2p_each_item);
MMBAL_MPI_BENCH(BM_execute_checked);

/// Ranks other than 0 run the same benchmarks silently.
class null_reporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  benchmark::Initialize(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  {
    comm();  // create the transport (collective) before any benchmark
    if (rank == 0) {
      benchmark::RunSpecifiedBenchmarks();
    } else {
      null_reporter quiet;
      benchmark::RunSpecifiedBenchmarks(&quiet);
    }
    comm() = mpi_transport(MPI_COMM_SELF);  // free the duplicated communicator before finalizing
  }
  benchmark::Shutdown();
  MPI_Finalize();
  return 0;
}
