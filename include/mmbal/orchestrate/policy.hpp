#pragma once
/// @file
/// Per-phase policies of the multi-phase orchestrator (docs/DESIGN.md §5.5): which cost function,
/// which partitioner and which constraints balance a phase, and the defaults that follow
/// OrchMLLM's evaluation setup. @see OrchMLLM §6, §8 ("Input preprocessing"), §8.3.

#include <mmbal/balance/constraints.hpp>
#include <mmbal/balance/spec.hpp>
#include <mmbal/core/error.hpp>
#include <mmbal/cost/spec.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace mmbal::orchestrate {

/// How one phase is balanced.
///
/// - `cost`: the batch-length function the phase's step time follows (default `tokens`).
/// - `algorithm`: the partitioner spec (default `lpt`); `migrate:eps=...` keeps items where
///   they are when that costs at most (1 + eps) × lpt's maximum.
/// - `counts`: per-bin item-count limit (default none).
/// - `capacity`: hard per-bin cost cap (default none).
/// - `keep_groups`: items of samples with the same JSONL `group` stay on one rank
///   (default false: groups are ignored).
struct phase_policy {
  cost::any_cost cost = cost::tokens{};
  balance::algorithm_spec algorithm = balance::parse_algorithm("lpt");
  balance::count_cap counts{};
  std::optional<double> capacity{};
  bool keep_groups = false;
};

/// β/α of OrchMLLM's MLLM-10B LLM backbone (Qwen2-7B: h = 3584, f = 18944, 28 heads, 4 KV
/// heads, causal, gated MLP) from the FLOPs formula of `cost::flops`:
/// α = 2h(h + 2h_kv) + 2h² + 3·2hf per layer, β = 4h · 1/2 per layer, β/α ≈ 1.54e-5.
/// It makes `attention` weigh a 16K-token sample about 1.25× its token count.
inline constexpr double default_llm_beta = 1.54e-5;

/// The default policy of a phase, following OrchMLLM §8:
///
/// | phase            | cost                                   | algorithm | why |
/// |---|---|---|---|
/// | `llm`            | `attention:alpha=1,beta=1.54e-5`       | `lpt`     | full interleaved length, no padding,
/// quadratic attention term | | `image`, `video` | `tokens`                               | `lpt`     | ViT patches
/// batched along the sequence, no padding | | `audio`          | `padded`                               | `padded`  |
/// Whisper batches clips with padding (OrchMLLM Alg. 2) | | any other        | `tokens`                               |
/// `lpt`     | unknown encoder: unpadded |
///
/// No constraints by default. @see OrchMLLM §8 "Input preprocessing", Alg. 1, Alg. 2.
[[nodiscard]] inline phase_policy default_policy(std::string_view phase) {
  phase_policy p;
  if (phase == "llm") {
    p.cost = cost::attention{1.0, default_llm_beta};
  } else if (phase == "audio") {
    p.cost = cost::padded{};
    p.algorithm = balance::parse_algorithm("padded");
  }
  return p;
}

/// A policy from the tool's spec strings; an empty string keeps the phase's default.
/// Throws `invalid_input` naming the phase and the spec when a spec does not parse.
[[nodiscard]] inline phase_policy policy_from_specs(std::string_view phase, std::string_view cost_spec,
                                                    std::string_view algorithm_spec) {
  phase_policy p = default_policy(phase);
  try {
    if (!cost_spec.empty()) p.cost = cost::parse_cost(cost_spec);
    if (!algorithm_spec.empty()) p.algorithm = balance::parse_algorithm(algorithm_spec);
  } catch (const invalid_input& e) {
    detail::throw_invalid("phase '", phase, "': ", e.what());
  }
  return p;
}

/// A one-line description of a policy, e.g. `tokens / lpt`.
[[nodiscard]] inline std::string describe(const phase_policy& p) {
  return cost::to_spec(p.cost) + " / " + balance::to_spec(p.algorithm);
}

}  // namespace mmbal::orchestrate
