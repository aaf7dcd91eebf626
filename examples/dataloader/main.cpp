// A data loader that plans ahead (docs/DESIGN.md §5.5 "Prefetching"; OrchMLLM §6): while step k's
// exchange and compute run on the MPI ranks, the loader's prefetch thread gathers step k+1's
// metadata and plans it with the orchestrator (`orchestrate::prefetching_planner`). Run:
//   mpiexec --allow-run-as-root --oversubscribe -np 4 build/<dir>/examples/dataloader/dataloader
//       [--steps N] [--samples-per-rank N] [--compute-ms MS] [--no-prefetch] [--check-inline] [--help]
//   (defaults: 8 steps, 16 samples per rank, 0 ms of compute; the benchmark uses --compute-ms 20)
//
// Every step:
//  1. (prefetch thread, one step ahead) every rank generates its samples from (seed, step,
//     rank), the metadata are all-gathered on the loader's own communicator (a second
//     `mpi_transport`: MPI_THREAD_MULTIPLE, collectives on different communicators from
//     different threads), and the orchestrator plans the step into the orchestration the
//     training loop handed back (`recycle`);
//  2. (training thread) every phase's forward plan moves its items' payload with the MPI
//     transport (`transport::execute`: the plan fingerprint is all-reduced first);
//  3. a simulated compute of --compute-ms milliseconds (a sleep: the accelerator's time, during
//     which the host thread that plans is free).
// Payload byte j of an item is a pure function of (step, phase, sample id, segment, j), so
// every rank checks every byte it receives against the unbalanced reference — the bytes the
// item had at its origin — and the all-reduced delivered total equals the origin total.
// --check-inline re-plans every step on the training thread and requires the prefetched plan
// to be identical. --no-prefetch gathers and plans inline (the baseline the overlap removes).
// Output (rank 0): steps, bytes verified, mean step time and mean time waiting for the plan.
// Exit status: 0 when every byte and plan matched, 1 otherwise, 2 for bad arguments.
#include <mmbal/core/rng.hpp>
#include <mmbal/orchestrate/orchestrator.hpp>
#include <mmbal/orchestrate/prefetch.hpp>
#include <mmbal/rearrange/alltoall_plan.hpp>
#include <mmbal/transport/concepts.hpp>
#include <mmbal/transport/mpi.hpp>
#include <mmbal/workload/generators.hpp>
#include <mmbal/workload/length_data.hpp>
#include <mmbal/workload/sample.hpp>

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace mmbal;
using bytes = std::vector<std::byte>;
using clock_type = std::chrono::steady_clock;

constexpr std::uint64_t seed = 2026;
constexpr std::uint64_t bytes_per_token = 4;

constexpr const char* usage =
    "usage: mpiexec -np R dataloader [--steps N (default 8)] [--samples-per-rank N (default 16)]\n"
    "       [--compute-ms MS (default 0)] [--no-prefetch] [--check-inline] [--help]\n"
    "Plans step k+1 on a prefetch thread while step k's exchange and compute run; checks every\n"
    "delivered byte (see the comment at the top of examples/dataloader/main.cpp).\n";

struct settings {
  bool help = false;
  std::uint64_t steps = 8;
  std::uint64_t samples_per_rank = 16;
  double compute_ms = 0;
  bool prefetch = true;
  bool check_inline = false;
  rank_t ranks_per_node = 2;
};

/// Payload byte j of item (phase k, sample id, segment) in step `step`: the same on every rank.
std::byte byte_at(std::uint64_t step, std::uint64_t phase, std::uint64_t id, std::uint64_t segment, std::uint64_t j) {
  const std::uint64_t key = splitmix64(seed ^ (step << 48) ^ (phase << 40) ^ (id * 0x9E3779B97F4A7C15ULL) ^ segment);
  return static_cast<std::byte>(splitmix64(key ^ (j * 0xD1B54A32D192ED03ULL)) >> 56);
}

/// A rank's buffer for one side of a phase's plan: its items in slot order, each item's
/// bytes (`item_bytes[i]` of them) from `byte_at`.
bytes layout_bytes(const workload& w, const orchestrate::phase_plan& p, std::uint64_t step, std::uint64_t phase,
                   std::span<const location> where, rank_t rank) {
  std::vector<std::size_t> on;
  for (std::size_t i = 0; i < where.size(); ++i)
    if (where[i].rank == rank) on.push_back(i);
  std::sort(on.begin(), on.end(), [&](std::size_t a, std::size_t b) { return where[a].slot < where[b].slot; });
  bytes out;
  for (std::size_t i : on) {
    const std::uint64_t id = w.samples[p.items.sample_of[i]].id;
    for (std::uint64_t j = 0; j < p.item_bytes[i]; ++j)
      out.push_back(byte_at(step, phase, id, p.items.segment_of[i], j));
  }
  return out;
}

/// Step `step`'s local samples of `rank` (ids unique across ranks and steps).
workload local_batch(const settings& cfg, std::uint64_t step, rank_t rank) {
  generator_options o;
  o.samples = cfg.samples_per_rank;
  o.ranks = 1;
  o.seed = splitmix64(seed ^ (step << 32) ^ rank);
  workload local = generate(family::omni, o, default_length_data());
  for (std::size_t i = 0; i < local.samples.size(); ++i)
    local.samples[i].id = (step << 40) | (std::uint64_t{rank} << 20) | i;
  return local;
}

bool same_plan(const orchestrate::orchestration& a, const orchestrate::orchestration& b) {
  if (a.fingerprint != b.fingerprint || a.phases.size() != b.phases.size() || a.composed.size() != b.composed.size())
    return false;
  for (std::size_t k = 0; k < a.phases.size(); ++k)
    if (!(a.phases[k].forward == b.phases[k].forward) || a.phases[k].item_bytes != b.phases[k].item_bytes) return false;
  for (std::size_t k = 0; k < a.composed.size(); ++k)
    if (!(a.composed[k].composed == b.composed[k].composed)) return false;
  return true;
}

double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

int run(const settings& cfg) {
  transport::mpi_transport t;       // the training thread's exchanges
  transport::mpi_transport loader;  // the prefetch thread's metadata gathers (own communicator)
  const rank_t d = t.size();
  const rank_t me = t.rank();

  orchestrate::orchestrator_options options;
  options.ranks = d;
  options.ranks_per_node = cfg.ranks_per_node;
  options.bytes_per_token = bytes_per_token;
  options.threads = 1;  // the prefetch thread plans alone: the training thread keeps its core
  const orchestrate::orchestrator planner(options);
  const auto source = [&](std::uint64_t step) -> std::optional<workload> {
    if (step == cfg.steps) return std::nullopt;
    return transport::gather_workload(loader, local_batch(cfg, step, me));
  };

  // counters: verified bytes, wrong bytes, delivered bytes, origin bytes, plan mismatches
  std::uint64_t sums[5] = {0, 0, 0, 0, 0};
  double step_ms = 0, wait_ms = 0, exchange_ms = 0;
  std::optional<orchestrate::prefetching_planner> prefetcher;
  if (cfg.prefetch) prefetcher.emplace(planner, source);
  orchestrate::prefetched_step inline_step;  // --no-prefetch: planned here, buffers reused
  for (std::uint64_t k = 0; k < cfg.steps; ++k) {
    const auto t0 = clock_type::now();
    std::optional<orchestrate::prefetched_step> s;
    if (prefetcher) {
      s = prefetcher->next();
    } else if (std::optional<workload> batch = source(k)) {
      inline_step.index = k;
      inline_step.batch = std::move(*batch);
      planner.plan(inline_step.batch, inline_step.plan);
      s = std::move(inline_step);
    }
    if (!s || s->index != k) mmbal::detail::throw_runtime("dataloader: step ", k, " missing from the loader");
    wait_ms += ms_since(t0);
    if (cfg.check_inline && !same_plan(s->plan, planner.plan(s->batch))) ++sums[4];

    const auto t1 = clock_type::now();
    for (std::size_t p = 0; p < s->plan.phases.size(); ++p) {
      const orchestrate::phase_plan& ph = s->plan.phases[p];
      const bytes in = layout_bytes(s->batch, ph, k, p, ph.forward.source, me);
      bytes out(make_alltoall_plan(ph.forward, ph.item_bytes, me).output_bytes);
      transport::execute(t, ph.forward, ph.item_bytes, in, out);
      const bytes expected = layout_bytes(s->batch, ph, k, p, ph.forward.destination, me);
      sums[0] += std::max(out.size(), expected.size());
      sums[1] += std::max(out.size(), expected.size()) - std::min(out.size(), expected.size());
      for (std::size_t j = 0; j < std::min(out.size(), expected.size()); ++j) sums[1] += out[j] != expected[j];
      sums[2] += out.size();
      sums[3] += in.size();
    }
    exchange_ms += ms_since(t1);
    if (cfg.compute_ms > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(cfg.compute_ms));
    step_ms += ms_since(t0);
    if (prefetcher) {
      prefetcher->recycle(std::move(*s));
    } else {
      inline_step = std::move(*s);
    }
  }
  if (prefetcher && prefetcher->next()) mmbal::detail::throw_runtime("dataloader: the loader ran past the last step");
  prefetcher.reset();  // joins the prefetch thread before the communicators go

  MPI_Allreduce(MPI_IN_PLACE, sums, 5, MPI_UINT64_T, MPI_SUM, t.comm());
  double times[3] = {step_ms, wait_ms, exchange_ms};
  MPI_Allreduce(MPI_IN_PLACE, times, 3, MPI_DOUBLE, MPI_MAX, t.comm());
  const bool ok = sums[1] == 0 && sums[2] == sums[3] && sums[4] == 0;
  if (me == 0) {
    const auto n = static_cast<double>(cfg.steps);
    std::printf("mmbal dataloader: %u ranks, %llu steps of %llu samples per rank (omni), %s, compute %.1f ms\n", d,
                static_cast<unsigned long long>(cfg.steps), static_cast<unsigned long long>(cfg.samples_per_rank),
                cfg.prefetch ? "planning prefetched one step ahead" : "planning inline", cfg.compute_ms);
    std::printf("  per step (slowest rank): %.2f ms, of which waiting for the plan %.2f ms, exchange %.2f ms\n",
                times[0] / n, times[1] / n, times[2] / n);
    std::printf("  delivered %llu bytes (origin %llu)%s\n", static_cast<unsigned long long>(sums[2]),
                static_cast<unsigned long long>(sums[3]),
                cfg.check_inline ? "; prefetched plans re-planned inline" : "");
    std::printf("  verified %llu bytes against the unbalanced reference: %s\n",
                static_cast<unsigned long long>(sums[0]),
                ok ? "all correct" : (sums[4] ? "PLAN MISMATCHES" : "MISMATCHES"));
  }
  return ok ? 0 : 1;
}

/// Parses the command line; returns nullopt (after a message) on a bad argument.
std::optional<settings> parse(int argc, char** argv) {
  settings cfg;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> std::optional<double> {
      if (i + 1 >= argc) return std::nullopt;
      try {
        std::size_t used = 0;
        const double v = std::stod(argv[++i], &used);
        if (used != std::strlen(argv[i]) || !(v >= 0)) return std::nullopt;
        return v;
      } catch (const std::exception&) {
        return std::nullopt;
      }
    };
    std::optional<double> v;
    if (a == "--help" || a == "-h") {
      cfg.help = true;
    } else if (a == "--no-prefetch") {
      cfg.prefetch = false;
    } else if (a == "--check-inline") {
      cfg.check_inline = true;
    } else if (a == "--steps" && (v = value()) && *v >= 1 && *v <= 1e6 && *v == std::floor(*v)) {
      cfg.steps = static_cast<std::uint64_t>(*v);
    } else if (a == "--samples-per-rank" && (v = value()) && *v >= 1 && *v <= 1e6 && *v == std::floor(*v)) {
      cfg.samples_per_rank = static_cast<std::uint64_t>(*v);
    } else if (a == "--compute-ms" && (v = value()) && *v <= 1e6) {
      cfg.compute_ms = *v;
    } else {
      std::fprintf(stderr, "dataloader: bad argument '%s'\n%s", a.c_str(), usage);
      return std::nullopt;
    }
  }
  return cfg;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const std::optional<settings> cfg = parse(argc, argv);
  // Every rank must run the same steps (each is collective): a rank with a bad argument, or
  // with other --steps / --samples-per-rank, would leave the others waiting in a collective;
  // --help on any rank ends every rank.
  std::uint64_t mine[5] = {cfg ? 0u : 1u, cfg ? cfg->steps : 0, cfg ? ~cfg->steps : 0, 0, cfg && cfg->help};
  if (cfg) mine[3] = cfg->samples_per_rank;
  std::uint64_t most[5] = {};
  MPI_Allreduce(mine, most, 5, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  if (most[4] != 0 && most[0] == 0) {
    if (rank == 0) std::fputs(usage, stdout);
    MPI_Finalize();
    return 0;
  }
  std::uint64_t least_samples = mine[3];
  MPI_Allreduce(MPI_IN_PLACE, &least_samples, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  if (most[0] != 0 || most[1] != ~most[2] || most[3] != least_samples) {
    if (rank == 0)
      std::fprintf(
          stderr, "dataloader: %s\n",
          most[0] != 0 ? "a rank has a bad argument" : "ranks were given different --steps or --samples-per-rank");
    MPI_Finalize();
    return 2;
  }
  if (cfg->prefetch && provided < MPI_THREAD_MULTIPLE) {
    if (rank == 0)
      std::fprintf(stderr,
                   "dataloader: this MPI does not provide MPI_THREAD_MULTIPLE (the prefetch thread gathers "
                   "metadata on its own communicator); run with --no-prefetch\n");
    MPI_Finalize();
    return 1;
  }
  int status = 0;
  try {
    status = run(*cfg);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dataloader: rank %d: %s\n", rank, e.what());
    status = 1;
    MPI_Abort(MPI_COMM_WORLD, 1);  // a rank that failed alone must not leave the others waiting
  }
  MPI_Finalize();
  return status;
}
