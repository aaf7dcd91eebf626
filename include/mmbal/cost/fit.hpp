#pragma once
/// @file
/// LoongForge's fitted cost model (docs/DESIGN.md §4): from observed training steps (every
/// rank's sample lengths and the measured step time) fit the per-sample cost
/// c(L) = x·L² + y·L + z with x, y, z ≥ 0 such that the predicted step time
/// max_r Σ_{samples on r} c(L) matches the measurements; refit online over a window of recent
/// steps; and decide before each step whether balancing can pay off. The result is a
/// `cost::fitted`, so it plugs into every balancer and the orchestrator like any other cost.
/// @see LoongForge §2.1 (warm-up modelling: quadratic, linear and fixed terms, max over DP
///      ranks replaced by a softmax, non-negative least squares) and §2.3 (intelligent trigger).

#include <mmbal/core/error.hpp>
#include <mmbal/core/types.hpp>
#include <mmbal/cost/functions.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

namespace mmbal::cost {

// ---------------------------------------------------------------------------------------------
// Non-negative least squares in three unknowns
// ---------------------------------------------------------------------------------------------

/// One row of a three-unknown least-squares problem: features a and target b (want a·θ ≈ b).
struct nnls_row {
  std::array<double, 3> a{};
  double b = 0;
};

/// The solution of `nnls3`.
struct nnls_solution {
  std::array<double, 3> theta{};  ///< θ ≥ 0 (every component)
  double residual = 0;            ///< Σ (a·θ − b)² over the rows
};

/// Σ (a·θ − b)² over `rows`, summed in row order.
[[nodiscard]] inline double nnls_residual(std::span<const nnls_row> rows, const std::array<double, 3>& theta) {
  double sum = 0;
  for (const nnls_row& r : rows) {
    const double e = r.a[0] * theta[0] + r.a[1] * theta[1] + r.a[2] * theta[2] - r.b;
    sum += e * e;
  }
  return sum;
}

/// Exact non-negative least squares in three unknowns: argmin_{θ ≥ 0} Σ (a·θ − b)².
///
/// Method: the columns are scaled to unit norm (conditioning), the 3×3 normal equations are
/// formed once, and every non-empty support S ⊆ {0, 1, 2} (7 of them, plus θ = 0) is tried:
/// the unconstrained least-squares solution on S (Cholesky of the sub-Gram matrix; skipped
/// when a pivot falls below 1e-11, i.e. the columns of S are numerically dependent) is kept
/// when it is ≥ 0, and the feasible candidate with the smallest residual wins (ties: the
/// earlier support in the order ∅, {0}, {1}, {2}, {0,1}, {0,2}, {1,2}, {0,1,2}). Exact because
/// the NNLS optimum, by its KKT conditions, is the unconstrained optimum on its own support,
/// and some optimum has linearly independent support columns (Carathéodory).
/// Complexity O(rows) plus a constant. Deterministic. Throws `invalid_input` when a row holds
/// a non-finite value, naming the row.
[[nodiscard]] inline nnls_solution nnls3(std::span<const nnls_row> rows) {
  std::array<double, 3> norm{};
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const nnls_row& r = rows[i];
    if (!std::isfinite(r.a[0]) || !std::isfinite(r.a[1]) || !std::isfinite(r.a[2]) || !std::isfinite(r.b))
      mmbal::detail::throw_invalid("nnls3: row ", i, " holds a non-finite value (a = [", r.a[0], ", ", r.a[1], ", ",
                                   r.a[2], "], b = ", r.b, ")");
    for (int j = 0; j < 3; ++j) norm[j] += r.a[j] * r.a[j];
  }
  std::array<double, 3> scale{};  // column j is multiplied by scale[j]; θ_j = scale[j] · φ_j
  for (int j = 0; j < 3; ++j) scale[j] = norm[j] > 0 ? 1.0 / std::sqrt(norm[j]) : 0.0;
  std::array<std::array<double, 3>, 3> gram{};
  std::array<double, 3> rhs{};
  for (const nnls_row& r : rows) {
    const std::array<double, 3> s{r.a[0] * scale[0], r.a[1] * scale[1], r.a[2] * scale[2]};
    for (int i = 0; i < 3; ++i) {
      rhs[i] += s[i] * r.b;
      for (int j = 0; j < 3; ++j) gram[i][j] += s[i] * s[j];
    }
  }
  nnls_solution best{{0, 0, 0}, nnls_residual(rows, {0, 0, 0})};
  for (unsigned support = 1; support < 8; ++support) {
    // Supports by size, then lexicographically: {0},{1},{2},{0,1},{0,2},{1,2},{0,1,2}.
    static constexpr std::array<unsigned, 7> order{1, 2, 4, 3, 5, 6, 7};
    const unsigned mask = order[support - 1];
    std::array<int, 3> idx{};
    int k = 0;
    for (int j = 0; j < 3; ++j)
      if (mask & (1u << j)) idx[k++] = j;
    // Cholesky of the k×k sub-Gram matrix, then two triangular solves.
    std::array<std::array<double, 3>, 3> l{};
    bool singular = false;
    for (int i = 0; i < k && !singular; ++i) {
      for (int j = 0; j <= i; ++j) {
        double s = gram[idx[i]][idx[j]];
        for (int m = 0; m < j; ++m) s -= l[i][m] * l[j][m];
        if (i == j) {
          if (!(s > 1e-11)) {
            singular = true;
            break;
          }
          l[i][i] = std::sqrt(s);
        } else {
          l[i][j] = s / l[j][j];
        }
      }
    }
    if (singular) continue;
    std::array<double, 3> y{}, phi{};
    for (int i = 0; i < k; ++i) {
      double s = rhs[idx[i]];
      for (int m = 0; m < i; ++m) s -= l[i][m] * y[m];
      y[i] = s / l[i][i];
    }
    for (int i = k - 1; i >= 0; --i) {
      double s = y[i];
      for (int m = i + 1; m < k; ++m) s -= l[m][i] * phi[m];
      phi[i] = s / l[i][i];
    }
    std::array<double, 3> theta{0, 0, 0};
    bool feasible = true;
    for (int i = 0; i < k; ++i) {
      if (!(phi[i] >= 0)) feasible = false;
      theta[idx[i]] = phi[i] * scale[idx[i]];
    }
    if (!feasible) continue;
    const double residual = nnls_residual(rows, theta);
    if (residual < best.residual) best = {theta, residual};
  }
  return best;
}

// ---------------------------------------------------------------------------------------------
// Observed steps and their features
// ---------------------------------------------------------------------------------------------

/// One measured training step: the sample lengths on every data-parallel rank and the wall
/// time of the step (seconds, or any unit: the fitted coefficients take the same unit).
struct observed_step {
  std::vector<std::vector<length_t>> ranks;  ///< ranks[r] = lengths of the samples rank r ran
  double step_time = 0;                      ///< measured step time, finite and > 0
};

/// The features of one rank in one step: the model's load is x·sum_sq + y·sum + z·count.
struct rank_features {
  double sum_sq = 0;  ///< Σ L²
  double sum = 0;     ///< Σ L
  double count = 0;   ///< number of samples
};

/// A step reduced to its per-rank features (what the fitter and the online window keep).
struct step_features {
  std::vector<rank_features> ranks;
  double step_time = 0;
};

/// Throws `invalid_input` unless `step` has at least one rank, some rank holds a sample, and
/// its step time is finite and > 0. `index` names the step in the message. O(ranks).
inline void validate_step(const observed_step& step, std::size_t index) {
  if (step.ranks.empty()) mmbal::detail::throw_invalid("fit: step ", index, ", field 'ranks': no ranks");
  if (!std::isfinite(step.step_time) || !(step.step_time > 0))
    mmbal::detail::throw_invalid("fit: step ", index, ", field 'step_time': ", step.step_time,
                                 " must be finite and > 0");
  if (std::all_of(step.ranks.begin(), step.ranks.end(), [](const auto& r) { return r.empty(); }))
    mmbal::detail::throw_invalid("fit: step ", index, ", field 'ranks': no rank holds a sample");
}

/// Validates `step` (see `validate_step`) and reduces it to per-rank features (Σ L², Σ L, count,
/// each summed in sample order). O(samples).
[[nodiscard]] inline step_features features_of(const observed_step& step, std::size_t index) {
  validate_step(step, index);
  step_features f;
  f.step_time = step.step_time;
  f.ranks.reserve(step.ranks.size());
  for (const auto& lengths : step.ranks) {
    rank_features r;
    for (length_t l : lengths) {
      const double dl = l;
      r.sum_sq += dl * dl;
      r.sum += dl;
    }
    r.count = static_cast<double>(lengths.size());
    f.ranks.push_back(r);
  }
  return f;
}

/// Throws `invalid_input` unless the reduced step has at least one rank, finite non-negative
/// features, some rank with a sample, and a finite step time > 0; `index` names the step.
inline void validate_step(const step_features& st, std::size_t index) {
  if (st.ranks.empty()) mmbal::detail::throw_invalid("fit: step ", index, ", field 'ranks': no ranks");
  if (!std::isfinite(st.step_time) || !(st.step_time > 0))
    mmbal::detail::throw_invalid("fit: step ", index, ", field 'step_time': ", st.step_time, " must be finite and > 0");
  bool any = false;
  for (std::size_t r = 0; r < st.ranks.size(); ++r) {
    const rank_features& f = st.ranks[r];
    if (!std::isfinite(f.sum_sq) || !std::isfinite(f.sum) || !std::isfinite(f.count) || f.sum_sq < 0 || f.sum < 0 ||
        f.count < 0)
      mmbal::detail::throw_invalid("fit: step ", index, ", field 'ranks[", r, "]': features must be finite and >= 0");
    any = any || f.count > 0;
  }
  if (!any) mmbal::detail::throw_invalid("fit: step ", index, ", field 'ranks': no rank holds a sample");
}

/// The load of a rank under `model`: x·Σ L² + y·Σ L + z·count.
[[nodiscard]] inline double rank_load(const fitted& model, const rank_features& r) noexcept {
  return model.x() * r.sum_sq + model.y() * r.sum + model.z() * r.count;
}

/// Predicted step time: the exact maximum over ranks of the rank loads. O(ranks).
[[nodiscard]] inline double predict_step_time(const fitted& model, const step_features& step) noexcept {
  double best = 0;
  for (const rank_features& r : step.ranks) best = std::max(best, rank_load(model, r));
  return best;
}

/// Predicted step time of an observed step (max over ranks of Σ c(L)). O(samples).
[[nodiscard]] inline double predict_step_time(const fitted& model, const observed_step& step) {
  double best = 0;
  for (const auto& lengths : step.ranks) {
    double load = 0;
    for (length_t l : lengths) load += model.item(l);
    best = std::max(best, load);
  }
  return best;
}

/// Relative prediction errors |predicted − measured| / measured of a set of steps.
struct prediction_error {
  double mean = 0;  ///< mean relative error
  double max = 0;   ///< largest relative error
};

/// The relative errors of `model` on `steps` (exact max over ranks). O(Σ ranks).
[[nodiscard]] inline prediction_error prediction_errors(const fitted& model, std::span<const step_features> steps) {
  prediction_error e;
  for (const step_features& s : steps) {
    const double rel = std::abs(predict_step_time(model, s) - s.step_time) / s.step_time;
    e.mean += rel;
    e.max = std::max(e.max, rel);
  }
  if (!steps.empty()) e.mean /= static_cast<double>(steps.size());
  return e;
}

// ---------------------------------------------------------------------------------------------
// The fitter
// ---------------------------------------------------------------------------------------------

/// Options of `fit_cost`.
struct fit_options {
  /// Final relative temperature t of the log-sum-exp that smooths the max over ranks: step k's
  /// prediction while fitting is τ·ln Σ_r exp(load_r / τ) with τ = t · step_time_k, which lies in
  /// [max_r load_r, max_r load_r + τ·ln R]. So t bounds the smoothing bias relative to the step
  /// time by t·ln R (0.04 % at R = 64 for the default 1e-4), far below measurement noise, while
  /// the objective stays differentiable. Must be finite and > 0.
  double temperature = 1e-4;
  /// The refinement anneals: it starts at `temperature · anneal_start` and divides the
  /// temperature by 10 per stage until `temperature` (default 100: stages 0.01, 0.001, 0.0001), so
  /// early stages see a smooth landscape and the last one the nearly exact max. Must be ≥ 1.
  double anneal_start = 100;
  /// Gauss–Newton iterations per temperature stage (bounded work; a stage also ends when an
  /// iteration improves the objective by less than 1e-12 relative). Default 30.
  std::uint32_t iterations_per_stage = 30;
  /// Fixed-point rounds of the heaviest-rank initialisation (stops early when the heaviest
  /// ranks repeat). Default 8.
  std::uint32_t init_rounds = 8;
};

/// The result of `fit_cost`.
struct fit_result {
  fitted model;                  ///< the fitted cost, c(L) = x L² + y L + z, x, y, z ≥ 0
  fitted initial;                ///< the heaviest-rank NNLS initialisation
  prediction_error error;        ///< relative errors of `model` on the fitted steps (exact max)
  double objective = 0;          ///< Σ_k ((max_r load − T_k) / T_k)² of `model` (exact max)
  std::uint32_t iterations = 0;  ///< Gauss–Newton iterations taken (all stages)
};

namespace fit_detail {

/// The fitting problem in dimensionless form: feature j of rank r in step k divided by
/// T_k · scale_j, so that the parameters φ_j = θ_j · scale_j are O(1) and a perfect model
/// predicts 1 for every step.
struct scaled_steps {
  std::vector<std::array<double, 3>> features;  // all ranks of all steps, step-major
  std::vector<std::size_t> first;               // first[k] .. first[k+1]: the ranks of step k
  std::array<double, 3> scale{1, 1, 1};
  [[nodiscard]] std::size_t steps() const noexcept { return first.size() - 1; }
};

[[nodiscard]] inline scaled_steps scale_steps(std::span<const step_features> steps) {
  scaled_steps s;
  std::array<double, 3> top{0, 0, 0};
  for (const step_features& st : steps)
    for (const rank_features& r : st.ranks) {
      top[0] = std::max(top[0], r.sum_sq / st.step_time);
      top[1] = std::max(top[1], r.sum / st.step_time);
      top[2] = std::max(top[2], r.count / st.step_time);
    }
  for (int j = 0; j < 3; ++j) s.scale[j] = top[j] > 0 ? 1.0 / top[j] : 1.0;
  s.first.reserve(steps.size() + 1);
  s.first.push_back(0);
  for (std::size_t k = 0; k < steps.size(); ++k) {
    const step_features& st = steps[k];
    for (const rank_features& r : st.ranks) {
      const std::array<double, 3> x{r.sum_sq / st.step_time * s.scale[0], r.sum / st.step_time * s.scale[1],
                                    r.count / st.step_time * s.scale[2]};
      // Valid times far apart (1e-320 s, or 1e-300 s beside 1e300 s) scale to inf or NaN,
      // which the solver would only report as a non-finite row.
      if (!(std::isfinite(x[0]) && std::isfinite(x[1]) && std::isfinite(x[2])))
        mmbal::detail::throw_invalid("fit: step ", k, ", field 'step_time': ", st.step_time,
                                     " s is out of the range the fit can scale beside the other steps (its",
                                     " features per second overflow a double)");
      s.features.push_back(x);
    }
    s.first.push_back(s.features.size());
  }
  return s;
}

[[nodiscard]] inline double dot3(const std::array<double, 3>& a, const std::array<double, 3>& b) noexcept {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

/// Σ_k (max_r φ·g_{k,r} − 1)²: the exact (unsmoothed) objective.
[[nodiscard]] inline double exact_objective(const scaled_steps& s, const std::array<double, 3>& phi) {
  double sum = 0;
  for (std::size_t k = 0; k < s.steps(); ++k) {
    double m = 0;
    for (std::size_t i = s.first[k]; i < s.first[k + 1]; ++i) m = std::max(m, dot3(phi, s.features[i]));
    sum += (m - 1) * (m - 1);
  }
  return sum;
}

/// The smoothed objective at relative temperature t, Σ_k (t·ln Σ_r exp(u_r/t) − 1)²; when
/// `rows` is given, also the Gauss–Newton rows (Jacobian row J_k = Σ_r softmax_r · g_{k,r},
/// target J_k·φ − residual_k). Ranks more than 40·t below the step's max get weight < e^-40
/// relative to the max and are skipped: exact in double precision, and fast at low t.
inline double smoothed_objective(const scaled_steps& s, const std::array<double, 3>& phi, double t,
                                 std::vector<nnls_row>* rows) {
  double sum = 0;
  if (rows) rows->resize(s.steps());
  for (std::size_t k = 0; k < s.steps(); ++k) {
    double m = -std::numeric_limits<double>::infinity();
    for (std::size_t i = s.first[k]; i < s.first[k + 1]; ++i) m = std::max(m, dot3(phi, s.features[i]));
    double z = 0;
    std::array<double, 3> grad{0, 0, 0};
    for (std::size_t i = s.first[k]; i < s.first[k + 1]; ++i) {
      const double e = (dot3(phi, s.features[i]) - m) / t;
      if (e < -40) continue;
      const double w = std::exp(e);
      z += w;
      for (int j = 0; j < 3; ++j) grad[j] += w * s.features[i][j];
    }
    const double residual = m + t * std::log(z) - 1;
    sum += residual * residual;
    if (rows) {
      for (int j = 0; j < 3; ++j) grad[j] /= z;
      (*rows)[k] = {grad, dot3(grad, phi) - residual};
    }
  }
  return sum;
}

/// Heaviest-rank NNLS as a fixed point: pick every step's heaviest rank under the current
/// parameters, fit NNLS of its features to the step time, repeat until the picks repeat or
/// `rounds` are done. Run from three first picks — by tokens, by Σ L², by sample count (ties to
/// the lowest rank) — since a fixed point can keep a wrong pick: on two steps of an exact
/// model whose heaviest rank is the one with more samples, the tokens start ended 17 % off
/// (session 30); returns the best by exact objective over all rounds.
[[nodiscard]] inline std::array<double, 3> heaviest_rank_init(const scaled_steps& s, std::uint32_t rounds) {
  std::array<double, 3> best_phi{0, 0, 0};
  double best = std::numeric_limits<double>::infinity();
  for (const std::array<double, 3>& start :
       {std::array<double, 3>{0, 1, 0}, std::array<double, 3>{1, 0, 0}, std::array<double, 3>{0, 0, 1}}) {
    std::array<double, 3> phi = start;
    std::vector<std::size_t> picks(s.steps(), 0), previous;
    std::vector<nnls_row> rows(s.steps());
    for (std::uint32_t round = 0; round < std::max<std::uint32_t>(rounds, 1); ++round) {
      for (std::size_t k = 0; k < s.steps(); ++k) {
        std::size_t arg = s.first[k];
        double m = dot3(phi, s.features[arg]);
        for (std::size_t i = s.first[k] + 1; i < s.first[k + 1]; ++i)
          if (const double u = dot3(phi, s.features[i]); u > m) m = u, arg = i;
        picks[k] = arg;
        rows[k] = {s.features[arg], 1.0};
      }
      if (picks == previous) break;
      phi = nnls3(rows).theta;
      if (const double obj = exact_objective(s, phi); obj < best) best = obj, best_phi = phi;
      previous = picks;
    }
  }
  return best_phi;
}

inline void check_fit_options(const fit_options& o) {
  if (!std::isfinite(o.temperature) || !(o.temperature > 0))
    mmbal::detail::throw_invalid("fit: temperature = ", o.temperature, " must be finite and > 0");
  if (!std::isfinite(o.anneal_start) || !(o.anneal_start >= 1) || !std::isfinite(o.temperature * o.anneal_start))
    mmbal::detail::throw_invalid("fit: anneal_start = ", o.anneal_start,
                                 " must be finite and >= 1 (and temperature * anneal_start finite)");
}

}  // namespace fit_detail

/// Fits c(L) = x·L² + y·L + z (x, y, z ≥ 0) to measured step times (LoongForge §2.1).
///
/// Objective: Σ_k ((P_k − T_k) / T_k)², relative residuals (step times vary; the reported
/// errors are relative), where P_k is the max over ranks of the rank loads, smoothed by
/// log-sum-exp at temperature τ_k = t·T_k (see `fit_options::temperature`).
/// 1. Initialisation: non-negative least squares (`nnls3`) of every step's HEAVIEST rank's
///    features (Σ L², Σ L, count) against its step time — the step waits for its slowest rank,
///    so the mean rank's features would explain the max by inflated coefficients (its predicted
///    step times are off by 360 % on the omni steps of bench/bench_fit.cpp). The heaviest rank
///    depends on the model, hence a short fixed point (`fit_options::init_rounds`).
/// 2. Refinement: projected Gauss–Newton on the smoothed objective with annealed temperature;
///    each iteration solves the linearised problem with `nnls3` (so the step stays ≥ 0), then
///    backtracks (halving, ≤ 30 times) along the segment to it until the objective decreases.
///    The segment joins two non-negative points, so every iterate is feasible.
/// The result is the better of the initialisation and the refined model by exact objective.
/// Complexity O(samples + iterations · Σ ranks). Deterministic (fixed order everywhere).
/// Throws `invalid_input` for no steps or a bad step (see `validate_step`), naming the step.
[[nodiscard]] inline fit_result fit_cost(std::span<const step_features> steps, const fit_options& options = {}) {
  fit_detail::check_fit_options(options);
  if (steps.empty()) mmbal::detail::throw_invalid("fit: no steps");
  for (std::size_t k = 0; k < steps.size(); ++k) validate_step(steps[k], k);
  const fit_detail::scaled_steps s = fit_detail::scale_steps(steps);
  const std::array<double, 3> init = fit_detail::heaviest_rank_init(s, options.init_rounds);
  std::array<double, 3> phi = init;
  std::uint32_t iterations = 0;
  std::vector<nnls_row> rows, trial_rows;
  for (double t = options.temperature * options.anneal_start;; t /= 10) {
    if (t < options.temperature * (1 + 1e-9)) t = options.temperature;
    double current = fit_detail::smoothed_objective(s, phi, t, &rows);
    for (std::uint32_t it = 0; it < options.iterations_per_stage; ++it) {
      ++iterations;
      const std::array<double, 3> target = nnls3(rows).theta;
      bool improved = false;
      double step = 1;
      for (int halving = 0; halving <= 30; ++halving, step /= 2) {
        std::array<double, 3> trial{};
        for (int j = 0; j < 3; ++j) trial[j] = std::max(0.0, phi[j] + step * (target[j] - phi[j]));
        const double value = fit_detail::smoothed_objective(s, trial, t, &trial_rows);
        if (value < current) {
          improved = current - value > 1e-12 * current;
          phi = trial;
          current = value;
          rows.swap(trial_rows);
          break;
        }
      }
      if (!improved) break;
    }
    if (t == options.temperature) break;
  }
  if (fit_detail::exact_objective(s, init) <= fit_detail::exact_objective(s, phi)) phi = init;
  const auto to_model = [&](const std::array<double, 3>& p) {
    return fitted{p[0] * s.scale[0], p[1] * s.scale[1], p[2] * s.scale[2]};
  };
  fit_result result{to_model(phi), to_model(init), {}, 0, iterations};
  result.error = prediction_errors(result.model, steps);
  result.objective = fit_detail::exact_objective(s, phi);
  return result;
}

/// `fit_cost` on observed steps: validates each (naming its index) and reduces it to features.
[[nodiscard]] inline fit_result fit_cost(std::span<const observed_step> steps, const fit_options& options = {}) {
  if (steps.empty()) mmbal::detail::throw_invalid("fit: no steps");
  std::vector<step_features> features;
  features.reserve(steps.size());
  for (std::size_t k = 0; k < steps.size(); ++k) features.push_back(features_of(steps[k], k));
  return fit_cost(std::span<const step_features>(features), options);
}

// ---------------------------------------------------------------------------------------------
// Online refit over a window
// ---------------------------------------------------------------------------------------------

/// Online refit over the last W steps (LoongForge: the model follows training as sequence
/// lengths, kernels or the machine drift). Keeps only per-rank features (O(W · ranks) memory)
/// in a ring buffer; `model()` refits lazily when steps were added since the last fit, from
/// scratch on the window's steps in arrival order, so the model is a function of the window's
/// contents only (deterministic, no history beyond W).
/// Default window: 64 steps — ≥ 20× the 3 unknowns to average out noise, yet short enough to
/// follow a drift within a few minutes of training at ~1 s per step.
class online_fit {
 public:
  static constexpr std::size_t default_window = 64;

  /// Throws `invalid_input` when `window` = 0 or `options` are bad.
  explicit online_fit(std::size_t window = default_window, const fit_options& options = {})
      : window_(window), options_(options) {
    if (window == 0) mmbal::detail::throw_invalid("online_fit: window = 0 (need at least one step)");
    fit_detail::check_fit_options(options);
    // No reservation: the ring grows with the steps, so a window larger than the run costs nothing.
  }

  /// A fit whose window holds `steps` (oldest first, as `window_steps()` lists them) after
  /// `steps_added` steps in all: what a checkpoint keeps to resume (`window()`, `options()`,
  /// `window_steps()`, `steps_added()`); it fits as the saved one did. Every step is validated
  /// as `add_features` does, named by its arrival index. Throws `invalid_input` besides when
  /// the steps exceed the window or `steps_added`. O(features of the steps).
  [[nodiscard]] static online_fit restored(std::size_t window, const fit_options& options,
                                           std::span<const step_features> steps, std::uint64_t steps_added) {
    online_fit f(window, options);
    if (steps.size() > window || steps.size() > steps_added)
      mmbal::detail::throw_invalid("online_fit: ", steps.size(), " saved steps for a window of ", window, " after ",
                                   steps_added, " steps added");
    f.added_ = steps_added - steps.size();
    for (const step_features& st : steps) f.add_features(st);
    return f;
  }

  /// Adds a step (validated: throws `invalid_input` naming it by its arrival index); the oldest
  /// step leaves once the window is full. O(samples of the step).
  void add_step(const observed_step& step) { add_features(features_of(step, added_)); }

  /// Adds an already reduced step (validated like `fit_cost` does, named by arrival index).
  void add_features(step_features step) {
    validate_step(step, added_);
    if (ring_.size() < window_)
      ring_.push_back(std::move(step));
    else
      ring_[head_] = std::move(step);
    head_ = (head_ + 1) % window_;
    ++added_;
    dirty_ = true;
  }

  /// The model fitted to the current window (refitted if steps arrived since the last call).
  /// Throws `invalid_input` before the first step.
  [[nodiscard]] const fit_result& fit() {
    if (ring_.empty()) mmbal::detail::throw_invalid("online_fit: no steps yet");
    if (dirty_) {
      result_ = fit_cost(std::span<const step_features>(window_steps()), options_);
      dirty_ = false;
    }
    return result_;
  }
  /// Shorthand for `fit().model`.
  [[nodiscard]] const fitted& model() { return fit().model; }

  /// The window's steps, oldest first.
  [[nodiscard]] std::vector<step_features> window_steps() const {
    std::vector<step_features> out;
    out.reserve(ring_.size());
    const std::size_t start = ring_.size() < window_ ? 0 : head_;
    for (std::size_t i = 0; i < ring_.size(); ++i) out.push_back(ring_[(start + i) % ring_.size()]);
    return out;
  }
  [[nodiscard]] std::size_t window() const noexcept { return window_; }
  [[nodiscard]] const fit_options& options() const noexcept { return options_; }
  [[nodiscard]] std::size_t size() const noexcept { return ring_.size(); }
  [[nodiscard]] std::uint64_t steps_added() const noexcept { return added_; }

 private:
  std::size_t window_;
  fit_options options_;
  std::vector<step_features> ring_;
  std::size_t head_ = 0;  // next slot to overwrite
  std::uint64_t added_ = 0;
  bool dirty_ = false;
  fit_result result_{fitted{}, fitted{}, {}, 0, 0};
};

// ---------------------------------------------------------------------------------------------
// The trigger policy
// ---------------------------------------------------------------------------------------------

/// Why `should_balance` decided as it did.
enum class trigger_reason : std::uint8_t {
  balance,          ///< the max can drop by ≥ the threshold: balance
  no_load,          ///< every rank's predicted load is 0: nothing to balance
  dominant_sample,  ///< one sample's cost ≥ the mean load and the max is within the threshold of it
  below_threshold,  ///< predicted imbalance max/mean − 1 < the threshold
};

/// Options of `should_balance`.
struct trigger_options {
  /// Minimum relative reduction of the max worth a rebalance. Default 0.02 (2 %): LoongForge
  /// reports 3.3–10 % step-time gains at DP 256–512, and a rebalance moves samples between
  /// ranks, so gains below 2 % rarely pay for the movement. Must be finite and ≥ 0.
  double threshold = 0.02;
};

/// The decision of `should_balance` and the numbers behind it.
struct trigger_decision {
  bool balance = false;
  trigger_reason reason = trigger_reason::no_load;
  double max_load = 0;        ///< predicted load of the slowest rank (the predicted step time)
  double mean_load = 0;       ///< mean predicted rank load
  double largest_sample = 0;  ///< cost of the most expensive single sample
  double imbalance = 0;       ///< max/mean − 1 (0 when there is no load)
  double gain_bound = 0;      ///< max / max(mean, largest_sample) − 1: no placement gains more
  std::string explanation;    ///< one line for logs
};

/// The name of a reason: "balance", "no_load", "dominant_sample", "below_threshold".
[[nodiscard]] constexpr const char* to_string(trigger_reason r) noexcept {
  switch (r) {
    case trigger_reason::balance:
      return "balance";
    case trigger_reason::no_load:
      return "no_load";
    case trigger_reason::dominant_sample:
      return "dominant_sample";
    case trigger_reason::below_threshold:
      return "below_threshold";
  }
  return "unknown";
}

/// Decides whether rebalancing the current placement can pay off (LoongForge §2.3).
///
/// Every placement of the same samples on the same R ranks has max ≥ B = max(mean, c_max):
/// the loads sum to R·mean, and the rank holding the most expensive sample carries at least
/// its cost c_max. So no balancer can reduce the max by more than gain_bound = max/B − 1.
/// - no_load: all loads are 0 → skip.
/// - dominant_sample: c_max ≥ mean (one sample alone outweighs an average rank, so the bound is
///   set by that sample, not by the mean) and gain_bound < threshold → skip. This is the
///   paper's rule made precise: taken literally ("skip when a single sample exceeds the
///   average load") it would also skip when the max is far above c_max and balancing would
///   still help; here that case balances.
/// - below_threshold: c_max < mean and imbalance = max/mean − 1 < threshold → skip (then the
///   bound is the mean and gain_bound = imbalance).
/// - balance: otherwise.
/// Complexity O(samples). Throws `invalid_input` when `ranks` is empty, the threshold is bad or the loads overflow a
/// double.
[[nodiscard]] inline trigger_decision should_balance(const std::vector<std::vector<length_t>>& ranks,
                                                     const fitted& model, const trigger_options& options = {}) {
  if (!std::isfinite(options.threshold) || options.threshold < 0)
    mmbal::detail::throw_invalid("trigger: threshold = ", options.threshold, " must be finite and >= 0");
  if (ranks.empty()) mmbal::detail::throw_invalid("trigger: no ranks");
  trigger_decision d;
  double total = 0;
  for (const auto& lengths : ranks) {
    double load = 0;
    for (length_t l : lengths) {
      const double c = model.item(l);
      load += c;
      d.largest_sample = std::max(d.largest_sample, c);
    }
    total += load;
    d.max_load = std::max(d.max_load, load);
  }
  d.mean_load = total / static_cast<double>(ranks.size());
  // Finite coefficients can still overflow a double on long samples (x = 1e290): every figure
  // would be inf or NaN, and NaN < threshold is false, so the answer would read "balance".
  if (!std::isfinite(total))
    mmbal::detail::throw_invalid("trigger: the predicted loads overflow a double (total ", total,
                                 ", largest sample cost ", d.largest_sample,
                                 "): the cost's coefficients are too large");
  if (!(d.max_load > 0)) {
    d.reason = trigger_reason::no_load;
    d.explanation = "no predicted load on any rank";
    return d;
  }
  d.imbalance = d.max_load / d.mean_load - 1;
  d.gain_bound = d.max_load / std::max(d.mean_load, d.largest_sample) - 1;
  const bool dominant = d.largest_sample >= d.mean_load;
  if (d.gain_bound < options.threshold) {
    d.reason = dominant ? trigger_reason::dominant_sample : trigger_reason::below_threshold;
    d.explanation = dominant ? mmbal::detail::concat("one sample costs ", d.largest_sample, " >= mean rank load ",
                                                     d.mean_load, "; the max ", d.max_load, " can drop by at most ",
                                                     d.gain_bound * 100, " % < ", options.threshold * 100, " %")
                             : mmbal::detail::concat("predicted imbalance max/mean - 1 = ", d.imbalance * 100, " % < ",
                                                     options.threshold * 100, " %");
    return d;
  }
  d.balance = true;
  d.reason = trigger_reason::balance;
  d.explanation = mmbal::detail::concat("the max ", d.max_load, " can drop by up to ", d.gain_bound * 100,
                                        " % (imbalance ", d.imbalance * 100, " %)");
  return d;
}

}  // namespace mmbal::cost
