#pragma once
// Shared by the orchestrator tests: workloads, and the reference checks that recompute a
// phase's report from the workload and the returned rearrangement with simple code.
#include <mmbal/orchestrate/orchestrator.hpp>
#include <mmbal/rearrange/alltoall_plan.hpp>
#include <mmbal/rearrange/pack.hpp>
#include <mmbal/spec/policy.hpp>
#include <mmbal/workload/generators.hpp>
#include <mmbal/workload/length_data.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace orchestrate_test {

using mmbal::orchestrate::orchestration;
using mmbal::orchestrate::orchestrator;
using mmbal::orchestrate::orchestrator_options;
using mmbal::orchestrate::phase_plan;
using mmbal::orchestrate::phase_policy;

inline mmbal::workload omni(std::uint64_t samples, mmbal::rank_t ranks, std::uint64_t seed) {
  mmbal::generator_options o;
  o.samples = samples;
  o.ranks = ranks;
  o.seed = seed;
  return mmbal::generate(mmbal::family::omni, o, mmbal::default_length_data());
}

inline orchestrator make(mmbal::rank_t ranks, mmbal::rank_t per_node, std::uint64_t bpt = 1, bool relabel = true) {
  orchestrator_options o;
  o.ranks = ranks;
  o.ranks_per_node = per_node;
  o.bytes_per_token = bpt;
  o.relabel = relabel;
  return orchestrator(o);
}

// Per-rank cost of the items whose location (in `where`) is on each rank, folded in item-id
// order (a different order than the library's slot order: the values agree up to rounding).
inline std::vector<double> recompute_loads(const std::vector<mmbal::length_t>& weights,
                                           const std::vector<mmbal::rank_t>& rank_of, mmbal::rank_t ranks,
                                           const mmbal::spec::any_cost& cost) {
  std::vector<std::vector<mmbal::length_t>> per(ranks);
  for (std::size_t i = 0; i < weights.size(); ++i) per[rank_of[i]].push_back(weights[i]);
  std::vector<double> loads(ranks);
  for (mmbal::rank_t r = 0; r < ranks; ++r)
    loads[r] = std::visit([&](const auto& c) { return mmbal::batch_value(c, per[r]); }, cost);
  return loads;
}

inline std::vector<mmbal::rank_t> ranks_of(const std::vector<mmbal::location>& where) {
  std::vector<mmbal::rank_t> out;
  for (const auto& l : where) out.push_back(l.rank);
  return out;
}

// Checks that `where` places n items on `ranks` ranks with slots 0..k-1 on every rank, each once.
inline void require_layout(const std::vector<mmbal::location>& where, mmbal::rank_t ranks) {
  std::map<mmbal::rank_t, std::set<std::uint32_t>> seen;
  for (const auto& l : where) {
    REQUIRE(l.rank < ranks);
    REQUIRE(seen[l.rank].insert(l.slot).second);
  }
  for (const auto& [r, slots] : seen) REQUIRE(*slots.rbegin() + std::size_t{1} == slots.size());
}

// Per-rank inter-node volume (bytes sent plus received across nodes), as OrchMLLM eq. (5) on
// both directions of a rank's link.
inline std::uint64_t inter_node_max(const mmbal::rearrangement& r, const std::vector<std::uint64_t>& bytes,
                                    mmbal::rank_t per_node) {
  std::vector<std::uint64_t> v(r.ranks, 0);
  for (std::size_t i = 0; i < r.size(); ++i) {
    const auto a = r.source[i].rank, b = r.destination[i].rank;
    if (per_node == 0 || a / per_node == b / per_node) continue;
    v[a] += bytes[i];
    v[b] += bytes[i];
  }
  return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
}

inline void check_phase(const mmbal::workload& w, const orchestration& o, const phase_plan& p, std::uint64_t bpt) {
  INFO("phase " << p.name);
  const mmbal::rank_t d = o.ranks;
  // Items: the LLM phase has the samples, an encoder phase its modality's segments.
  std::vector<mmbal::length_t> weights;
  std::vector<mmbal::rank_t> origin;
  for (const auto& s : w.samples) {
    if (p.name == "llm") {
      weights.push_back(static_cast<mmbal::length_t>(s.llm_length()));
      origin.push_back(s.rank);
    } else {
      for (const auto& g : s.segments)
        if (w.modalities[g.modality] == p.name) {
          weights.push_back(g.encoder_len);
          origin.push_back(s.rank);
        }
    }
  }
  REQUIRE(p.report.items == weights.size());
  REQUIRE(p.forward.size() == weights.size());
  REQUIRE(p.forward.ranks == d);
  // Valid: both sides are layouts, every item exactly once; the source is the origin layout.
  REQUIRE_NOTHROW(p.forward.validate());
  require_layout(p.forward.source, d);
  require_layout(p.forward.destination, d);
  std::vector<std::uint32_t> next(d, 0);
  for (std::size_t i = 0; i < weights.size(); ++i) {
    REQUIRE(p.forward.source[i].rank == origin[i]);
    REQUIRE(p.forward.source[i].slot == next[origin[i]]++);
  }
  // Loads equal loads recomputed from the rearrangement with the phase's cost.
  // The cost read back from its name in the report (built-in costs name themselves by spec).
  const mmbal::spec::any_cost cost = mmbal::spec::parse_cost(p.report.cost);
  const auto after = recompute_loads(weights, ranks_of(p.forward.destination), d, cost);
  const auto before = recompute_loads(weights, origin, d, cost);
  REQUIRE(p.report.loads_after.size() == d);
  double mx = 0, mx_before = 0, total = 0;
  for (mmbal::rank_t r = 0; r < d; ++r) {
    REQUIRE(p.report.loads_after[r] == Approx(after[r]).epsilon(1e-12).margin(1e-9));
    REQUIRE(p.report.loads_before[r] == Approx(before[r]).epsilon(1e-12).margin(1e-9));
    mx = std::max(mx, after[r]);
    mx_before = std::max(mx_before, before[r]);
    total += after[r];
  }
  REQUIRE(p.report.max_after == Approx(mx).epsilon(1e-12).margin(1e-9));
  REQUIRE(p.report.max_before == Approx(mx_before).epsilon(1e-12).margin(1e-9));
  REQUIRE(p.report.mean == Approx(total / d).epsilon(1e-12).margin(1e-9));
  REQUIRE(p.report.imbalance_after == (p.report.mean > 0 ? p.report.max_after / p.report.mean : 1.0));
  REQUIRE(p.report.imbalance_before == (p.report.mean_before > 0 ? p.report.max_before / p.report.mean_before : 1.0));
  REQUIRE(p.report.lower_bound <= p.report.max_after * (1 + 1e-12) + 1e-9);
  // Traffic recomputed from the plan: bytes = weight × bytes per token.
  std::uint64_t moved = 0, moved_bytes = 0, inter = 0;
  std::vector<std::uint64_t> bytes(weights.size());
  for (std::size_t i = 0; i < weights.size(); ++i) {
    bytes[i] = std::uint64_t{weights[i]} * bpt;
    REQUIRE(p.item_bytes[i] == bytes[i]);
    const auto a = origin[i], b = p.forward.destination[i].rank;
    if (a == b) continue;
    ++moved;
    moved_bytes += bytes[i];
    if (o.ranks_per_node > 0 && a / o.ranks_per_node != b / o.ranks_per_node) inter += bytes[i];
  }
  REQUIRE(p.report.moved_items == moved);
  REQUIRE(p.report.moved_bytes == moved_bytes);
  REQUIRE(p.report.inter_node_bytes == inter);
  // Relabeling: the reported maxima are those of the plan, never worse than the identity.
  REQUIRE(p.report.inter_node_max_relabeled == inter_node_max(p.forward, bytes, o.ranks_per_node));
  REQUIRE(p.report.inter_node_max_relabeled <= p.report.inter_node_max_identity);
  const mmbal::rearrangement unlabeled = mmbal::rearrangement::from_origin(origin, p.balanced);
  REQUIRE(p.report.inter_node_max_identity == inter_node_max(unlabeled, bytes, o.ranks_per_node));
}

// Payload byte k of encoder output (sample s, segment g): a function any rank can recompute.
inline std::byte payload(std::size_t s, std::size_t g, std::uint64_t k) {
  return static_cast<std::byte>((s * 131 + g * 31 + k * 7 + (k >> 8)) & 0xff);
}

// Every field of two orchestrations, compared one by one (plans that must be bit-identical).
inline void require_same(const mmbal::orchestrate::orchestration& a, const mmbal::orchestrate::orchestration& b) {
  REQUIRE(a.ranks == b.ranks);
  REQUIRE(a.ranks_per_node == b.ranks_per_node);
  REQUIRE(a.samples == b.samples);
  REQUIRE(a.bytes_per_token == b.bytes_per_token);
  REQUIRE(a.phases.size() == b.phases.size());
  for (std::size_t k = 0; k < a.phases.size(); ++k) {
    const phase_plan &x = a.phases[k], &y = b.phases[k];
    INFO("phase " << x.name);
    REQUIRE(x.name == y.name);
    REQUIRE(x.items.weights == y.items.weights);
    REQUIRE(x.items.origin == y.items.origin);
    REQUIRE(x.items.sample_of == y.items.sample_of);
    REQUIRE(x.items.segment_of == y.items.segment_of);
    REQUIRE(x.items.group == y.items.group);
    REQUIRE(x.item_bytes == y.item_bytes);
    REQUIRE(x.balanced.where == y.balanced.where);
    REQUIRE(x.relabel.rank_of_batch == y.relabel.rank_of_batch);
    REQUIRE(x.relabel.iterations == y.relabel.iterations);
    REQUIRE(x.forward == y.forward);
    REQUIRE(x.fingerprint == y.fingerprint);
    REQUIRE(x.report.loads_before == y.report.loads_before);
    REQUIRE(x.report.loads_after == y.report.loads_after);
    REQUIRE(x.report.moved_bytes == y.report.moved_bytes);
    REQUIRE(x.report.inter_node_max_relabeled == y.report.inter_node_max_relabeled);
  }
  REQUIRE(a.composed.size() == b.composed.size());
  for (std::size_t k = 0; k < a.composed.size(); ++k) {
    REQUIRE(a.composed[k].modality == b.composed[k].modality);
    REQUIRE(a.composed[k].composed == b.composed[k].composed);
    REQUIRE(a.composed[k].item_bytes == b.composed[k].item_bytes);
    REQUIRE(a.composed[k].fingerprint == b.composed[k].fingerprint);
  }
  REQUIRE(a.composed_bytes == b.composed_bytes);
  REQUIRE(a.two_hop_bytes == b.two_hop_bytes);
  REQUIRE(a.composed_inter_node_bytes == b.composed_inter_node_bytes);
  REQUIRE(a.two_hop_inter_node_bytes == b.two_hop_inter_node_bytes);
  REQUIRE(a.fingerprint == b.fingerprint);
}

}  // namespace orchestrate_test
