// The fitted cost model (cost/fit.hpp, LoongForge §2.1):
// - speed: fitting 1,000 steps of 64 ranks (goal ≤ 50 ms), from the raw sample lengths
//   (feature extraction included), against two same-run baselines timed in the same loop
//   iteration (alternating, so machine load affects all alike): one std::sort of all the
//   steps' lengths, and a plain least-squares solve on the same features (feature extraction
//   plus one `nnls3` of every step's token-heaviest rank — the fitter's cheapest possible core);
// - accuracy: predicted step times of 1,000 held-out steps, fitted on steps with 2 %
//   multiplicative Gaussian noise (goal within 3 %), beside the fit to the mean rank.
// Steps: 64 ranks, 1–12 samples per rank drawn from the LLM lengths of a generated omni
// workload (family d); true cost 1e-9 L² + 4e-6 L + 2e-3 seconds per sample.
#include <mmbal/core/rng.hpp>
#include <mmbal/cost/fit.hpp>
#include <mmbal/workload/generators.hpp>
#include <mmbal/workload/length_data.hpp>
#include <mmbal/workload/sample.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <vector>

namespace {

using namespace mmbal;

constexpr double true_x = 1e-9, true_y = 4e-6, true_z = 2e-3;
constexpr std::size_t step_count = 1000, rank_count = 64;

const std::vector<length_t>& omni_lengths() {
  static const std::vector<length_t> lengths = [] {
    generator_options o;
    o.samples = 50000;
    o.ranks = 1;
    o.seed = 3;
    return llm_phase_items(generate(family::omni, o, default_length_data())).weights;
  }();
  return lengths;
}

/// The synthetic step time: the exact step time of the true coefficients.
double true_time(const cost::observed_step& s) {
  return cost::predict_step_time(cost::fitted(true_x, true_y, true_z), s);
}

std::vector<cost::observed_step> make_steps(std::uint64_t seed, double noise) {
  auto g = make_rng(seed);
  const auto& pool = omni_lengths();
  std::vector<cost::observed_step> steps(step_count);
  for (auto& s : steps) {
    s.ranks.resize(rank_count);
    for (auto& r : s.ranks) {
      const auto n = uniform_int(g, 1, 12);
      for (std::int64_t i = 0; i < n; ++i) r.push_back(pool[uniform_below(g, pool.size())]);
    }
    s.step_time = true_time(s) * (1 + noise * standard_normal(g));
  }
  return steps;
}

const std::vector<cost::observed_step>& train_steps() {
  static const auto steps = make_steps(1, 0.02);
  return steps;
}

/// The plain least-squares baseline: features, then one NNLS of each step's token-heaviest rank.
cost::nnls_solution plain_least_squares(const std::vector<cost::observed_step>& steps) {
  std::vector<cost::nnls_row> rows;
  rows.reserve(steps.size());
  for (std::size_t k = 0; k < steps.size(); ++k) {
    const cost::step_features f = cost::features_of(steps[k], k);
    const auto heaviest =
        std::max_element(f.ranks.begin(), f.ranks.end(), [](const auto& a, const auto& b) { return a.sum < b.sum; });
    rows.push_back({{heaviest->sum_sq, heaviest->sum, heaviest->count}, f.step_time});
  }
  return cost::nnls3(rows);
}

std::vector<length_t> all_lengths(const std::vector<cost::observed_step>& steps) {
  std::vector<length_t> out;
  for (const auto& s : steps)
    for (const auto& r : s.ranks) out.insert(out.end(), r.begin(), r.end());
  return out;
}

void BM_fit_1000_steps_64_ranks(benchmark::State& state) {
  const auto& steps = train_steps();
  for (auto _ : state) benchmark::DoNotOptimize(cost::fit_cost(steps));
  const auto r = cost::fit_cost(steps);
  state.counters["iterations"] = r.iterations;
  state.counters["samples"] = static_cast<double>(all_lengths(steps).size());
}
BENCHMARK(BM_fit_1000_steps_64_ranks)->Unit(benchmark::kMillisecond);

/// Same-run ratios: every iteration times the fit, the plain least squares and the sort back to
/// back; counters are ratios of the summed times and the per-side minima in ms.
void BM_fit_vs_baselines_ratio(benchmark::State& state) {
  const auto& steps = train_steps();
  const std::vector<length_t> lengths = all_lengths(steps);
  using clock = std::chrono::steady_clock;
  double fit_total = 0, ls_total = 0, sort_total = 0;
  double fit_min = 1e300, ls_min = 1e300, sort_min = 1e300;
  for (auto _ : state) {
    std::vector<length_t> copy = lengths;
    const auto t0 = clock::now();
    benchmark::DoNotOptimize(cost::fit_cost(steps));
    const auto t1 = clock::now();
    benchmark::DoNotOptimize(plain_least_squares(steps));
    const auto t2 = clock::now();
    std::sort(copy.begin(), copy.end());
    benchmark::DoNotOptimize(copy.data());
    const auto t3 = clock::now();
    const double f = std::chrono::duration<double>(t1 - t0).count();
    const double l = std::chrono::duration<double>(t2 - t1).count();
    const double s = std::chrono::duration<double>(t3 - t2).count();
    fit_total += f, ls_total += l, sort_total += s;
    fit_min = std::min(fit_min, f), ls_min = std::min(ls_min, l), sort_min = std::min(sort_min, s);
  }
  state.counters["fit_over_sort"] = fit_total / sort_total;
  state.counters["fit_over_plain_ls"] = fit_total / ls_total;
  state.counters["fit_ms_min"] = fit_min * 1e3;
  state.counters["plain_ls_ms_min"] = ls_min * 1e3;
  state.counters["sort_ms_min"] = sort_min * 1e3;
}
BENCHMARK(BM_fit_vs_baselines_ratio)->Unit(benchmark::kMillisecond)->Iterations(30);

/// Accuracy on held-out steps (2 % noise); no timing meaning (one fit per iteration).
void BM_fit_heldout_accuracy(benchmark::State& state) {
  const auto& steps = train_steps();
  const auto held_out = make_steps(2, 0.02);
  cost::fit_result r{cost::fitted{}, cost::fitted{}, {}, 0, 0};
  for (auto _ : state) r = cost::fit_cost(steps);
  double mean_measured = 0, max_measured = 0, mean_truth = 0, max_truth = 0;
  for (const auto& s : held_out) {
    const double p = cost::predict_step_time(r.model, s);
    const double em = std::abs(p - s.step_time) / s.step_time, et = std::abs(p - true_time(s)) / true_time(s);
    mean_measured += em / double(held_out.size()), max_measured = std::max(max_measured, em);
    mean_truth += et / double(held_out.size()), max_truth = std::max(max_truth, et);
  }
  // The fit to the mean rank (what the heaviest-rank initialisation avoids).
  std::vector<cost::nnls_row> rows;
  for (std::size_t k = 0; k < steps.size(); ++k) {
    const auto f = cost::features_of(steps[k], k);
    cost::nnls_row row{{0, 0, 0}, f.step_time};
    for (const auto& rf : f.ranks) row.a[0] += rf.sum_sq, row.a[1] += rf.sum, row.a[2] += rf.count;
    for (double& a : row.a) a /= double(f.ranks.size());
    rows.push_back(row);
  }
  const auto m = cost::nnls3(rows).theta;
  const cost::fitted mean_model{m[0], m[1], m[2]};
  double mean_rank_err = 0;
  for (const auto& s : held_out)
    mean_rank_err +=
        std::abs(cost::predict_step_time(mean_model, s) - s.step_time) / s.step_time / double(held_out.size());
  state.counters["heldout_err_mean"] = mean_measured;
  state.counters["heldout_err_max"] = max_measured;
  state.counters["truth_err_mean"] = mean_truth;
  state.counters["truth_err_max"] = max_truth;
  state.counters["mean_rank_fit_err_mean"] = mean_rank_err;
  state.counters["x_rel_err"] = std::abs(r.model.x() - true_x) / true_x;
  state.counters["y_rel_err"] = std::abs(r.model.y() - true_y) / true_y;
  state.counters["z_rel_err"] = std::abs(r.model.z() - true_z) / true_z;
}
BENCHMARK(BM_fit_heldout_accuracy)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
