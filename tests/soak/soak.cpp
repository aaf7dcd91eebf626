// The long randomized run (scripts/soak.sh; not part of CI): N random instances per balancing
// algorithm and per transport, each checked against the library's invariants —
// - balancing: the assignment is valid over the bins, honours the count cap, the capacity and
//   the groups, and its maximum is at least the lower bound (`lower_bound`, or
//   `equal_count_lower_bound` under equal counts); with `+refine` that maximum is at most the
//   base algorithm's (exactly), and every 4th instance solved again gives the identical
//   assignment; `invalid_input` is an accepted answer only for a constraint the algorithm
//   rejects (counted separately);
// - transports: a random rearrangement (uneven and zero-byte items, idle ranks) executed by
//   the loopback transport (single-threaded `run_rearrangement`, and every 16th instance also
//   through the threaded `loopback_world`) and, when built with MPI, by `mpi_transport`
//   delivers every byte to its destination slot and the inverse brings it back.
// Prints the counts per algorithm and transport; exits 1 on any violation.
//
// Usage: mmbal_soak [instances per algorithm and transport, default 100000] [seed, default 1]
#include "transport/random_plans.hpp"

#include <mmbal/core/rng.hpp>
#include <mmbal/cost/metrics.hpp>
#include <mmbal/rearrange/alltoall_plan.hpp>
#include <mmbal/spec/algorithm.hpp>
#include <mmbal/spec/cost.hpp>
#include <mmbal/transport/concepts.hpp>
#include <mmbal/transport/loopback.hpp>
#ifdef MMBAL_SOAK_MPI
#include <mmbal/transport/mpi.hpp>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace {

using namespace mmbal;

struct tally {
  std::uint64_t ok = 0, rejected = 0, failed = 0;
};

int printed_failures = 0;

void fail(tally& t, const std::string& what) {
  ++t.failed;
  if (printed_failures++ < 20) std::fprintf(stderr, "soak: FAILED %s\n", what.c_str());
}

[[maybe_unused]] spec::any_cost random_cost(rng_engine& g, spec::algorithm_kind k) {
  using spec::algorithm_kind;
  const double beta = uniform01(g) * 1e-3;
  if (k == algorithm_kind::padded)
    return uniform_below(g, 2) ? spec::any_cost{cost::padded{}} : spec::any_cost{cost::padded_attention{1.0, beta}};
  if (k == algorithm_kind::conv) return cost::conv_attention{uniform01(g) * 1e-3};
  const auto pick = uniform_below(g, k == algorithm_kind::kk ? 4 : 7);
  switch (pick) {
    case 0:
      return cost::tokens{};
    case 1:
      return cost::attention{1.0, beta};
    case 2:
      return cost::fitted{beta * 1e-2, 1.0, 10.0 * uniform01(g)};
    case 3: {
      cost::model_config m;
      m.hidden = 256;
      m.ffn = 512;
      m.heads = 4;
      m.kv_heads = 2;
      m.layers = 2;
      return cost::flops{m};
    }
    case 4:
      return cost::padded{};
    case 5:
      return cost::padded_attention{1.0, beta};
    default:
      return cost::conv_attention{uniform01(g) * 1e-3};
  }
}

/// One random balancing instance of algorithm `base`; returns false on a violation.
[[maybe_unused]] void soak_balance(rng_engine& g, spec::algorithm_kind base, tally& t, std::uint64_t instance) {
  spec::algorithm_spec spec;
  spec.base = base;
  spec.refine = uniform_below(g, 2) == 1;
  if (base == spec::algorithm_kind::tolerance) spec.tolerance = uniform01(g) * 200;
  if (base == spec::algorithm_kind::migrate) spec.epsilon = uniform01(g) * 0.01;
  const spec::any_cost c = random_cost(g, base);
  const auto bins = static_cast<rank_t>(1 + uniform_below(g, 32));
  const auto n = static_cast<std::size_t>(uniform_below(g, 8 * bins + 8));
  std::vector<length_t> weights(n);
  std::vector<rank_t> origin(n);
  std::vector<std::uint64_t> groups(n);
  // One instance in four draws its lengths from 1–3 values, as image phases do (runs of equal
  // lengths: `lpt` places runs of ≥ max(2 · bins, 64) in bulk).
  std::vector<length_t> palette(uniform_below(g, 4) == 0 ? 1 + uniform_below(g, 3) : 0);
  for (length_t& l : palette) l = static_cast<length_t>(1 + uniform_below(g, 5000));
  for (std::size_t i = 0; i < n; ++i) {
    if (!palette.empty())
      weights[i] = palette[uniform_below(g, palette.size())];
    else
      weights[i] = static_cast<length_t>(uniform_below(g, 8) == 0 ? uniform_below(g, 20) : lognormal(g, 400.0, 1.0));
    origin[i] = static_cast<rank_t>(uniform_below(g, bins));
    groups[i] = uniform_below(g, 3) == 0 ? uniform_below(g, n / 2 + 1) : 1000000 + i;
  }
  balance::problem p;
  p.weights = weights;
  p.bins = bins;
  p.origin = origin;
  p.ranks_per_node = static_cast<rank_t>(uniform_below(g, 9));
  const auto constraint = uniform_below(g, 20);
  if (constraint < 4) p.limits.counts = {balance::count_cap::mode::equal, 0};
  if (constraint >= 4 && constraint < 7)
    p.limits.counts = {balance::count_cap::mode::fixed,
                       static_cast<std::uint32_t>((n + bins - 1) / bins + uniform_below(g, 3))};
  if (constraint == 7) p.limits.groups = groups;
  if (constraint == 8)
    p.limits.capacity =
        std::visit([&](const auto& f) { return lower_bound(weights, bins, f); }, c) * (1.0 + uniform01(g));
  assignment a;
  try {
    a = spec::solve(spec, c, p);
  } catch (const invalid_input&) {
    ++t.rejected;
    return;
  }
  const std::string where = "instance " + std::to_string(instance) + " (" + spec::to_spec(spec) + ", cost " +
                            spec::to_spec(c) + ", " + std::to_string(n) + " items on " + std::to_string(bins) +
                            " bins)";
  try {
    a.validate();
  } catch (const invalid_input& e) {
    return fail(t, where + ": invalid assignment: " + e.what());
  }
  if (a.bins != bins || a.size() != n) return fail(t, where + ": wrong shape");
  std::vector<std::size_t> counts(bins, 0);
  for (const location& l : a.where) ++counts[l.rank];
  for (std::size_t k : counts) {
    if (p.limits.counts.kind == balance::count_cap::mode::equal && k != n / bins && k != (n + bins - 1) / bins)
      return fail(t, where + ": counts not equal");
    if (p.limits.counts.kind == balance::count_cap::mode::fixed && k > p.limits.counts.cap)
      return fail(t, where + ": count cap exceeded");
  }
  if (!p.limits.groups.empty()) {
    std::map<std::uint64_t, rank_t> bin_of_group;
    for (std::size_t i = 0; i < n; ++i)
      if (!bin_of_group.emplace(groups[i], a.where[i].rank).second && bin_of_group[groups[i]] != a.where[i].rank)
        return fail(t, where + ": a group is split");
  }
  const auto max_of = [&](const assignment& x) {
    return std::visit(
        [&](const auto& f) {
          const std::vector<double> loads = bin_loads(x, weights, f);
          return loads.empty() ? 0.0 : *std::max_element(loads.begin(), loads.end());
        },
        c);
  };
  const double max = max_of(a);
  const double lb = std::visit(
      [&](const auto& f) {
        return p.limits.counts.kind == balance::count_cap::mode::equal ? equal_count_lower_bound(weights, bins, f)
                                                                       : lower_bound(weights, bins, f);
      },
      c);
  if ((p.limits.capacity && max > *p.limits.capacity * (1 + 1e-9)) || max < lb * (1 - 1e-9))
    return fail(t, where + ": maximum below the lower bound or above the capacity");
  if (spec.refine) {  // refine never raises its start's maximum (exactly: both folded by bin_loads)
    spec::algorithm_spec start_spec = spec;
    start_spec.refine = false;
    if (max > max_of(spec::solve(start_spec, c, p))) return fail(t, where + ": refine raised the maximum");
  }
  // Every rank computes the same plan from the same metadata.
  if (instance % 4 == 0 && spec::solve(spec, c, p).where != a.where) return fail(t, where + ": not deterministic");
  ++t.ok;
}

[[maybe_unused]] std::vector<std::vector<std::byte>> layout_buffers(const rearrangement& r,
                                                                    std::span<const std::uint64_t> sizes,
                                                                    bool destination, std::uint64_t seed) {
  std::vector<std::vector<std::byte>> out;
  for (rank_t q = 0; q < r.ranks; ++q)
    out.push_back(mmbal_test::layout_buffer(destination ? r.destination : r.source, sizes, q, seed));
  return out;
}

[[maybe_unused]] void soak_loopback(rng_engine& g, tally& t, std::uint64_t instance) {
  const auto d = static_cast<rank_t>(1 + uniform_below(g, 12));
  const auto n = static_cast<std::uint32_t>(uniform_below(g, 120));
  const rearrangement r = mmbal_test::random_rearrangement(g, n, d, 0.3);
  const std::vector<std::uint64_t> sizes = mmbal_test::random_sizes(g, n, 24.0);
  const auto inputs = layout_buffers(r, sizes, false, instance);
  const auto expected = layout_buffers(r, sizes, true, instance);
  const std::string where = "loopback instance " + std::to_string(instance);
  try {
    const auto out = transport::run_rearrangement(r, sizes, inputs);
    if (out != expected) return fail(t, where + ": bytes differ");
    if (transport::run_rearrangement(r.inverse(), sizes, out) != inputs) return fail(t, where + ": inverse differs");
    if (instance % 16 == 0) {
      std::vector<std::vector<std::byte>> got(d);
      transport::loopback_world world(d);
      world.run([&](transport::loopback_transport& tr) {
        std::vector<std::byte> o(make_alltoall_plan(r, sizes, tr.rank()).output_bytes);
        transport::execute(tr, r, sizes, inputs[tr.rank()], o);
        got[tr.rank()] = std::move(o);
      });
      if (got != expected) return fail(t, where + ": threaded world bytes differ");
    }
  } catch (const std::exception& e) {
    return fail(t, where + ": threw " + e.what());
  }
  ++t.ok;
}

#ifdef MMBAL_SOAK_MPI
/// Every rank draws the same rearrangement (same seed) over the communicator's ranks.
void soak_mpi(transport::mpi_transport& tr, rng_engine& g, tally& t, std::uint64_t instance) {
  const rank_t d = tr.size();
  const auto n = static_cast<std::uint32_t>(uniform_below(g, 120));
  const rearrangement r = mmbal_test::random_rearrangement(g, n, d, 0.3);
  const std::vector<std::uint64_t> sizes = mmbal_test::random_sizes(g, n, 24.0);
  const auto in = mmbal_test::layout_buffer(r.source, sizes, tr.rank(), instance);
  std::vector<std::byte> out(make_alltoall_plan(r, sizes, tr.rank()).output_bytes), back(in.size());
  transport::execute(tr, r, sizes, in, out);
  transport::execute(tr, r.inverse(), sizes, out, back);
  if (out != mmbal_test::layout_buffer(r.destination, sizes, tr.rank(), instance) || back != in)
    return fail(t, "mpi instance " + std::to_string(instance) + ": bytes differ on rank " + std::to_string(tr.rank()));
  ++t.ok;
}
#endif

}  // namespace

int main(int argc, char** argv) {
#ifdef MMBAL_SOAK_MPI
  MPI_Init(&argc, &argv);
#endif
  const std::uint64_t count = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 100000;
  const std::uint64_t seed = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1;
  std::uint64_t failed = 0;
  const auto start = std::chrono::steady_clock::now();
  auto report = [&](const std::string& name, const tally& t) {
    failed += t.failed;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("%-34s instances %8llu  ok %8llu  rejected %7llu  FAILED %llu  (%.0f s)\n", name.c_str(),
                static_cast<unsigned long long>(t.ok + t.rejected + t.failed), static_cast<unsigned long long>(t.ok),
                static_cast<unsigned long long>(t.rejected), static_cast<unsigned long long>(t.failed), s);
    std::fflush(stdout);
  };
#ifdef MMBAL_SOAK_MPI
  transport::mpi_transport tr;
  tally mpi;
  auto gm = make_rng(seed, 99);
  for (std::uint64_t i = 0; i < count; ++i) soak_mpi(tr, gm, mpi, i);
  std::uint64_t local[3] = {mpi.ok, mpi.rejected, mpi.failed}, total[3] = {0, 0, 0};
  MPI_Allreduce(local, total, 3, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  // Every instance is checked on every rank: the counts are instances × ranks.
  const bool root = tr.rank() == 0;
  if (root)
    report("transport mpi (" + std::to_string(tr.size()) + " ranks x instances)", tally{total[0], total[1], total[2]});
  failed = total[2];
  MPI_Finalize();
  if (!root) return failed == 0 ? 0 : 1;
#else
  using spec::algorithm_kind;
  for (const algorithm_kind k :
       {algorithm_kind::lpt, algorithm_kind::greedy_ascending, algorithm_kind::padded, algorithm_kind::tolerance,
        algorithm_kind::conv, algorithm_kind::kk, algorithm_kind::migrate}) {
    tally t;
    auto g = make_rng(seed, static_cast<std::uint64_t>(k) + 1);
    for (std::uint64_t i = 0; i < count; ++i) soak_balance(g, k, t, i);
    report("algorithm " + std::string(spec::algorithm_name(k)) + " (+refine half)", t);
  }
  tally loop;
  auto g = make_rng(seed, 100);
  for (std::uint64_t i = 0; i < count; ++i) soak_loopback(g, loop, i);
  report("transport loopback", loop);
#endif
  std::printf("soak: %s (%llu violations)\n", failed == 0 ? "PASSED" : "FAILED",
              static_cast<unsigned long long>(failed));
  return failed == 0 ? 0 : 1;
}
