#pragma once
/// @file
/// Per-phase policies of the multi-phase orchestrator (docs/DESIGN.md §5.5): which partitioner
/// balances a phase under which cost, with which constraints, and the defaults that follow
/// OrchMLLM's evaluation setup. A policy holds a `phase_balancer`: any partitioner and any cost
/// (the library's or a user's), type-erased here, at the orchestrator's boundary, and nowhere
/// below it. Spec strings (`"lpt+refine"`) are the tool's and the Python module's interface and
/// live in `mmbal/spec/`, which this header does not include.
/// @see OrchMLLM §6, §8 ("Input preprocessing"), §8.3.

#include <mmbal/balance/constraints.hpp>
#include <mmbal/balance/conv_lpt.hpp>
#include <mmbal/balance/greedy_ascending.hpp>
#include <mmbal/balance/karmarkar_karp.hpp>
#include <mmbal/balance/lpt.hpp>
#include <mmbal/balance/migrate.hpp>
#include <mmbal/balance/padded_binary_search.hpp>
#include <mmbal/balance/problem.hpp>
#include <mmbal/balance/refine.hpp>
#include <mmbal/balance/tolerance_lpt.hpp>
#include <mmbal/core/concepts.hpp>
#include <mmbal/core/error.hpp>
#include <mmbal/core/types.hpp>
#include <mmbal/cost/functions.hpp>
#include <mmbal/cost/metrics.hpp>

#include <algorithm>
#include <concepts>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mmbal::orchestrate {

/// A policy object that names itself for reports and fingerprints: a member function `name()`
/// (the built-in costs, `migrate_partitioner`; e.g. `attention:alpha=1,beta=0`) or a static
/// `name` (the built-in partitioners, e.g. `lpt`).
template <class T>
concept self_named = requires(const T& t) {
  { t.name() } -> std::convertible_to<std::string>;
}
|| requires {
  { T::name } -> std::convertible_to<std::string_view>;
};

/// The name of a `self_named` object.
template <self_named T>
[[nodiscard]] std::string name_of(const T& t) {
  if constexpr (requires { t.name(); })
    return std::string(t.name());
  else
    return std::string(std::string_view(T::name));
}

/// What a phase's balancer can run: a copyable `balance::partitioner` for cost `C`, or a
/// `balance::problem_partitioner` (one that needs origins and bytes, as `migrate` does).
template <class P, class C>
concept phase_partitioner = batch_cost<C> && std::copy_constructible<P> &&
    (balance::partitioner<P, C> || balance::problem_partitioner<P, C>);

namespace detail {
/// Built-in partitioners, whose results the tests check; a user's are validated per call.
template <class P>
inline constexpr bool tested_partitioner = false;
template <>
inline constexpr bool tested_partitioner<balance::lpt> = true;
template <>
inline constexpr bool tested_partitioner<balance::greedy_ascending> = true;
template <>
inline constexpr bool tested_partitioner<balance::tolerance_lpt> = true;
template <>
inline constexpr bool tested_partitioner<balance::padded_binary_search> = true;
template <>
inline constexpr bool tested_partitioner<balance::conv_lpt> = true;
template <>
inline constexpr bool tested_partitioner<balance::karmarkar_karp> = true;
template <>
inline constexpr bool tested_partitioner<balance::migrate_partitioner> = true;

/// Throws `invalid_input` naming the partitioner `who` when `a` breaks `limits`: a group split
/// across bins, a bin's count outside the count cap, a bin's cost (folded in slot order, as
/// `bin_loads` and `refine` fold it) above the capacity. The built-in partitioners meet their
/// constraints by construction (tested); a user's result is checked here, since a plan that
/// breaks a hard cap would otherwise run. O(n log n) with groups, else O(n + bins).
template <batch_cost C>
void check_meets(const assignment& a, std::span<const length_t> weights, const C& cost,
                 const balance::constraints& limits, const std::string& who) {
  if (!limits.groups.empty()) {
    std::vector<std::pair<std::uint64_t, rank_t>> group_bin(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) group_bin[i] = {limits.groups[i], a.where[i].rank};
    std::sort(group_bin.begin(), group_bin.end());
    for (std::size_t i = 1; i < group_bin.size(); ++i)
      if (group_bin[i].first == group_bin[i - 1].first && group_bin[i].second != group_bin[i - 1].second)
        mmbal::detail::throw_invalid("the partitioner '", who, "' split group ", group_bin[i].first, " across bins ",
                                     group_bin[i - 1].second, " and ", group_bin[i].second);
  }
  if (limits.counts.kind != balance::count_cap::mode::none) {
    std::vector<std::uint64_t> counts(a.bins, 0);
    for (const location& l : a.where) ++counts[l.rank];
    const balance::detail::count_bounds cb = balance::detail::make_count_bounds(limits.counts, a.size(), a.bins);
    for (rank_t b = 0; b < a.bins; ++b)
      if (!cb.admits(counts[b]))
        mmbal::detail::throw_invalid("the partitioner '", who, "' broke the count cap: bin ", b, " holds ", counts[b],
                                     " items, allowed ", cb.lo, "..", cb.hi);
  }
  if (limits.capacity) {
    const std::vector<double> loads = bin_loads(a, weights, cost);
    for (rank_t b = 0; b < a.bins; ++b)
      if (!(loads[b] <= *limits.capacity))
        mmbal::detail::throw_invalid("the partitioner '", who, "' broke the capacity: bin ", b, " costs ", loads[b],
                                     " > ", *limits.capacity);
  }
}
}  // namespace detail

/// Options of a `phase_balancer`.
///
/// - `refine`: run `balance::refine` (default options) after the partitioner (default false).
/// - `algorithm_name`: the name reports and fingerprints show for the algorithm; empty = the
///   partitioner's own (`name_of`) followed by `+refine` when `refine` (default empty).
/// - `cost_name`: the same for the cost; empty = the cost's own (default empty).
struct balancer_options {
  bool refine = false;
  std::string algorithm_name{};
  std::string cost_name{};
};

/// Per-rank loads of one phase before and after balancing, under the phase's cost.
struct phase_loads {
  std::vector<double> before;  ///< per rank at the origin placement
  std::vector<double> after;   ///< per rank at the final placement
  double lower_bound = 0;      ///< `lower_bound`, or `equal_count_lower_bound` under equal counts
};

/// A typed (partitioner, cost) pair behind one interface: the orchestrator's boundary
/// (docs/DESIGN.md §4, §5.5). Built from any `P`, `C` with `phase_partitioner<P, C>`; everything
/// typed (the partitioner's call, `refine`, the bin costs of the report) runs inside, with the
/// concrete types, so a user's partitioner or cost costs one indirect call per phase.
///
/// - `balance(problem)`: runs the partitioner (`balance::partition_problem`), then `refine`
///   when asked. A user's partitioner's result is validated (right size and bins, every item
///   once, and the problem's groups, count cap and capacity met: `detail::check_meets`); the
///   built-in ones are tested instead. Throws `invalid_input` naming the algorithm.
/// - `measure(...)`: per-bin costs before/after and the lower bound, `cost/metrics.hpp`.
/// - `name()`, `cost_name()`: as given in `balancer_options`, else the objects' own names.
///   Throws `invalid_input` at construction when a name is empty (a type that is not
///   `self_named` needs one in the options).
/// Immutable and cheap to copy (shared state); safe to use from several threads.
class phase_balancer {
 public:
  template <class P, batch_cost C>
  requires phase_partitioner<P, C> phase_balancer(P partitioner, C cost, balancer_options options = {})
      : name_(std::move(options.algorithm_name)), cost_name_(std::move(options.cost_name)) {
    auto typed_model = std::make_shared<const typed<P, C>>(std::move(partitioner), std::move(cost), options.refine);
    if constexpr (self_named<P>) {
      if (name_.empty()) name_ = name_of(typed_model->part) + (options.refine ? "+refine" : "");
    }
    if constexpr (self_named<C>) {
      if (cost_name_.empty()) cost_name_ = name_of(typed_model->cost);
    }
    model_ = std::move(typed_model);
    if (name_.empty())
      mmbal::detail::throw_invalid("phase_balancer: the partitioner has no name (give one with a static `name`, ",
                                   "a `name()` member or balancer_options::algorithm_name)");
    if (cost_name_.empty())
      mmbal::detail::throw_invalid("phase_balancer: the cost has no name (give it a `name()` member or ",
                                   "balancer_options::cost_name)");
  }

  /// Balances `p` (see the class comment). O(the partitioner's cost (+ refine's)).
  [[nodiscard]] assignment balance(const balance::problem& p) const {
    assignment a = model_->balance(p, name_);
    if (a.bins != p.bins || a.size() != p.weights.size())
      mmbal::detail::throw_invalid("the partitioner '", name_, "' returned ", a.size(), " items on ", a.bins,
                                   " bins for ", p.weights.size(), " items on ", p.bins, " bins");
    return a;
  }

  /// Per-bin costs of `weights` at `before` and `after` (bin per item, each < bins) and the
  /// lower bound (equal-count bound when `equal_counts`). Folds every bin's items in ascending
  /// item id. O(n + bins).
  [[nodiscard]] phase_loads measure(std::span<const length_t> weights, std::span<const rank_t> before,
                                    std::span<const rank_t> after, rank_t bins, bool equal_counts) const {
    return model_->measure(weights, before, after, bins, equal_counts);
  }

  /// The algorithm's name, e.g. `lpt+refine`.
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  /// The cost's name, e.g. `tokens`.
  [[nodiscard]] const std::string& cost_name() const noexcept { return cost_name_; }

 private:
  struct model {
    virtual ~model() = default;
    [[nodiscard]] virtual assignment balance(const balance::problem& p, const std::string& name) const = 0;
    [[nodiscard]] virtual phase_loads measure(std::span<const length_t> weights, std::span<const rank_t> before,
                                              std::span<const rank_t> after, rank_t bins, bool equal_counts) const = 0;
  };

  template <class P, class C>
  struct typed final : model {
    P part;
    C cost;
    bool refine;
    typed(P p, C c, bool r) : part(std::move(p)), cost(std::move(c)), refine(r) {}
    [[nodiscard]] assignment balance(const balance::problem& p, const std::string& name) const override {
      if constexpr (std::same_as<P, balance::lpt> && std::same_as<C, mmbal::cost::tokens>)
        if (refine && !p.limits.any())  // the same result as the two calls below, in less time
          return balance::detail::lpt_refined(p.weights, p.bins, cost);
      assignment a = balance::partition_problem(part, p, cost);
      // A shipped partitioner's result is valid (tested), a user's once validated here.
      bool valid = detail::tested_partitioner<P>;
      if constexpr (!detail::tested_partitioner<P>) {
        if (a.bins == p.bins && a.size() == p.weights.size()) {
          a.validate();
          detail::check_meets(a, p.weights, cost, p.limits, name);
          valid = true;
        }
      }
      if (refine)  // a valid start's slots need no second check
        a = valid ? balance::detail::refine_valid_start(p.weights, std::move(a), cost, p.limits)
                  : balance::refine(p.weights, std::move(a), cost, p.limits);
      return a;
    }
    [[nodiscard]] phase_loads measure(std::span<const length_t> weights, std::span<const rank_t> before,
                                      std::span<const rank_t> after, rank_t bins, bool equal_counts) const override {
      phase_loads out;
      out.before = bin_loads(before, bins, weights, cost);
      out.after = bin_loads(after, bins, weights, cost);
      out.lower_bound =
          equal_counts ? equal_count_lower_bound(weights, bins, cost) : mmbal::lower_bound(weights, bins, cost);
      return out;
    }
  };

  std::shared_ptr<const model> model_;
  std::string name_;
  std::string cost_name_;
};

/// The default balancer of a phase under `cost`: the best-quality shipped setting whose price
/// stays within 2 × `lpt` on the 2,560-rank × 60-sample step (docs/DESIGN.md §5.1, §7):
///
/// - a `padded_cost` (`padded`, `padded-attention`): `padded_binary_search` (OrchMLLM Alg. 2;
///   `lpt+refine` ends 2.15 × above it on the omni LLM phase, and refine after it gains nothing);
/// - any other cost: `lpt` followed by `balance::refine` (`lpt+refine`; the phases of the omni
///   step move from 1.0013 / 1.00045 × the lower bound (image / LLM) to 1.00016 / 1.000005, at
///   1.4–2.4 × `lpt`'s time; with 8 samples per rank, where it gains 1–6 %, it costs 5–112 ×).
///
/// `spec::default_algorithm` names the same choice for a spec cost. Complexity: that of the
/// chosen algorithm.
template <batch_cost C>
[[nodiscard]] phase_balancer default_balancer(C cost) {
  if constexpr (padded_cost<C>)
    return phase_balancer(balance::padded_binary_search{}, std::move(cost));
  else
    return phase_balancer(balance::lpt{}, std::move(cost), balancer_options{.refine = true});
}

/// How one phase is balanced.
///
/// - `balancer`: the partitioner and the cost the phase's step time follows (default
///   `default_balancer(cost::tokens{})`, i.e. `lpt+refine` under `tokens`).
///   `migrate_partitioner` keeps items where they are when that costs at most (1 + eps) × the
///   best shipped algorithm's maximum for the cost (see `migrate`).
/// - `counts`: per-bin item-count limit (default none).
/// - `capacity`: hard per-bin cost cap (default none).
/// - `keep_groups`: items of samples with the same JSONL `group` stay on one rank
///   (default false: groups are ignored).
struct phase_policy {
  phase_balancer balancer = default_balancer(cost::tokens{});
  balance::count_cap counts{};
  std::optional<double> capacity{};
  bool keep_groups = false;
};

/// β/α of OrchMLLM's MLLM-10B LLM backbone (Qwen2-7B: h = 3584, f = 18944, 28 heads, 4 KV
/// heads, causal, gated MLP) from the FLOPs formula of `cost::flops`:
/// α = 2h(h + 2h_kv) + 2h² + 3·2hf per layer, β = 4h · 1/2 per layer, β/α ≈ 1.54e-5.
/// It makes `attention` weigh a 16K-token sample about 1.25× its token count.
inline constexpr double default_llm_beta = 1.54e-5;

/// The default policy of a phase: the cost follows OrchMLLM §8, the algorithm is that cost's
/// `default_balancer`:
///
/// - `llm`: `attention{1, 1.54e-5}` + `lpt+refine` — the full interleaved length, no padding, a
///   quadratic attention term;
/// - `image`, `video`: `tokens` + `lpt+refine` — ViT patches batched along the sequence, no
///   padding;
/// - `audio`: `padded` + `padded_binary_search` — Whisper batches clips with padding (OrchMLLM
///   Alg. 2);
/// - any other phase: `tokens` + `lpt+refine` — an unknown encoder, taken as unpadded.
///
/// No constraints by default. @see OrchMLLM §8 "Input preprocessing", Alg. 1, Alg. 2.
[[nodiscard]] inline phase_policy default_policy(std::string_view phase) {
  if (phase == "llm") return {default_balancer(cost::attention{1.0, default_llm_beta})};
  if (phase == "audio") return {default_balancer(cost::padded{})};
  return {};
}

/// A one-line description of a policy, e.g. `tokens / lpt`.
[[nodiscard]] inline std::string describe(const phase_policy& p) {
  return p.balancer.cost_name() + " / " + p.balancer.name();
}

}  // namespace mmbal::orchestrate
