#pragma once
/// @file
/// Per-phase policies of the multi-phase orchestrator (docs/DESIGN.md §5.5): which cost function,
/// which partitioner and which constraints balance a phase, and the defaults that follow
/// OrchMLLM's evaluation setup. @see OrchMLLM §6, §8 ("Input preprocessing"), §8.3.

#include <mmbal/balance/constraints.hpp>
#include <mmbal/balance/spec.hpp>
#include <mmbal/core/error.hpp>
#include <mmbal/cost/spec.hpp>

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace mmbal::orchestrate {

namespace detail {
template <class P, class Costs>
inline constexpr bool partitions_every_cost = false;
template <class P, class... Cs>
inline constexpr bool partitions_every_cost<P, std::variant<Cs...>> = (balance::partitioner<P, Cs> && ...);
}  // namespace detail

/// A partitioner the orchestrator can run on any phase: it models `balance::partitioner` for
/// every built-in cost (`cost::any_cost`'s alternatives), e.g. a class whose call operator is a
/// template over `batch_cost C`. Checked first against `cost::tokens`, so a type that is no
/// partitioner at all is reported as such.
template <class P>
concept any_cost_partitioner = std::copy_constructible<P> && balance::partitioner<P, cost::tokens> &&
    detail::partitions_every_cost<P, cost::any_cost>;

/// A user's partitioner, type-erased at the orchestrator's boundary (docs/DESIGN.md §5.5, §8):
/// holds a copy of any `any_cost_partitioner` and a name for reports and fingerprints. Calling
/// it visits the phase's cost and calls the held partitioner with the concrete cost type, so the
/// partitioner's own code stays generic and typed. Itself a `balance::partitioner` for every
/// built-in cost. The orchestrator validates what it returns (size, bins, every item placed
/// once) and throws `invalid_input` naming the phase and the name otherwise.
class any_partitioner {
 public:
  /// Wraps `p` under `name` (shown as the phase's algorithm; must not be empty).
  template <any_cost_partitioner P>
  any_partitioner(std::string name, P p)
      : name_(std::move(name)),
        run_([p = std::move(p)](std::span<const length_t> weights, rank_t bins, const cost::any_cost& c,
                                const balance::constraints& limits) {
          return std::visit([&](const auto& concrete) -> assignment { return p(weights, bins, concrete, limits); }, c);
        }) {
    if (name_.empty()) mmbal::detail::throw_invalid("any_partitioner: empty name");
  }

  /// Runs the held partitioner with the concrete type of `c`.
  [[nodiscard]] assignment operator()(std::span<const length_t> weights, rank_t bins, const cost::any_cost& c,
                                      const balance::constraints& limits = {}) const {
    return run_(weights, bins, c, limits);
  }

  /// The name given at construction.
  [[nodiscard]] const std::string& name() const noexcept { return name_; }

 private:
  std::string name_;
  std::function<assignment(std::span<const length_t>, rank_t, const cost::any_cost&, const balance::constraints&)> run_;
};

/// How one phase is balanced.
///
/// - `cost`: the batch-length function the phase's step time follows (default `tokens`).
/// - `algorithm`: the partitioner spec (default `lpt`); `migrate:eps=...` keeps items where
///   they are when that costs at most (1 + eps) × lpt's maximum.
/// - `partitioner`: a user's partitioner (default none). When set it replaces `algorithm`: it
///   gets the phase's weights, the rank count, the cost and the constraints (not the origins).
/// - `counts`: per-bin item-count limit (default none).
/// - `capacity`: hard per-bin cost cap (default none).
/// - `keep_groups`: items of samples with the same JSONL `group` stay on one rank
///   (default false: groups are ignored).
struct phase_policy {
  cost::any_cost cost = cost::tokens{};
  balance::algorithm_spec algorithm = balance::parse_algorithm("lpt");
  std::optional<any_partitioner> partitioner{};
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
    mmbal::detail::throw_invalid("phase '", phase, "': ", e.what());
  }
  return p;
}

/// The algorithm a policy runs, as reports show it: the user partitioner's name, or the
/// canonical spec of `algorithm`.
[[nodiscard]] inline std::string algorithm_label(const phase_policy& p) {
  return p.partitioner ? p.partitioner->name() : balance::to_spec(p.algorithm);
}

/// A one-line description of a policy, e.g. `tokens / lpt`.
[[nodiscard]] inline std::string describe(const phase_policy& p) {
  return cost::to_spec(p.cost) + " / " + algorithm_label(p);
}

}  // namespace mmbal::orchestrate
