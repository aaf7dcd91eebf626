#pragma once
/// @file
/// The multi-phase orchestrator (docs/DESIGN.md §5.5): one balancing policy per phase (every
/// encoder modality and the LLM), node-wise relabeling per phase, the composed encoder→LLM
/// plans, the plan fingerprint, and a report per phase.
/// @see OrchMLLM §6 (MLLM Global Orchestrator), §5.2 (Node-wise All-to-All Communicator), §8.

#include <mmbal/balance/constraints.hpp>
#include <mmbal/core/error.hpp>
#include <mmbal/core/parallel.hpp>
#include <mmbal/core/types.hpp>
#include <mmbal/cost/metrics.hpp>
#include <mmbal/orchestrate/policy.hpp>
#include <mmbal/rearrange/alltoall_plan.hpp>
#include <mmbal/rearrange/composition.hpp>
#include <mmbal/rearrange/rearrangement.hpp>
#include <mmbal/rearrange/relabel.hpp>
#include <mmbal/workload/sample.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <exception>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mmbal::orchestrate {

/// Global settings of an orchestrator.
///
/// - `ranks`: data-parallel ranks d (> 0, required).
/// - `ranks_per_node`: ranks per node c for inter-node traffic and relabeling; node of rank r
///   is r / c, the last node may be partial; 0 = a single node (default 0).
/// - `bytes_per_token`: bytes of one token of payload (> 0, default 1). Item bytes are
///   token counts × this: LLM phase — the sample's LLM tokens (its whole interleaved
///   sequence); encoder phase — the segment's encoder length (patches, frames: the encoder's
///   input); composed encoder→LLM plan — the segment's LLM tokens (the encoder's output after
///   its connector, one LLM token each).
/// - `relabel`: run node-wise relabeling on every phase (default true); when false every
///   phase keeps the partitioner's batch order (σ = identity).
/// - `relabel_tuning`: options of `relabel_nodewise` (defaults).
/// - `threads`: threads that run the plan's tasks (per phase its plan and the two halves of its
///   report, per encoder its composed plan in two steps and that plan's item bytes)
///   concurrently, the calling thread included; 0 = the machine's hardware concurrency
///   (default), 1 = plan on the calling thread only. No more threads than tasks (6 per
///   encoder + 3) are started. The result is
///   bit-identical for every value: every task writes its own fields.
struct orchestrator_options {
  rank_t ranks = 0;
  rank_t ranks_per_node = 0;
  std::uint64_t bytes_per_token = 1;
  bool relabel = true;
  relabel_options relabel_tuning{};
  unsigned threads = 0;
};

/// What one phase's balancing achieved (units: the phase's cost for loads, bytes for traffic).
/// Traffic is that of the final (relabeled) forward plan, origin → balanced ranks; the
/// backward plan moves the same amounts back. Computed once, by the orchestrator; the tool and
/// the Python module only serialize it (`for_each_field` lists every field).
struct phase_report {
  std::string name;                  ///< "llm" or the modality name
  std::string cost;                  ///< the cost's name (`phase_balancer::cost_name`)
  std::string algorithm;             ///< the algorithm's name (`phase_balancer::name`)
  std::uint64_t items = 0;           ///< samples (llm) or segments of the modality
  std::vector<double> loads_before;  ///< per-rank cost at the origin placement
  std::vector<double> loads_after;   ///< per-rank cost after balancing and relabeling
  double max_before = 0;
  double max_after = 0;
  double mean_before = 0;
  double mean = 0;              ///< mean of `loads_after` (differs from mean_before for non-additive costs)
  double lower_bound = 0;       ///< `lower_bound` (or `equal_count_lower_bound` under equal counts)
  double imbalance_before = 1;  ///< max_before / mean_before (1 when the mean is 0)
  double imbalance_after = 1;   ///< max_after / mean (1 when the mean is 0)
  std::uint64_t moved_items = 0;
  std::uint64_t moved_bytes = 0;
  std::uint64_t inter_node_bytes = 0;
  std::uint64_t inter_node_max_identity = 0;   ///< max per-rank inter-node volume, σ = identity
  std::uint64_t inter_node_max_relabeled = 0;  ///< the same with the chosen σ (≤ identity's)
};

/// Calls `f(key, value)` for every field of `r`, in declaration order, with the field's name
/// as key (`std::string_view`) and a const reference to its value: one field list for every
/// serializer (the Python module's `report` dict; a JSON writer picks its keys by name).
template <class F>
void for_each_field(const phase_report& r, F&& f) {
  f(std::string_view("name"), r.name);
  f(std::string_view("cost"), r.cost);
  f(std::string_view("algorithm"), r.algorithm);
  f(std::string_view("items"), r.items);
  f(std::string_view("loads_before"), r.loads_before);
  f(std::string_view("loads_after"), r.loads_after);
  f(std::string_view("max_before"), r.max_before);
  f(std::string_view("max_after"), r.max_after);
  f(std::string_view("mean_before"), r.mean_before);
  f(std::string_view("mean"), r.mean);
  f(std::string_view("lower_bound"), r.lower_bound);
  f(std::string_view("imbalance_before"), r.imbalance_before);
  f(std::string_view("imbalance_after"), r.imbalance_after);
  f(std::string_view("moved_items"), r.moved_items);
  f(std::string_view("moved_bytes"), r.moved_bytes);
  f(std::string_view("inter_node_bytes"), r.inter_node_bytes);
  f(std::string_view("inter_node_max_identity"), r.inter_node_max_identity);
  f(std::string_view("inter_node_max_relabeled"), r.inter_node_max_relabeled);
}

/// One phase's plan and everything it was derived from.
struct phase_plan {
  std::string name;
  phase_policy policy;
  phase_items items;                      ///< the phase's items (`phase_items_of`)
  std::vector<std::uint64_t> item_bytes;  ///< bytes per item (see `orchestrator_options`)
  assignment balanced;                    ///< the partitioner's result: item → new batch (before σ)
  relabeling relabel;                     ///< σ: batch → rank, and the inter-node maxima
  rearrangement forward;                  ///< origin layout → balanced, relabeled layout
  std::uint64_t fingerprint = 0;          ///< `fingerprint(forward, item_bytes)`
  phase_report report;

  /// The backward rearrangement (gradients or results back to the origin).
  [[nodiscard]] rearrangement backward() const { return forward.inverse(); }
};

/// The plan that carries one encoder modality's outputs to the LLM ranks. The two-hop
/// reference (`compose_encoder_to_llm`) is not stored, only its traffic.
struct composed_plan {
  std::string modality;
  rearrangement composed;                 ///< Π_M ∘ Π_E⁻¹ (`compose_to_llm`); backward: `composed.inverse()`
  std::vector<std::uint64_t> item_bytes;  ///< per segment: LLM tokens × bytes_per_token
  composition_traffic traffic;            ///< forward traffic, composed vs two hops
  std::uint64_t fingerprint = 0;          ///< `fingerprint(composed, item_bytes)`
};

/// Everything one training step's data movement needs. Per-rank `alltoall_plan`s are not
/// stored (d of them cost O(d²)); every rank builds its own with
/// `make_alltoall_plan(phase.forward, phase.item_bytes, rank)` or from `composed[k].composed`.
struct orchestration {
  rank_t ranks = 0;
  rank_t ranks_per_node = 0;
  std::uint64_t samples = 0;
  std::uint64_t bytes_per_token = 1;
  std::vector<phase_plan> phases;       ///< encoder phases in modality order, then "llm" (last)
  std::vector<composed_plan> composed;  ///< one per encoder phase, same order
  std::uint64_t composed_bytes = 0;     ///< Σ over encoders of the composed plans' moved bytes
  std::uint64_t two_hop_bytes = 0;      ///< Σ over encoders of back-to-origin + origin-to-LLM bytes
  std::uint64_t composed_inter_node_bytes = 0;
  std::uint64_t two_hop_inter_node_bytes = 0;
  std::uint64_t fingerprint = 0;  ///< `plan_fingerprint` of this orchestration

  /// The phase named `name`; throws `invalid_input` when absent.
  [[nodiscard]] const phase_plan& phase(std::string_view name) const {
    for (const phase_plan& p : phases)
      if (p.name == name) return p;
    mmbal::detail::throw_invalid("orchestration: no phase '", name, "'");
  }
  /// The LLM phase (always present).
  [[nodiscard]] const phase_plan& llm() const { return phases.back(); }
};

/// Buffers `orchestrator::plan` reuses from one call to the next, owned by the caller (one per
/// thread that plans): the node-wise relabeling's buffers of every phase (`relabel_workspace`,
/// up to 40 B per item), so that the next step's plan does not fault in fresh pages. Holds no
/// result: any workspace, fresh or used, gives the same plan.
struct plan_workspace {
  std::vector<relabel_workspace> relabel;  ///< one per phase of the last plan
};

namespace detail {

/// FNV-1a of a string, to fold names and specs into a fingerprint portably.
[[nodiscard]] constexpr std::uint64_t hash_text(std::string_view s) noexcept {
  std::uint64_t h = 14695981039346656037ull;
  for (char ch : s) {
    h ^= static_cast<unsigned char>(ch);
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace detail

/// The multi-phase orchestrator (OrchMLLM's MLLM Global Orchestrator).
///
/// For a workload (a gathered global batch), `plan` computes, in this order:
/// 1. for every encoder modality with at least one segment, in modality-id order, and then
///    for the LLM phase (items = samples, weight = the full interleaved length, OrchMLLM §6
///    "Subsequences assembly"): the phase's items, their bytes, the partitioner's assignment
///    Π under the phase's policy (its `phase_balancer`, with origins, bytes and ranks_per_node so
///    `migrate_partitioner` can keep items local), node-wise relabeling σ of its batches
///    (`relabel_nodewise`, on the phase's own forward traffic), and the forward rearrangement
///    origin → σ(Π);
/// 2. for every encoder phase, the composed plan Π_M ∘ Π_E⁻¹ that carries its outputs from
///    the encoder ranks straight to their samples' LLM ranks in segment order
///    (`compose_to_llm`), with the traffic of the two-hop reference (back to the origin, then
///    on with the sample) beside it;
/// 3. the plan fingerprint (`plan_fingerprint`).
///
/// Policies: `set_policy(phase, p)`; phases without one use `default_policy(phase)`.
/// Policies for phases absent from a workload are ignored (one configuration serves every
/// step). Guarantees: every rearrangement is valid (every item exactly once); loads after are
/// those of the final layout under the phase's cost; relabeling never raises a phase's
/// inter-node maximum nor changes its loads (as a multiset); composed bytes ≤ two-hop bytes
/// per modality (an output that moves in one hop moves in at least one of the two).
/// Deterministic: the same workload and configuration give bit-identical results on every
/// rank, for any `threads`. Concurrency: on up to `orchestrator_options::threads` threads,
/// the workload is scanned and every phase's items collected in chunks of samples; then
/// steps 1 and 2 form one task graph (per phase its plan, then its report in two halves; per
/// encoder the LLM-side layout of its outputs once the LLM phase's plan is done, and its
/// composed plan once its own plan is done too; largest phase first, a free thread taking the
/// first task that is ready, so the smaller phases' tasks fill in while the largest phase's
/// plan runs and its composition and report halves share the threads at the end). `plan` is
/// `const` and keeps no state: several threads may call it at once, each with its own output
/// and `plan_workspace`. Memory: a caller that plans every step passes its previous
/// orchestration and a `plan_workspace` back in, so the next step reuses their buffers.
/// Complexity: per phase
/// the partitioner's cost (O(n log n + n log d) for lpt) plus O(n log n + d log d) for
/// relabeling and composition; wall time ≈ that of the largest phase plus the larger of its
/// composition and report where cores are free.
/// Memory O(n + d) per phase.
/// @see OrchMLLM §6, §5.2.2 Alg. 3, §8.
class orchestrator {
 public:
  /// Throws `invalid_input` for ranks = 0 or above `max_ranks`, or bytes_per_token = 0.
  explicit orchestrator(orchestrator_options options) : options_(std::move(options)) {
    (void)checked_ranks(options_.ranks, "orchestrator: ranks");
    if (options_.bytes_per_token == 0) mmbal::detail::throw_invalid("orchestrator: bytes_per_token = 0 (must be > 0)");
  }

  /// Sets the policy of phase `phase` ("llm" or a modality name). Throws `invalid_input` for
  /// an empty name, "text" (text has no encoder phase), or a capacity that is NaN or negative.
  orchestrator& set_policy(std::string_view phase, phase_policy policy) {
    if (phase.empty()) mmbal::detail::throw_invalid("orchestrator: empty phase name");
    if (phase == "text")
      mmbal::detail::throw_invalid(
          "orchestrator: phase 'text' does not exist (text travels with its sample in the "
          "'llm' phase)");
    if (policy.capacity && !(*policy.capacity >= 0))
      mmbal::detail::throw_invalid("orchestrator: phase '", phase, "': capacity ", *policy.capacity, " must be >= 0");
    policies_.insert_or_assign(std::string(phase), std::move(policy));
    return *this;
  }

  /// The policy phase `phase` runs with (its own, or the default).
  [[nodiscard]] phase_policy policy(std::string_view phase) const {
    const auto it = policies_.find(phase);
    return it != policies_.end() ? it->second : default_policy(phase);
  }

  [[nodiscard]] const orchestrator_options& options() const noexcept { return options_; }

  /// The phase names of `w` in plan order: encoder modalities with at least one segment (in
  /// modality-id order), then "llm". Throws `invalid_input` when a segment names a modality
  /// id the workload does not list.
  [[nodiscard]] static std::vector<std::string> phase_names(const workload& w) {
    return scan_workload(w, std::nullopt).names;
  }

  /// Plans one step for workload `w` (see the class comment). Throws `invalid_input` when a
  /// sample's rank is ≥ ranks, a segment names an unknown modality, or a phase's policy
  /// cannot be applied (the partitioner's message, prefixed with the phase name; with several
  /// failing phases, the first in plan order).
  [[nodiscard]] orchestration plan(const workload& w) const {
    orchestration out;
    plan(w, out);
    return out;
  }

  /// The same into `out`, reusing its buffers, without a workspace: every phase's
  /// relabeling buffers are freed as soon as that phase is relabeled (lower peak memory, and
  /// the allocator can hand their pages to the tasks that follow on the same thread).
  void plan(const workload& w, orchestration& out) const { plan_into(w, out, nullptr); }

  /// The same into `out`, reusing its buffers and those of `workspace`: pass the previous
  /// step's orchestration (once it is no longer needed) and the same workspace, and this
  /// step's plan does not fault in fresh memory for its items, sizes, relabeling,
  /// rearrangements and composed plans (the steady-state path). The result equals `plan(w)`
  /// whatever `out` and `workspace` held; if planning throws, both are left valid but
  /// unspecified. One workspace serves one call at a time.
  void plan(const workload& w, orchestration& out, plan_workspace& workspace) const { plan_into(w, out, &workspace); }

 private:
  /// `plan` with `workspace` (kept for the next call) or without one (nullptr).
  void plan_into(const workload& w, orchestration& out, plan_workspace* workspace) const {
    const workload_scan scan = scan_workload(w, options_.ranks, options_.threads);
    const std::vector<std::string>& names = scan.names;
    const std::size_t phases = names.size(), encoders = phases - 1, llm = encoders;
    out.ranks = options_.ranks;
    out.ranks_per_node = options_.ranks_per_node;
    out.samples = w.samples.size();
    out.bytes_per_token = options_.bytes_per_token;
    out.phases.resize(phases);
    out.composed.resize(encoders);
    if (workspace && workspace->relabel.size() < phases) workspace->relabel.resize(phases);

    // Every phase's items and every composed plan's segment tokens in one pass over the
    // workload (one pass per phase cost 2.5 times as much), then one task graph (docs/DESIGN.md
    // §5.5): every phase's plan ("core": balance, relabeling, forward rearrangement), then its
    // report; for every encoder its composed plan in two steps: the LLM-side layout of its
    // outputs ("assemble", which needs only the LLM phase's core, so it runs while the
    // encoder's own core does) and the rest once that core is done ("compose"); the composed
    // plans' item bytes fill the gaps. Every kind of task comes largest phase first; a free
    // thread takes the first task whose dependencies are done (`parallel_for_dag`), so the
    // smaller phases' reports and compositions run while the largest phase's core does, and
    // its composition and the two halves of its report share the threads at the end. Every
    // task writes its own fields only: the result does not depend on the order or the thread
    // count.
    std::vector<phase_items*> encoder_items(w.modalities.size(), nullptr);
    std::vector<std::vector<std::uint64_t>*> segment_tokens(w.modalities.size(), nullptr);
    for (std::size_t k = 0; k < encoders; ++k) {
      encoder_items[scan.modality[k]] = &out.phases[k].items;
      segment_tokens[scan.modality[k]] = &out.composed[k].item_bytes;
    }
    {
      const mmbal::detail::phase_item_table table(
          {.llm = &out.phases[llm].items, .encoders = encoder_items, .segment_tokens = segment_tokens});
      const std::uint32_t samples = checked_count(w.samples.size(), "samples");
      const std::vector<std::size_t> sinks = table.requested();
      parallel_for_index(sinks.size(), options_.threads,
                         [&](std::size_t k) { table.resize_sink(sinks[k], scan.counts, samples); });
      parallel_for_index(scan.chunks(), options_.threads, [&](std::size_t c) {
        table.fill(w, static_cast<std::uint32_t>(scan.chunk_begin[c]),
                   static_cast<std::uint32_t>(scan.chunk_begin[c + 1]), scan.chunk_first[c], scan.counts.grouped);
      });
    }

    enum class step { core, composed_bytes, assemble, compose, report_loads, report_traffic };
    struct task {
      step what;
      std::size_t phase;
    };
    std::vector<std::size_t> by_size(phases);
    for (std::size_t k = 0; k < phases; ++k) by_size[k] = k;
    std::stable_sort(by_size.begin(), by_size.end(),
                     [&](std::size_t a, std::size_t b) { return scan.items[a] > scan.items[b]; });
    std::vector<task> tasks;
    std::vector<std::vector<std::size_t>> after;
    std::vector<std::size_t> core_task(phases), bytes_task(encoders), assemble_task(encoders);
    for (const std::size_t k : by_size) {
      core_task[k] = tasks.size();
      tasks.push_back({step::core, k});
      after.emplace_back();
    }
    for (std::size_t k = 0; k < encoders; ++k) {
      bytes_task[k] = tasks.size();
      tasks.push_back({step::composed_bytes, k});
      after.emplace_back();
    }
    for (const std::size_t k : by_size)
      if (k != llm) {
        assemble_task[k] = tasks.size();
        tasks.push_back({step::assemble, k});
        after.push_back({core_task[llm]});
      }
    for (const std::size_t k : by_size) {
      if (k != llm) {
        tasks.push_back({step::compose, k});
        after.push_back({core_task[k], bytes_task[k], assemble_task[k]});
        std::sort(after.back().begin(), after.back().end());
      }
      for (const step half : {step::report_loads, step::report_traffic}) {
        tasks.push_back({half, k});
        after.push_back({core_task[k]});
      }
    }
    const std::vector<std::exception_ptr> errors =
        parallel_for_dag(tasks.size(), options_.threads, after, [&](std::size_t i) {
          const task& t = tasks[i];
          switch (t.what) {
            case step::core:
              plan_phase(names[t.phase], workspace ? &workspace->relabel[t.phase] : nullptr, out.phases[t.phase]);
              break;
            case step::composed_bytes:
              composed_item_bytes(names[t.phase], out.composed[t.phase]);
              break;
            case step::assemble:
              // The composed plan's destination: where the LLM layout wants every output.
              assembly_layout(out.phases[t.phase].items, out.phases[llm].forward, plan_validation::trusted,
                              out.composed[t.phase].composed.destination);
              break;
            case step::compose:
              compose_phase(names[t.phase], out.phases[t.phase], out.composed[t.phase]);
              break;
            case step::report_loads:
              report_loads(out.phases[t.phase]);
              break;
            case step::report_traffic:
              report_traffic(out.phases[t.phase]);
              break;
          }
        });
    // The error a serial plan meets first: a phase's (the LLM phase, then the encoders in plan
    // order; its core before its report), then the composed plans' in plan order.
    const auto rethrow = [&](step what, std::size_t phase) {
      for (std::size_t i = 0; i < tasks.size(); ++i)
        if (tasks[i].what == what && tasks[i].phase == phase && errors[i]) std::rethrow_exception(errors[i]);
    };
    for (std::size_t q = 0; q < phases; ++q) {
      const std::size_t k = q == 0 ? llm : q - 1;
      rethrow(step::core, k);
      rethrow(step::report_loads, k);
      rethrow(step::report_traffic, k);
    }
    for (std::size_t k = 0; k < encoders; ++k) {
      rethrow(step::composed_bytes, k);
      rethrow(step::assemble, k);
      rethrow(step::compose, k);
    }

    out.composed_bytes = out.two_hop_bytes = out.composed_inter_node_bytes = out.two_hop_inter_node_bytes = 0;
    for (const composed_plan& c : out.composed) {
      out.composed_bytes += c.traffic.composed.moved_bytes;
      out.two_hop_bytes += c.traffic.two_hop.moved_bytes;
      out.composed_inter_node_bytes += c.traffic.composed.inter_node_bytes;
      out.two_hop_inter_node_bytes += c.traffic.two_hop.inter_node_bytes;
    }
    out.fingerprint = fold_fingerprints(
        out, [](const phase_plan& p) { return p.fingerprint; }, [](const composed_plan& c) { return c.fingerprint; });
  }

 public:
  /// The 64-bit fingerprint of an orchestration, recomputed from its plans: folds, in plan
  /// order, every phase's name, cost and algorithm name and `fingerprint(forward, item_bytes)`,
  /// then every composed plan's `fingerprint(composed, item_bytes)`, with
  /// `combine_fingerprints`. `plan` stores it in `orchestration::fingerprint`. Identical on
  /// every rank for identical plans; changes when any destination, size or policy changes.
  /// Transports all-reduce it before the first exchange. O(total items).
  [[nodiscard]] static std::uint64_t plan_fingerprint(const orchestration& o) {
    return fold_fingerprints(
        o, [](const phase_plan& p) { return fingerprint(p.forward, p.item_bytes); },
        [](const composed_plan& c) { return fingerprint(c.composed, c.item_bytes); });
  }

 private:
  /// The phase names of a workload in plan order, the item count of each phase, the modality
  /// id of each encoder phase, the workload's counts (`count_segments`), and the chunks of
  /// samples that the scan (and then the collection of items) split between threads.
  struct workload_scan {
    std::vector<std::string> names;
    std::vector<std::size_t> items;
    std::vector<modality_id> modality;
    workload_counts counts;
    std::vector<std::size_t> chunk_begin;                   ///< chunk c = samples [begin[c], begin[c + 1])
    std::vector<std::array<std::size_t, 256>> chunk_first;  ///< per chunk, segments of each modality before it

    [[nodiscard]] std::size_t chunks() const noexcept { return chunk_first.size(); }
  };

  /// Samples per chunk of the scan at least (a chunk takes ≈ 1 ms at 16 K samples, against tens
  /// of µs to start a thread).
  static constexpr std::size_t min_chunk_samples = 16384;

  /// Throws naming sample i of `w` when it is on a rank ≥ `ranks` (when given) or has a segment
  /// of a modality id that `w` does not name.
  static void check_sample(const workload& w, std::size_t i, std::optional<rank_t> ranks) {
    const sample& s = w.samples[i];
    if (ranks && s.rank >= *ranks)
      mmbal::detail::throw_invalid("orchestrator: sample ", s.id, " (index ", i, ") is on rank ", s.rank, " >= ranks ",
                                   *ranks);
    for (const segment& g : s.segments)
      if (g.modality >= w.modalities.size())
        mmbal::detail::throw_invalid("orchestrator: sample ", s.id, " has a segment of modality id ",
                                     unsigned{g.modality}, " but the workload names ", w.modalities.size(),
                                     " modalities");
  }

  /// One pass over `w` on up to `threads` threads (chunks of consecutive samples): checks every
  /// sample's rank (< `ranks`, when given) and every segment's modality id (the first
  /// offending sample in input order is reported, whatever the chunks), and returns the phase
  /// names (see `phase_names`) and item counts.
  [[nodiscard]] static workload_scan scan_workload(const workload& w, std::optional<rank_t> ranks,
                                                   unsigned threads = 1) {
    workload_scan out;
    const std::size_t n = w.samples.size();
    const std::size_t chunks = std::clamp<std::size_t>(n / min_chunk_samples, 1, resolve_threads(threads));
    out.chunk_begin.resize(chunks + 1);
    for (std::size_t c = 0; c <= chunks; ++c) out.chunk_begin[c] = n * c / chunks;
    std::vector<workload_counts> counts(chunks);
    std::vector<char> rank_beyond(chunks, 0);
    parallel_for_index(chunks, threads, [&](std::size_t c) {
      for (std::size_t i = out.chunk_begin[c]; i < out.chunk_begin[c + 1]; ++i) {
        mmbal::detail::prefetch_segments(w.samples, i + mmbal::detail::segment_prefetch_distance);
        counts[c].add(w.samples[i]);
        if (ranks && w.samples[i].rank >= *ranks) rank_beyond[c] = 1;
      }
    });
    out.chunk_first.resize(chunks);
    for (std::size_t c = 0; c < chunks; ++c) {
      out.chunk_first[c] = out.counts.segments;
      out.counts.grouped |= counts[c].grouped;
      for (std::size_t m = 0; m < 256; ++m) out.counts.segments[m] += counts[c].segments[m];
    }
    bool offending = std::find(rank_beyond.begin(), rank_beyond.end(), 1) != rank_beyond.end();
    for (std::size_t m = w.modalities.size(); m < 256; ++m) offending |= out.counts.segments[m] > 0;
    if (offending)  // rare: find the first offending sample in input order, whatever the chunks
      for (std::size_t i = 0; i < n; ++i) check_sample(w, i, ranks);
    for (std::size_t m = 1; m < w.modalities.size(); ++m)
      if (out.counts.segments[m] > 0) {
        out.names.push_back(w.modalities[m]);
        out.items.push_back(out.counts.segments[m]);
        out.modality.push_back(static_cast<modality_id>(m));
      }
    out.names.emplace_back("llm");
    out.items.push_back(w.samples.size());
    return out;
  }

  /// Folds the header, the phase parts and the composed parts (see `plan_fingerprint`).
  template <class PhasePart, class ComposedPart>
  [[nodiscard]] static std::uint64_t fold_fingerprints(const orchestration& o, PhasePart phase_part,
                                                       ComposedPart composed_part) {
    std::vector<std::uint64_t> parts{o.ranks, o.ranks_per_node, o.samples};
    for (const phase_plan& p : o.phases) {
      parts.push_back(detail::hash_text(p.name));
      parts.push_back(detail::hash_text(p.report.cost));
      parts.push_back(detail::hash_text(p.report.algorithm));
      parts.push_back(phase_part(p));
    }
    for (const composed_plan& c : o.composed) parts.push_back(composed_part(c));
    return combine_fingerprints(parts);
  }

  /// The composed plan's item bytes of encoder phase `name`: `c.item_bytes` holds every
  /// segment's LLM tokens (`collect_phase_items`) and becomes tokens × bytes per token.
  void composed_item_bytes(const std::string& name, composed_plan& c) const {
    if (options_.bytes_per_token == 1) return;
    for (std::size_t i = 0; i < c.item_bytes.size(); ++i)
      c.item_bytes[i] = mmbal::detail::token_bytes(c.item_bytes[i], options_.bytes_per_token, name, i);
  }

  /// The composed encoder→LLM plan of encoder phase `e` (named `name`) into `c`, whose
  /// destination (`assembly_layout` under the LLM plan) and item bytes are already set: the
  /// source is where the encoder ran, Π_E's destination (as `compose_to_llm`; the plans are
  /// valid by construction); then its traffic and fingerprint.
  void compose_phase(const std::string& name, const phase_plan& e, composed_plan& c) const {
    c.modality = name;
    c.composed.ranks = options_.ranks;
    c.composed.source = e.forward.destination;
    // Traffic and fingerprint in one pass over the items (each a pass of its own read them twice:
    // the image-heavy composition 5.2–6.2 ms, of it 2.6–2.8 the fingerprint).
    mmbal::detail::fingerprint_lanes lanes(c.composed, c.item_bytes);
    c.traffic =
        mmbal::detail::compare_composition(c.composed, e.forward.source, c.item_bytes, options_.ranks_per_node, lanes);
    c.fingerprint = lanes.value();
  }

  /// Plans phase `name` into `p`, whose items are set: every other field but the report and
  /// the fingerprint (`report_loads`, `report_traffic`) is overwritten; buffers are reused.
  void plan_phase(const std::string& name, relabel_workspace* workspace, phase_plan& p) const {
    const rank_t d = options_.ranks;
    p.name = name;
    p.policy = policy(name);
    const std::size_t n = p.items.size();  // collected before the task graph
    phase_item_bytes(p.items, options_.bytes_per_token, name, p.item_bytes);

    std::vector<std::uint64_t> groups;
    if (p.policy.keep_groups) groups = phase_group_ids(p.items, name);
    balance::problem prob;
    prob.weights = p.items.weights;
    prob.bins = d;
    prob.limits.counts = p.policy.counts;
    prob.limits.capacity = p.policy.capacity;
    prob.limits.groups = groups;
    prob.origin = p.items.origin;
    prob.item_bytes = p.item_bytes;
    prob.ranks_per_node = options_.ranks_per_node;
    try {
      p.balanced = p.policy.balancer.balance(prob);  // checks size and bins; validates a user's partitioner
    } catch (const invalid_input& e) {
      mmbal::detail::throw_invalid("phase '", name, "' (", describe(p.policy), "): ", e.what());
    }
    if (p.balanced.bins != d || p.balanced.size() != n)
      mmbal::detail::throw_runtime("phase '", name, "': the partitioner returned ", p.balanced.size(), " items on ",
                                   p.balanced.bins, " bins for ", n, " items on ", d, " ranks");
    // Origin layout (slots in ascending item id on every rank, docs/DESIGN.md §3), built directly:
    // `rearrangement::from_origin` would validate both sides again; the tests validate.
    rearrangement unlabeled = std::move(p.forward);  // reuse the previous plan's buffers
    unlabeled.ranks = d;
    unlabeled.source.resize(n);
    unlabeled.destination.assign(p.balanced.where.begin(), p.balanced.where.end());
    {
      std::vector<std::uint32_t> next(d, 0);
      for (std::size_t i = 0; i < n; ++i) unlabeled.source[i] = location{p.items.origin[i], next[p.items.origin[i]]++};
    }
    if (options_.relabel) {
      p.relabel =
          relabel_nodewise(unlabeled, p.item_bytes, options_.ranks_per_node, options_.relabel_tuning, workspace);
    } else {
      p.relabel.rank_of_batch.resize(d);
      for (rank_t j = 0; j < d; ++j) p.relabel.rank_of_batch[j] = j;
      p.relabel.iterations = 0;
      p.relabel.max_identity = p.relabel.max_relabeled =
          max_inter_node_volume(unlabeled, p.item_bytes, options_.ranks_per_node);
    }
    p.forward = p.relabel.is_identity() ? std::move(unlabeled)
                                        : apply_relabeling(std::move(unlabeled), p.relabel.rank_of_batch);
  }

  /// The loads half of phase `p`'s report (names, items, loads and their summaries), planned by
  /// `plan_phase`. A task of its own beside `report_traffic`: the image-heavy image phase's
  /// report was the plan's longest last task (5.5 ms), as two it balances the two threads' ends.
  void report_loads(phase_plan& p) const {
    const rank_t d = options_.ranks;
    const std::size_t n = p.items.size();
    phase_report& r = p.report;
    r.name = p.name;
    r.cost = p.policy.balancer.cost_name();
    r.algorithm = p.policy.balancer.name();
    r.items = n;
    std::vector<rank_t> final_ranks(n);
    for (std::size_t i = 0; i < n; ++i) final_ranks[i] = p.forward.destination[i].rank;
    // Every rank's items folded in ascending item id (all built-in costs are order-independent
    // up to rounding of Σl²).
    phase_loads loads;
    try {
      loads = p.policy.balancer.measure(p.items.weights, p.items.origin, final_ranks, d,
                                        p.policy.counts.kind == balance::count_cap::mode::equal);
    } catch (const invalid_input& e) {
      mmbal::detail::throw_invalid("phase '", p.name, "' (", describe(p.policy), "): ", e.what());
    }
    // A user's cost may return NaN for some batches; a NaN load would then read as max 0.
    for (const std::vector<double>* side : {&loads.before, &loads.after})
      for (std::size_t b = 0; b < side->size(); ++b)
        if (std::isnan((*side)[b]))
          mmbal::detail::throw_invalid("phase '", p.name, "' (", describe(p.policy), "): the load of rank ", b,
                                       side == &loads.before ? " before balancing" : " after balancing",
                                       " is NaN (the cost returned NaN for its batch)");
    r.loads_before = std::move(loads.before);
    r.loads_after = std::move(loads.after);
    r.lower_bound = loads.lower_bound;
    const load_summary before = summarize_loads(r.loads_before), after = summarize_loads(r.loads_after);
    r.max_before = before.max;
    r.mean_before = before.mean;
    r.max_after = after.max;
    r.mean = after.mean;
    r.imbalance_before = before.max_over_mean;
    r.imbalance_after = after.max_over_mean;
  }

  /// The traffic half of phase `p`'s report and the phase's fingerprint, in one pass over the
  /// items (as in `compose_phase`).
  void report_traffic(phase_plan& p) const {
    phase_report& r = p.report;
    mmbal::detail::fingerprint_lanes lanes(p.forward, p.item_bytes);
    const traffic t =
        mmbal::detail::move_traffic(p.forward.source, p.forward.destination, p.item_bytes,
                                    mmbal::detail::node_map(p.forward.ranks, options_.ranks_per_node), lanes);
    p.fingerprint = lanes.value();
    r.moved_items = t.moved_items;
    r.moved_bytes = t.moved_bytes;
    r.inter_node_bytes = t.inter_node_bytes;
    r.inter_node_max_identity = p.relabel.max_identity;
    r.inter_node_max_relabeled = p.relabel.max_relabeled;
  }

  orchestrator_options options_;
  std::map<std::string, phase_policy, std::less<>> policies_;
};

}  // namespace mmbal::orchestrate
