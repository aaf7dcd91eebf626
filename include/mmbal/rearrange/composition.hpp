#pragma once
/// @file
/// Subsequence assembly and rearrangement composition between an encoder phase and the LLM
/// phase (docs/DESIGN.md §5.5). Encoder-phase items are the segments of one modality; LLM-phase
/// items are samples. After the encoder phase ran under Π_E, every encoder output sits on
/// its encoder rank; the LLM phase wants it on its sample's LLM rank (Π_M), inside the
/// sample's sequence. The composed plan Π_M ∘ Π_E⁻¹ moves it there in ONE all-to-all instead
/// of two (back to the origin, then on with the sample).
/// @see OrchMLLM §6 (Subsequences assembly, Rearrangement composition).

#include <mmbal/core/detail/node_map.hpp>
#include <mmbal/core/error.hpp>
#include <mmbal/core/types.hpp>
#include <mmbal/cost/metrics.hpp>
#include <mmbal/rearrange/rearrangement.hpp>
#include <mmbal/workload/sample.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace mmbal {

/// Whether a function validates the plans it is given (`checked`) or trusts a caller that has
/// just built or validated them (`trusted`, e.g. the orchestrator; skips O(n) checks).
enum class plan_validation { checked, trusted };

/// The LLM-side layout of one encoder modality's outputs (subsequence assembly).
///
/// Definition: on every LLM rank r, the encoder outputs of this modality are laid out in one
/// buffer as follows — for the samples that Π_M places on r, in their LLM slot order, the
/// sample's segments of this modality in segment (sequence) order; slot 0 is the first of
/// them. So the k-th output of a sample directly follows its (k−1)-th, and all of sample s's
/// outputs precede those of the sample in the next LLM slot. A sample without segments of
/// this modality takes no slot. The LLM rank then interleaves text embeddings (which travel
/// with the sample under Π_M) and these outputs by walking each sample's segment list.
///
/// `encoder` are the phase's items (`encoder_phase_items`: `sample_of`, `segment_of`), and
/// `llm` is Π_M over samples. Returns the destination of every encoder item as an assignment
/// over `llm.ranks` ranks. Validates `llm` unless `validation` is `trusted` (the caller just
/// did); throws when an item names a sample outside it. This overload writes the locations
/// into `where` (its buffer is reused).
/// O(n + samples + ranks) plus sorting each sample's few segments.
inline void assembly_layout(const phase_items& encoder, const rearrangement& llm, plan_validation validation,
                            std::vector<location>& where) {
  if (validation == plan_validation::checked) llm.validate();
  const std::size_t n = encoder.size();
  if (encoder.sample_of.size() != n || encoder.segment_of.size() != n)
    detail::throw_invalid("assembly_layout: phase items have ", n, " weights, ", encoder.sample_of.size(),
                          " sample ids and ", encoder.segment_of.size(), " segment ids");
  checked_count(n, "encoder items");
  // Encoder items grouped by sample (counting sort, ascending id), then by segment index
  // inside each sample (tiny lists), then dealt out by walking every LLM rank's slots: O(n +
  // samples), no global comparison sort. 32-bit offsets (n < 2^32, checked above) and the
  // offsets themselves as the fill cursors: a fresh plan faults in every page it touches.
  // Items already grouped by sample in segment order (what `encoder_phase_items` gives) need
  // no reordering: checked in the counting pass.
  const std::size_t samples = llm.size();
  std::vector<std::uint32_t> first(samples + 1, 0);
  bool in_order = true;
  for (std::size_t i = 0; i < n; ++i) {
    if (encoder.sample_of[i] >= samples)
      detail::throw_invalid("assembly_layout: encoder item ", i, " belongs to sample ", encoder.sample_of[i],
                            " but the LLM rearrangement has ", samples, " samples");
    ++first[encoder.sample_of[i] + std::size_t{1}];
    if (i > 0 &&
        (encoder.sample_of[i] < encoder.sample_of[i - 1] ||
         (encoder.sample_of[i] == encoder.sample_of[i - 1] && encoder.segment_of[i] < encoder.segment_of[i - 1])))
      in_order = false;
  }
  for (std::size_t s = 0; s < samples; ++s) first[s + 1] += first[s];
  std::vector<item_id> by_sample;  // empty when the items are in order: item k is the k-th
  if (!in_order) {
    by_sample.resize(n);
    for (std::size_t i = 0; i < n; ++i) by_sample[first[encoder.sample_of[i]]++] = static_cast<item_id>(i);
    for (std::size_t s = samples; s > 0; --s) first[s] = first[s - 1];  // every cursor ended on the next start
    first[0] = 0;
    const auto by_segment = [&](item_id x, item_id y) {
      return encoder.segment_of[x] != encoder.segment_of[y] ? encoder.segment_of[x] < encoder.segment_of[y] : x < y;
    };
    // Segment order; duplicate (sample, segment) pairs are malformed but stay deterministic.
    for (std::size_t s = 0; s < samples; ++s)
      std::sort(by_sample.begin() + static_cast<std::ptrdiff_t>(first[s]),
                by_sample.begin() + static_cast<std::ptrdiff_t>(first[s + 1]), by_segment);
  }
  // Every sample's first output slot on its LLM rank: the outputs of the samples in the rank's
  // earlier slots come first. Counts laid out by (rank, slot), an exclusive prefix sum per
  // rank, then the outputs written in sample order: the random accesses touch one 4-byte count
  // per sample, the n locations are written in order (dealing them out slot by slot wrote them
  // at random: 3.98 → 3.34 ms on the image-heavy image phase, bench/RESULTS.md "Session 40").
  // llm.destination is a valid layout: validated by the caller or above.
  std::vector<std::uint32_t> rank_first(llm.ranks + std::size_t{1}, 0);
  for (const location& l : llm.destination) ++rank_first[l.rank + std::size_t{1}];
  for (rank_t r = 0; r < llm.ranks; ++r) rank_first[r + 1] += rank_first[r];
  std::vector<std::uint32_t> start(samples);  // outputs by (rank, slot), then their offsets
  for (std::size_t s = 0; s < samples; ++s)
    start[rank_first[llm.destination[s].rank] + llm.destination[s].slot] = first[s + 1] - first[s];
  for (rank_t r = 0; r < llm.ranks; ++r) {
    std::uint32_t next = 0;
    for (std::uint32_t k = rank_first[r]; k < rank_first[r + 1]; ++k) next += std::exchange(start[k], next);
  }
  where.resize(n);
  for (std::size_t s = 0; s < samples; ++s) {
    const location l = llm.destination[s];
    const std::uint32_t slot = start[rank_first[l.rank] + l.slot];  // of the sample's first output
    for (std::uint32_t k = first[s]; k < first[s + 1]; ++k)
      where[in_order ? k : by_sample[k]] = location{l.rank, slot + (k - first[s])};
  }
}

/// `assembly_layout` (validating `llm`) as an assignment over `llm.ranks` ranks.
[[nodiscard]] inline assignment assembly_layout(const phase_items& encoder, const rearrangement& llm) {
  assignment out{llm.ranks, {}};
  assembly_layout(encoder, llm, plan_validation::checked, out.where);
  return out;
}

/// The forward plans that carry one encoder modality's outputs to the LLM phase.
///
/// All three are over the encoder items (same ids as `encoder`):
/// - `composed`: from where the encoder phase ran (Π_E's destination) straight to the
///   assembly layout on the LLM ranks — Π_M ∘ Π_E⁻¹, one all-to-all;
/// - `back_to_origin` (first hop of the two-hop reference): Π_E⁻¹, encoder rank → origin;
/// - `origin_to_llm` (second hop): origin → assembly layout, i.e. Π_M applied to the outputs
///   once they are back with their sample.
/// `compose(back_to_origin, origin_to_llm) == composed` by construction and by test.
/// Backward (gradients of the encoder outputs) is `composed.inverse()`.
struct encoder_to_llm_plans {
  rearrangement composed;
  rearrangement back_to_origin;
  rearrangement origin_to_llm;
};

/// The composed encoder→LLM plan Π_M ∘ Π_E⁻¹ of one encoder modality: from where the encoder
/// phase ran (Π_E's destination) straight to the assembly layout on the LLM ranks.
///
/// `encoder`: that modality's phase items (`encoder_phase_items`); `encoder_plan`: Π_E over
/// those items (source = origin layout, destination = encoder ranks); `llm_plan`: Π_M over
/// samples (source = origin layout, destination = LLM ranks). The plans must have the same
/// rank count and `encoder_plan` one item per encoder item; with `plan_validation::checked`
/// both plans are also validated and every segment must start on its sample's origin rank
/// (the sample model: a sample and its segments live together before balancing). Violations
/// throw `invalid_input` naming the item. `trusted` is for callers that built the plans
/// themselves (the orchestrator). Writes into `out` (its buffers are reused; it must not be
/// one of the inputs). O(n + samples + ranks).
/// @see OrchMLLM §6, eq. A'_Ek = (Π_M ∘ Π_Ek⁻¹)(A_Ek).
inline void compose_to_llm(const phase_items& encoder, const rearrangement& encoder_plan, const rearrangement& llm_plan,
                           plan_validation validation, rearrangement& out) {
  const bool validate = validation == plan_validation::checked;
  if (validate) {
    encoder_plan.validate();
    llm_plan.validate();
  }
  if (encoder_plan.size() != encoder.size())
    detail::throw_invalid("compose_to_llm: encoder plan has ", encoder_plan.size(), " items, the phase has ",
                          encoder.size());
  if (encoder_plan.ranks != llm_plan.ranks)
    detail::throw_invalid("compose_to_llm: encoder plan has ", encoder_plan.ranks, " ranks, LLM plan ", llm_plan.ranks);
  assembly_layout(encoder, llm_plan, plan_validation::trusted, out.destination);
  if (validate)
    for (std::size_t i = 0; i < encoder.size(); ++i)
      if (encoder_plan.source[i].rank != llm_plan.source[encoder.sample_of[i]].rank)
        detail::throw_invalid("compose_to_llm: encoder item ", i, " starts on rank ", encoder_plan.source[i].rank,
                              " but its sample ", encoder.sample_of[i], " starts on rank ",
                              llm_plan.source[encoder.sample_of[i]].rank);
  out.ranks = encoder_plan.ranks;
  out.source = encoder_plan.destination;
}

/// `compose_to_llm` (validating both plans) into a new rearrangement.
[[nodiscard]] inline rearrangement compose_to_llm(const phase_items& encoder, const rearrangement& encoder_plan,
                                                  const rearrangement& llm_plan) {
  rearrangement out;
  compose_to_llm(encoder, encoder_plan, llm_plan, plan_validation::checked, out);
  return out;
}

/// Builds the composed encoder→LLM plan (`compose_to_llm`, validated) and its two-hop
/// reference for one encoder modality. O(n + samples + ranks).
/// @see OrchMLLM §6, eq. A'_Ek = (Π_M ∘ Π_Ek⁻¹)(A_Ek).
[[nodiscard]] inline encoder_to_llm_plans compose_encoder_to_llm(const phase_items& encoder,
                                                                 const rearrangement& encoder_plan,
                                                                 const rearrangement& llm_plan) {
  encoder_to_llm_plans out;
  out.composed = compose_to_llm(encoder, encoder_plan, llm_plan);
  out.back_to_origin = encoder_plan.inverse();
  out.origin_to_llm = rearrangement{encoder_plan.ranks, encoder_plan.source, out.composed.destination};
  return out;
}

namespace detail {

inline void check_move_sizes(std::size_t from, std::size_t to, std::size_t bytes, const char* who) {
  if (bytes != from || to != from)
    throw_invalid(who, ": ", from, " sources, ", to, " destinations, ", bytes, " item_bytes");
}

/// Does nothing with an item: the per-item hook of a traffic pass that needs none.
struct no_item_hook {
  constexpr void operator()(std::size_t) const noexcept {}
};

/// `move_traffic` with the rank → node map given; `also(i)` is called for every item in the
/// same pass (a caller's second use of the items, e.g. their fingerprint, without a second
/// read of them).
template <class ItemHook = no_item_hook>
[[nodiscard]] traffic move_traffic(std::span<const location> from, std::span<const location> to,
                                   std::span<const std::uint64_t> item_bytes, const node_map& node,
                                   ItemHook&& also = {}) {
  check_move_sizes(from.size(), to.size(), item_bytes.size(), "move_traffic");
  traffic t;
  for (std::size_t i = 0; i < from.size(); ++i) {
    add_move(t, from[i].rank, to[i].rank, item_bytes[i], node);
    also(i);
  }
  return t;
}

}  // namespace detail

/// What moving item i from `from[i]` to `to[i]` moves, with `item_bytes[i]` bytes for item i:
/// items and bytes whose rank changes (self sends excluded) and bytes whose node changes
/// (node = rank / ranks_per_node; 0 = one node). Symmetric in `from` and `to`. Throws on size
/// mismatch. O(n).
[[nodiscard]] inline traffic move_traffic(std::span<const location> from, std::span<const location> to,
                                          std::span<const std::uint64_t> item_bytes, rank_t ranks_per_node) {
  detail::check_move_sizes(from.size(), to.size(), item_bytes.size(), "move_traffic");
  // A node table over the ranks used (up to 2^20 of them; larger ranks are divided).
  rank_t ranks = 0;
  for (std::size_t i = 0; i < from.size(); ++i) ranks = std::max({ranks, from[i].rank, to[i].rank});
  const rank_t table = std::min<std::uint64_t>(std::uint64_t{ranks} + 1, rank_t{1} << 20);
  return detail::move_traffic(from, to, item_bytes, detail::node_map(table, ranks_per_node));
}

/// What executing `r` moves (`move_traffic` of its source and destination). O(n + ranks).
[[nodiscard]] inline traffic rearrangement_traffic(const rearrangement& r, std::span<const std::uint64_t> item_bytes,
                                                   rank_t ranks_per_node) {
  return detail::move_traffic(r.source, r.destination, item_bytes, detail::node_map(r.ranks, ranks_per_node));
}

/// Forward traffic of the composed plan next to the two-hop reference (one direction; the
/// backward pass moves exactly the same amounts again with the inverse plans).
struct composition_traffic {
  traffic composed;  ///< one all-to-all
  traffic two_hop;   ///< back to origin + origin to LLM, summed
};

namespace detail {

/// `compare_composition`, calling `also(i)` for every item in the same pass (see
/// `move_traffic`).
template <class ItemHook = no_item_hook>
[[nodiscard]] composition_traffic compare_composition(const rearrangement& composed, std::span<const location> origin,
                                                      std::span<const std::uint64_t> item_bytes, rank_t ranks_per_node,
                                                      ItemHook&& also = {}) {
  check_move_sizes(composed.source.size(), composed.destination.size(), item_bytes.size(), "compare_composition");
  check_move_sizes(composed.source.size(), origin.size(), item_bytes.size(), "compare_composition");
  const node_map node(composed.ranks, ranks_per_node);
  composition_traffic c;
  traffic back, on;
  for (std::size_t i = 0; i < item_bytes.size(); ++i) {
    const rank_t from = composed.source[i].rank, to = composed.destination[i].rank, home = origin[i].rank;
    add_move(c.composed, from, to, item_bytes[i], node);
    add_move(back, from, home, item_bytes[i], node);
    add_move(on, home, to, item_bytes[i], node);
    also(i);
  }
  const char* what = "compare_composition: the two hops' bytes";
  c.two_hop = traffic{back.moved_items + on.moved_items, checked_add(back.moved_bytes, on.moved_bytes, what),
                      checked_add(back.inter_node_bytes, on.inter_node_bytes, what)};
  return c;
}

}  // namespace detail

/// Traffic of the composed plan `composed` (encoder ranks → LLM layout) next to the two hops
/// through `origin` (encoder ranks → origin → LLM layout), with `item_bytes[i]` bytes per
/// encoder output; the plans need not be materialized. One pass over the items. O(n + ranks).
[[nodiscard]] inline composition_traffic compare_composition(const rearrangement& composed,
                                                             std::span<const location> origin,
                                                             std::span<const std::uint64_t> item_bytes,
                                                             rank_t ranks_per_node) {
  return detail::compare_composition(composed, origin, item_bytes, ranks_per_node);
}

/// Traffic of `plans` with `item_bytes[i]` bytes per encoder output. O(n).
[[nodiscard]] inline composition_traffic compare_composition(const encoder_to_llm_plans& plans,
                                                             std::span<const std::uint64_t> item_bytes,
                                                             rank_t ranks_per_node) {
  return compare_composition(plans.composed, plans.origin_to_llm.source, item_bytes, ranks_per_node);
}

}  // namespace mmbal
