#pragma once
/// @file
/// A pipeline model (docs/DESIGN.md §5.7): which modules every stage holds, each with its cost
/// function and frozen status, turning a micro-batch's samples into forward and backward
/// times per stage with Cornstarch's frozen-status-aware backward rules.
/// @see Cornstarch §4.2 (the T_backward cases); DistTrain §6.2 (the encoder on the first stage).

#include <mmbal/balance/micro_batches.hpp>
#include <mmbal/core/error.hpp>
#include <mmbal/cost/any_batch_cost.hpp>
#include <mmbal/pipeline/schedule.hpp>
#include <mmbal/workload/sample.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace mmbal::pipeline {

/// What a module computes on; only `phase` decides its items, the kind is descriptive.
enum class module_kind : std::uint8_t {
  encoder,    ///< a modality encoder (items: that modality's segments, weight = encoder length)
  llm,        ///< (a share of) the LLM layers (items: samples, weight = LLM tokens)
  generator,  ///< a modality generator after the LLM (items: that modality's segments)
};

/// One module on a stage. Its forward time for a micro-batch is `share` × `cost` of the
/// micro-batch's items of `phase` ("llm": one item per sample, its LLM length; a modality name:
/// that modality's segments, their encoder lengths; a modality the workload lacks: no items).
struct pipeline_module {
  std::string name;
  module_kind kind = module_kind::llm;
  std::string phase = "llm";
  double share = 1.0;           ///< e.g. 8 of 32 LLM layers: 0.25; also scales cost units to seconds
  cost::any_batch_cost cost{};  ///< any `batch_cost` (default `tokens`)
  bool trainable = true;
};

/// The modules of one stage, in forward order.
struct stage_model {
  std::vector<pipeline_module> modules;
};

/// A pipeline: stages in forward order and whether activations are recomputed.
struct pipeline_model {
  std::vector<stage_model> stages;
  bool recompute = false;  ///< activation recomputation (checkpointing): backward re-runs the forward
};

/// Throws `invalid_input` unless there is at least one stage and every share is finite ≥ 0.
inline void validate(const pipeline_model& model) {
  if (model.stages.empty()) mmbal::detail::throw_invalid("pipeline model: no stages");
  for (std::size_t s = 0; s < model.stages.size(); ++s)
    for (std::size_t k = 0; k < model.stages[s].modules.size(); ++k) {
      const double x = model.stages[s].modules[k].share;
      if (!(std::isfinite(x) && x >= 0))
        mmbal::detail::throw_invalid("pipeline model: stages[", s, "].modules[", k, "].share = ", x, " is not >= 0");
    }
}

/// Backward time as a multiple of forward time for every module ([stage][module]), Cornstarch
/// §4.2: 0 for a frozen module with no trainable module upstream of it — nothing upstream
/// needs its gradients; 1 for a frozen module with a trainable one upstream (input gradients
/// only); 2 for a trainable module (input and weight gradients); plus 1 with recomputation for
/// every module that runs a backward (a module with factor 0 keeps no activations to
/// recompute). Upstream follows the data, not the listing (Cornstarch's encoders are parallel
/// branches): an encoder's are the earlier encoders of its own phase; an LLM module's are every
/// earlier encoder and LLM module; a generator's are those and the earlier generators of its
/// own phase. So a frozen audio encoder listed after a trainable image encoder on one stage
/// still has factor 0. O(modules · log phases).
[[nodiscard]] inline std::vector<std::vector<double>> backward_factors(const pipeline_model& model) {
  std::vector<std::vector<double>> out(model.stages.size());
  bool trunk = false;  // a trainable encoder or LLM module so far: upstream of every LLM module
  std::map<std::string, bool, std::less<>> encoders, generators;  // per phase: a trainable one so far
  for (std::size_t s = 0; s < model.stages.size(); ++s)
    for (const pipeline_module& mod : model.stages[s].modules) {
      bool upstream = trunk;
      if (mod.kind == module_kind::encoder) upstream = encoders[mod.phase];
      if (mod.kind == module_kind::generator) upstream = trunk || generators[mod.phase];
      double f = mod.trainable ? 2.0 : upstream ? 1.0 : 0.0;
      if (model.recompute && f > 0) f += 1.0;
      out[s].push_back(f);
      if (!mod.trainable) continue;
      if (mod.kind == module_kind::generator)
        generators[mod.phase] = true;
      else
        trunk = true;
      if (mod.kind == module_kind::encoder) encoders[mod.phase] = true;
    }
  return out;
}

namespace detail {
// The cost of one phase's items of the given samples.
inline double phase_cost(const cost::any_batch_cost& c, const workload& w, std::span<const std::uint32_t> samples,
                         const std::string& phase) {
  std::optional<modality_id> modality;
  if (phase != "llm") {
    modality = w.find_modality(phase);
    if (!modality) return 0.0;
  }
  std::vector<length_t> lengths;
  for (const std::uint32_t i : samples) {
    if (i >= w.samples.size())
      mmbal::detail::throw_invalid("stage_times_from_samples: sample index ", i, " >= ", w.samples.size(), " samples");
    const sample& s = w.samples[i];
    if (!modality) {
      const std::uint64_t len = s.llm_length();
      if (len > UINT32_MAX) mmbal::detail::throw_invalid("sample ", s.id, ": LLM length ", len, " exceeds 2^32 - 1");
      lengths.push_back(static_cast<length_t>(len));
    } else {
      for (const segment& g : s.segments)
        if (g.modality == *modality) lengths.push_back(g.encoder_len);
    }
  }
  return c.batch(lengths);
}
}  // namespace detail

/// Forward and backward times per stage of every micro-batch; `micro_batches[j]` lists the
/// sample indices (into `w.samples`) of micro-batch j. Forward(s, j) = Σ over the modules of
/// stage s of share × cost; backward(s, j) = Σ share × cost × `backward_factors`.
/// O(modules · total samples in the micro-batches). Errors: invalid model, no micro-batch,
/// a sample index out of range or in two micro-batches.
[[nodiscard]] inline stage_times stage_times_from_samples(const pipeline_model& model, const workload& w,
                                                          std::span<const std::vector<std::uint32_t>> micro_batches) {
  validate(model);
  if (micro_batches.empty()) mmbal::detail::throw_invalid("stage_times_from_samples: no micro-batches");
  const auto factors = backward_factors(model);
  const auto p = static_cast<std::uint32_t>(model.stages.size());
  const std::uint32_t m = checked_count(micro_batches.size(), "micro-batches");
  stage_times t(p, m);
  std::vector<bool> seen(w.samples.size(), false);  // a sample in two micro-batches was counted twice
  for (std::uint32_t j = 0; j < m; ++j) {
    for (const std::uint32_t i : micro_batches[j]) {
      if (i >= w.samples.size())
        mmbal::detail::throw_invalid("stage_times_from_samples: micro-batch ", j, " holds sample ", i, " of ",
                                     w.samples.size());
      if (seen[i])
        mmbal::detail::throw_invalid("stage_times_from_samples: sample ", i, " is in two micro-batches (again in ", j,
                                     ")");
      seen[i] = true;
    }
    for (std::uint32_t s = 0; s < p; ++s)
      for (std::size_t k = 0; k < model.stages[s].modules.size(); ++k) {
        const pipeline_module& mod = model.stages[s].modules[k];
        const double f = mod.share * detail::phase_cost(mod.cost, w, micro_batches[j], mod.phase);
        t.forward_at(s, j) += f;
        t.backward_at(s, j) += f * factors[s][k];
      }
  }
  return t;
}

/// Every data-parallel rank's micro-batches: the samples stay on their rank (`sample::rank`)
/// and each rank's samples are split into `micro_batches` micro-batches by
/// `balance::split_micro_batches` (`part`, default LPT, per rank on the LLM lengths with `split_cost`, rounds
/// aligned by cost). Result [rank][micro-batch] = sample indices in slot order.
/// O(n log n + d·m log m). Errors: as `split_micro_batches`; a sample's rank ≥ ranks.
template <batch_cost C, class P = balance::lpt>
requires balance::partitioner<P, C>
[[nodiscard]] std::vector<std::vector<std::vector<std::uint32_t>>> rank_micro_batches(const workload& w, rank_t ranks,
                                                                                      std::uint32_t micro_batches,
                                                                                      const C& split_cost,
                                                                                      const P& part = {}) {
  const phase_items items = llm_phase_items(w);
  const partition by_rank{ranks, items.origin};
  const balance::micro_batch_plan plan =
      balance::split_micro_batches(items.weights, by_rank, micro_batches, split_cost, part);
  const auto batches = plan.batches();
  std::vector<std::vector<std::vector<std::uint32_t>>> out(ranks,
                                                           std::vector<std::vector<std::uint32_t>>(micro_batches));
  for (rank_t r = 0; r < ranks; ++r)
    for (std::uint32_t k = 0; k < micro_batches; ++k) out[r][k] = batches[std::size_t{k} * ranks + r];
  return out;
}

}  // namespace mmbal::pipeline
