#pragma once
/// @file
/// Pipeline schedule simulators (docs/DESIGN.md §5.7): from per-stage, per-micro-batch forward
/// and backward times, the start and end of every operation of a 1F1B (Megatron's
/// non-interleaved schedule), interleaved 1F1B (Megatron's virtual pipeline) or GPipe schedule,
/// and a lower bound on the makespan that holds for every order of the micro-batches.
/// @see DistTrain §6.2 and Figure 12; Cornstarch §4.2.

#include <mmbal/core/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mmbal::pipeline {

/// Forward and backward times of `micro_batches` micro-batches on `stages` pipeline stages, in
/// seconds (any unit works as long as it is the same everywhere). Row-major: the time of
/// micro-batch j (its index in the given order, its id) on stage s is at [s · micro_batches + j].
struct stage_times {
  std::uint32_t stages = 0;
  std::uint32_t micro_batches = 0;
  std::vector<double> forward;
  std::vector<double> backward;

  stage_times() = default;
  /// p × m zero times.
  stage_times(std::uint32_t p, std::uint32_t m)
      : stages(p), micro_batches(m), forward(std::size_t{p} * m, 0.0), backward(std::size_t{p} * m, 0.0) {}

  [[nodiscard]] double forward_time(std::uint32_t s, std::uint32_t j) const {
    return forward[std::size_t{s} * micro_batches + j];
  }
  [[nodiscard]] double backward_time(std::uint32_t s, std::uint32_t j) const {
    return backward[std::size_t{s} * micro_batches + j];
  }
  double& forward_at(std::uint32_t s, std::uint32_t j) { return forward[std::size_t{s} * micro_batches + j]; }
  double& backward_at(std::uint32_t s, std::uint32_t j) { return backward[std::size_t{s} * micro_batches + j]; }
  /// Σ_s (forward + backward) of micro-batch j: its total work. O(p).
  [[nodiscard]] double work(std::uint32_t j) const {
    double w = 0;
    for (std::uint32_t s = 0; s < stages; ++s) w += forward_time(s, j) + backward_time(s, j);
    return w;
  }
};

/// Throws `invalid_input` unless there is at least one stage and one micro-batch, the vectors
/// hold p × m times, every time is finite and ≥ 0 (the message names the first offending entry
/// as `forward[s][j]` / `backward[s][j]`), and so is their sum. O(p·m).
inline void validate(const stage_times& t) {
  if (t.stages == 0) mmbal::detail::throw_invalid("stage times: no stages");
  if (t.micro_batches == 0) mmbal::detail::throw_invalid("stage times: no micro-batches");
  const std::size_t n = std::size_t{t.stages} * t.micro_batches;
  if (t.forward.size() != n || t.backward.size() != n)
    mmbal::detail::throw_invalid("stage times: ", t.forward.size(), " forward and ", t.backward.size(),
                                 " backward times for ", t.stages, " stages x ", t.micro_batches, " micro-batches");
  double total = 0;
  for (int b = 0; b < 2; ++b) {
    const std::vector<double>& v = b == 0 ? t.forward : t.backward;
    for (std::size_t i = 0; i < n; ++i) {
      if (!(std::isfinite(v[i]) && v[i] >= 0))
        mmbal::detail::throw_invalid(b == 0 ? "forward[" : "backward[", i / t.micro_batches, "][", i % t.micro_batches,
                                     "] = ", v[i], " is not a finite time >= 0");
      total += v[i];
    }
  }
  // Every makespan and bound is a sum of these times (and hops): finite parts whose sum is
  // not would give an infinite makespan that nothing else reports.
  if (!std::isfinite(total))
    mmbal::detail::throw_invalid("stage times: the forward and backward times sum beyond a double (", total, ")");
}

/// Which pipeline schedule runs.
enum class schedule_kind : std::uint8_t {
  one_f_one_b,  ///< Megatron's non-interleaved 1F1B
  interleaved,  ///< Megatron's interleaved 1F1B (virtual pipeline), `chunks` model chunks per stage
  gpipe,        ///< every forward, then every backward (last in, first out)
};

/// The most model chunks per stage of an interleaved schedule: 1,024 (Megatron's virtual
/// pipelines use a handful; every chunk holds at least one layer). A simulation keeps
/// O(p·m·v) state, so a mistyped v of 10^6 would take gigabytes.
inline constexpr std::uint32_t max_chunks = 1024;

/// The most operations per direction, p·m·v, that a simulation or bound takes: 2^22 (a real
/// step has thousands). A simulation keeps about 25 bytes per operation, so the bound caps it
/// at ≈ 100 MB; a small file could otherwise ask for gigabytes (p = m = 128, v = 1,024).
inline constexpr std::uint64_t max_operations = std::uint64_t{1} << 22;

/// The most p·m² that the O(p·m²) parts take (`lower_bound`, `disttrain_order`): 2^26, a few
/// seconds (m = 20,000 micro-batches on one stage took 48 s).
inline constexpr std::uint64_t max_quadratic_work = std::uint64_t{1} << 26;

/// A schedule: its kind and, for `interleaved`, the number 1 ≤ v ≤ `max_chunks` of model
/// chunks per stage.
struct schedule {
  schedule_kind kind = schedule_kind::one_f_one_b;
  std::uint32_t chunks = 1;
  friend bool operator==(const schedule&, const schedule&) = default;
};

/// The schedule's name, as `spec::parse_schedule` reads it.
[[nodiscard]] inline std::string to_spec(const schedule& s) {
  switch (s.kind) {
    case schedule_kind::one_f_one_b:
      return "1f1b";
    case schedule_kind::interleaved:
      return "interleaved:" + std::to_string(s.chunks);
    case schedule_kind::gpipe:
      return "gpipe";
  }
  return "?";
}

/// One operation of a simulated schedule. `micro_batch` is the micro-batch's id (its index in
/// `stage_times`), `position` its place in the order; `chunk` is the model chunk (0 unless
/// interleaved).
struct operation {
  std::uint32_t stage = 0;
  std::uint32_t micro_batch = 0;
  std::uint32_t position = 0;
  std::uint32_t chunk = 0;
  bool backward = false;
  double start = 0;
  double end = 0;
};

/// Reusable buffers of `simulate`: the per-stage operation tables (rebuilt only when the
/// shape p, m, schedule changes) and the end times. Holding one across calls makes a
/// simulation allocation-free. Not shareable between threads at the same time.
class simulation_workspace {
 public:
  simulation_workspace() = default;

 private:
  struct slot {
    std::uint32_t position;
    std::uint32_t chunk;
    bool backward;
  };
  template <class Times>
  friend double simulate_unchecked(const Times&, std::span<const std::uint32_t>, const schedule&, double,
                                   simulation_workspace&, std::vector<operation>*, double);
  template <class Times>
  friend double simulate_suffix(const Times&, std::span<const std::uint32_t>, const schedule&, double,
                                simulation_workspace&, std::uint32_t, double);
  friend std::size_t operations_per_stage(const simulation_workspace&);
  friend void keep_as_base(simulation_workspace&);
  template <class Times>
  static double run(const Times&, std::span<const std::uint32_t>, const schedule&, double, simulation_workspace&,
                    std::vector<operation>*, double, std::size_t);

  void prepare(std::uint32_t p, std::uint32_t m, const schedule& s) {
    const std::uint32_t v = s.kind == schedule_kind::interleaved ? s.chunks : 1;
    if (!(p == p_ && m == m_ && s.kind == kind_ && v == v_)) {
      p_ = p, m_ = m, v_ = v, kind_ = s.kind;
      build_table();
    }
    const std::size_t ends = std::size_t{p} * v * m;
    forward_end_.assign(ends, -1.0);
    backward_end_.assign(ends, -1.0);
    cursor_.assign(p, 0);
    free_at_.assign(p, 0.0);
    valid_upto_ = 0;
  }

  // Each stage's operations in the order it runs them (2·m·v per stage).
  void build_table() {
    const std::size_t per = std::size_t{2} * m_ * v_;
    table_.resize(std::size_t{p_} * per);
    std::vector<slot> forwards, backwards;
    forwards.reserve(std::size_t{m_} * v_);
    backwards.reserve(std::size_t{m_} * v_);
    if (kind_ == schedule_kind::interleaved) {
      // Megatron's order: micro-batches in groups of p (the last group may be smaller); a group
      // runs its forwards chunk 0, 1, …, v−1 and its backwards chunk v−1, …, 0.
      for (std::uint32_t g = 0; g < m_; g += p_) {
        const std::uint32_t e = std::min(m_, g + p_);
        for (std::uint32_t c = 0; c < v_; ++c)
          for (std::uint32_t j = g; j < e; ++j) forwards.push_back({j, c, false});
        for (std::uint32_t c = v_; c-- > 0;)
          for (std::uint32_t j = g; j < e; ++j) backwards.push_back({j, c, true});
      }
    } else {
      for (std::uint32_t j = 0; j < m_; ++j) forwards.push_back({j, 0, false});
      for (std::uint32_t j = 0; j < m_; ++j)
        backwards.push_back({kind_ == schedule_kind::gpipe ? m_ - 1 - j : j, 0, true});
    }
    const std::size_t total = forwards.size();
    for (std::uint32_t s = 0; s < p_; ++s) {
      slot* out = table_.data() + s * per;
      std::size_t warmup = total;  // GPipe: every forward first
      if (kind_ == schedule_kind::one_f_one_b)
        warmup = std::min<std::size_t>(p_ - 1 - s, total);
      else if (kind_ == schedule_kind::interleaved)
        warmup = std::min<std::size_t>(std::size_t{p_ - 1 - s} + std::size_t{v_ - 1} * p_, total);
      std::size_t f = 0, b = 0, k = 0;
      while (f < warmup) out[k++] = forwards[f++];
      while (f < total) {
        out[k++] = forwards[f++];
        out[k++] = backwards[b++];
      }
      while (b < total) out[k++] = backwards[b++];
    }
  }

  std::uint32_t p_ = 0, m_ = 0, v_ = 0;
  schedule_kind kind_ = schedule_kind::one_f_one_b;
  std::vector<slot> table_;
  std::vector<double> forward_end_, backward_end_;  // [virtual stage · m + position], −1 = not yet
  std::vector<std::size_t> cursor_;
  std::vector<double> free_at_;
  // The base of `simulate_suffix`: end times of a completed simulation (`keep_as_base`), and
  // how many leading positions of the working arrays still equal it.
  std::vector<double> base_forward_end_, base_backward_end_;
  bool has_base_ = false;
  std::uint32_t valid_upto_ = 0;
};

/// The simulation core without argument checks (`times` valid, `order` a permutation of
/// 0..m−1). `Times` needs `stages`, `micro_batches`, `forward_time(s, j)`, `backward_time(s, j)`.
/// Returns the makespan, or +∞ as soon as an operation ends after `give_up_above` (used by
/// searches to drop a candidate early).
template <class Times>
double simulate_unchecked(const Times& t, std::span<const std::uint32_t> order, const schedule& sched, double hop,
                          simulation_workspace& ws, std::vector<operation>* ops, double give_up_above) {
  ws.prepare(t.stages, t.micro_batches, sched);
  if (ops) ops->clear();
  return simulation_workspace::run(t, order, sched, hop, ws, ops, give_up_above, 0);
}

// The sweeps from the workspace's cursors (`done` operations already fixed).
template <class Times>
double simulation_workspace::run(const Times& t, std::span<const std::uint32_t> order, const schedule& sched,
                                 double hop, simulation_workspace& ws, std::vector<operation>* ops,
                                 double give_up_above, std::size_t done) {
  const std::uint32_t p = t.stages, m = t.micro_batches;
  const std::uint32_t v = ws.v_;
  const std::uint32_t last = p * v - 1;  // the last virtual stage
  const std::size_t per = std::size_t{2} * m * v;
  const double share = 1.0 / v;
  const double link = p > 1 ? hop : 0.0;  // no hop when one stage holds every chunk
  double* fend = ws.forward_end_.data();
  double* bend = ws.backward_end_.data();
  const std::size_t total = std::size_t{p} * per;
  // Sweep the stages down and up, advancing each as far as its dependencies allow: forwards
  // depend on the stage before (done earlier in a down sweep), backwards on the stage after
  // (done earlier in an up sweep), so every pair of sweeps moves the schedule on.
  auto advance = [&](std::uint32_t s) -> bool {
    std::size_t k = ws.cursor_[s];
    double free = ws.free_at_[s];
    const simulation_workspace::slot* row = ws.table_.data() + s * per;
    bool moved = false;
    while (k < per) {
      const simulation_workspace::slot e = row[k];
      const std::uint32_t q = e.chunk * p + s;
      const std::size_t at = std::size_t{q} * m + e.position;
      const std::uint32_t mb = order[e.position];
      double ready = 0, length;
      if (!e.backward) {
        if (q > 0) {
          const double d = fend[at - m];
          if (d < 0) break;
          ready = d + link;
        }
        length = t.forward_time(s, mb) * share;
      } else {
        const double d = q == last ? fend[at] : bend[at + m];
        if (d < 0) break;
        ready = q == last ? d : d + link;
        length = t.backward_time(s, mb) * share;
      }
      const double start = std::max(free, ready);
      free = start + length;
      (e.backward ? bend : fend)[at] = free;
      if (ops) ops->push_back({s, mb, e.position, e.chunk, e.backward, start, free});
      ++k;
      moved = true;
    }
    done += k - ws.cursor_[s];
    ws.cursor_[s] = k;
    ws.free_at_[s] = free;
    return moved;
  };
  while (done < total) {
    bool moved = false;
    for (std::uint32_t s = 0; s < p; ++s) moved |= advance(s);
    for (std::uint32_t s = p; s-- > 0;) moved |= advance(s);
    if (!moved)
      mmbal::detail::throw_runtime("pipeline simulation: schedule ", to_spec(sched), " deadlocks for p = ", p,
                                   ", m = ", m);
    for (std::uint32_t s = 0; s < p; ++s)
      if (ws.free_at_[s] > give_up_above) return std::numeric_limits<double>::infinity();
  }
  double makespan = 0;
  for (std::uint32_t s = 0; s < p; ++s) makespan = std::max(makespan, ws.free_at_[s]);
  return makespan;
}

/// Makes the end times of the last simulation in `ws` the base of `simulate_suffix`. Only
/// valid when that simulation ran to the end (it did not give up). O(p·m·v).
inline void keep_as_base(simulation_workspace& ws) {
  ws.base_forward_end_ = ws.forward_end_;
  ws.base_backward_end_ = ws.backward_end_;
  ws.has_base_ = true;
  ws.valid_upto_ = ws.m_;
}

/// `simulate_unchecked` (without `ops`) for an order that equals the base order of `ws` (see
/// `keep_as_base`) at positions 0..first_changed−1: 1F1B and GPipe restart every stage at its
/// first operation of a position ≥ first_changed, which is exact because those prefixes
/// depend only on each other (1F1B: stage s's prefix holds F(k < i) and B(k < i − w_s), and
/// B(s, k) needs B(s+1, k) with k < i − w_s < i − w_{s+1}; GPipe: F(k < i)). Interleaved
/// schedules, a shape change or no base fall back to a full simulation.
/// - Complexity: O(p·(m − first_changed)) plus the simulation of the suffix.
template <class Times>
double simulate_suffix(const Times& t, std::span<const std::uint32_t> order, const schedule& sched, double hop,
                       simulation_workspace& ws, std::uint32_t first_changed, double give_up_above) {
  const std::uint32_t p = t.stages, m = t.micro_batches;
  if (first_changed == 0 || first_changed >= m || !ws.has_base_ || sched.kind == schedule_kind::interleaved ||
      p != ws.p_ || m != ws.m_ || sched.kind != ws.kind_ || ws.v_ != 1)
    return simulate_unchecked(t, order, sched, hop, ws, nullptr, give_up_above);
  const std::uint32_t i = first_changed;
  // Backwards in stage s's prefix: 1F1B B(k < i − w_s), GPipe none.
  const auto backward_prefix = [&](std::uint32_t s) -> std::uint32_t {
    if (sched.kind != schedule_kind::one_f_one_b) return 0;
    const std::uint32_t w = std::min(p - 1 - s, m);
    return i < w ? 0 : i - w;
  };
  for (std::uint32_t q = 0; q < p; ++q) {
    const std::size_t row = std::size_t{q} * m;
    if (ws.valid_upto_ < i) {
      std::copy(ws.base_forward_end_.begin() + row + ws.valid_upto_, ws.base_forward_end_.begin() + row + i,
                ws.forward_end_.begin() + row + ws.valid_upto_);
      std::copy(ws.base_backward_end_.begin() + row + ws.valid_upto_, ws.base_backward_end_.begin() + row + i,
                ws.backward_end_.begin() + row + ws.valid_upto_);
    }
    // Not yet run: forwards from position i, backwards from the first one outside the prefix.
    std::fill(ws.forward_end_.begin() + row + i, ws.forward_end_.begin() + row + m, -1.0);
    std::fill(ws.backward_end_.begin() + row + backward_prefix(q), ws.backward_end_.begin() + row + m, -1.0);
  }
  ws.valid_upto_ = backward_prefix(0);  // the shortest backward prefix: stage 0's
  const std::size_t per = std::size_t{2} * m;
  std::size_t done = 0;
  for (std::uint32_t s = 0; s < p; ++s) {
    std::size_t cut = i;  // GPipe: the forwards of positions < i
    if (sched.kind == schedule_kind::one_f_one_b) {
      const std::size_t w = std::min(p - 1 - s, m);
      cut = i < w ? i : w + 2 * (i - w);
    }
    ws.cursor_[s] = cut;
    double free = 0;
    if (cut > 0) {
      const simulation_workspace::slot e = ws.table_[s * per + cut - 1];
      free = (e.backward ? ws.backward_end_ : ws.forward_end_)[std::size_t{s} * m + e.position];
    }
    ws.free_at_[s] = free;
    done += cut;
  }
  return simulation_workspace::run(t, order, sched, hop, ws, nullptr, give_up_above, done);
}

/// Operations each stage runs in the workspace's current table (2·m·v).
[[nodiscard]] inline std::size_t operations_per_stage(const simulation_workspace& ws) {
  return std::size_t{2} * ws.m_ * ws.v_;
}

namespace detail {
inline void check_order(std::span<const std::uint32_t> order, std::uint32_t m, std::vector<char>& seen) {
  if (order.size() != m)
    mmbal::detail::throw_invalid("pipeline order: ", order.size(), " entries for ", m, " micro-batches");
  seen.assign(m, 0);
  for (std::size_t k = 0; k < order.size(); ++k) {
    if (order[k] >= m || seen[order[k]])
      mmbal::detail::throw_invalid("pipeline order: entry ", k, " = ", order[k], " is out of range or repeated");
    seen[order[k]] = 1;
  }
}
inline void check_hop(double hop) {
  if (!(std::isfinite(hop) && hop >= 0)) mmbal::detail::throw_invalid("pipeline: hop time ", hop, " is not >= 0");
}

/// Throws `invalid_input` for a schedule kind that is none of the three, or an interleaved one
/// with a chunk count outside [1, `max_chunks`].
inline void check_schedule(const schedule& sched) {
  if (sched.kind != schedule_kind::one_f_one_b && sched.kind != schedule_kind::interleaved &&
      sched.kind != schedule_kind::gpipe)
    mmbal::detail::throw_invalid("pipeline: unknown schedule kind ", static_cast<int>(sched.kind));
  if (sched.kind == schedule_kind::interleaved && (sched.chunks == 0 || sched.chunks > max_chunks))
    mmbal::detail::throw_invalid("pipeline: interleaved schedule with ", sched.chunks, " chunks (expected 1 to ",
                                 max_chunks, ")");
}

/// Throws `invalid_input` when p·m·v exceeds `max_operations`.
inline void check_operations(const stage_times& t, std::uint32_t chunks) {
  const std::uint64_t ops = std::uint64_t{t.stages} * t.micro_batches * chunks;
  if (ops > max_operations)
    mmbal::detail::throw_invalid("pipeline: ", t.stages, " stages x ", t.micro_batches, " micro-batches x ", chunks,
                                 " chunks = ", ops, " operations per direction (at most ", max_operations, ")");
}

/// Throws `invalid_input` when p·m² exceeds `max_quadratic_work`; `what` names the caller.
inline void check_quadratic_work(const stage_times& t, const char* what) {
  const std::uint64_t m = t.micro_batches;
  // p·m > ⌊W/m⌋ ⇔ p·m² > W, without forming p·m² (up to 2^96).
  if (m != 0 && std::uint64_t{t.stages} * m > max_quadratic_work / m)
    mmbal::detail::throw_invalid(what, ": ", t.stages, " stages x ", t.micro_batches,
                                 "^2 micro-batches exceed the O(p m^2) work it takes (at most ", max_quadratic_work,
                                 ")");
}

/// Throws `invalid_input` when the stage times (valid: their sum is finite) plus a hop for each
/// of the 2·p·m·v operations overflow a double, a bound on every makespan of every order.
inline void check_makespan_bound(const stage_times& t, std::uint32_t chunks, double hop) {
  double bound = 2.0 * t.stages * t.micro_batches * chunks * hop;
  for (std::size_t i = 0; i < t.forward.size(); ++i) bound += t.forward[i] + t.backward[i];
  if (!std::isfinite(bound))
    mmbal::detail::throw_invalid("pipeline: hop time ", hop, " over ", 2.0 * t.stages * t.micro_batches * chunks,
                                 " operations and the stage times sum beyond a double");
}
}  // namespace detail

/// Simulates schedule `sched` running the micro-batches of `t` in `order` (order[k] = the id of
/// the k-th micro-batch to enter the pipeline) and returns the makespan: the last end time.
///
/// Semantics (1F1B, Megatron's non-interleaved schedule): stage s = 0..p−1 runs
/// w_s = min(p−1−s, m) forwards (warm-up), then alternates one forward and one backward until
/// all forwards are done, then the remaining backwards. F(s, k) starts when F(s−1, k) has ended
/// (+ `hop`) and the previous operation on stage s has ended; B(s, k) when B(s+1, k) has ended
/// (+ `hop`) and the previous operation on s has ended; the last stage's backward follows its
/// own forward (no hop).
/// - Interleaved (v chunks): stage s holds virtual stages c·p + s, c = 0..v−1, each taking 1/v of
///   the stage's times; Megatron's order (groups of p micro-batches run their forwards chunk 0
///   to v−1 and their backwards chunk v−1 to 0; the last group may be smaller) with a warm-up
///   of min((p−1−s) + (v−1)·p, m·v) forwards. Megatron warms up 2·(p−1−s) + (v−1)·p, the
///   extra p−1−s only overlapping communication it issues in pairs; with a constant hop here
///   that slack only delays backwards, and without it v = 1 is exactly 1F1B (tested).
///   A hop is paid between consecutive virtual stages, also from stage p−1 to stage 0.
/// - GPipe: every forward in order, then every backward in reverse order (GPipe Fig. 2).
/// - `ops` (optional) receives every operation in the order the simulator fixed them (per
///   stage in run order; sort by start for a time line).
/// - Complexity: O(p·m·v) time; no allocation when `ws` was used before for the same shape.
/// - Errors (`invalid_input`): invalid `t` (see `validate`), `order` not a permutation of
///   0..m−1, hop < 0 or not finite, or times and hops that sum beyond a double.
inline double simulate(const stage_times& t, std::span<const std::uint32_t> order, const schedule& sched, double hop,
                       simulation_workspace& ws, std::vector<operation>* ops = nullptr) {
  validate(t);
  std::vector<char> seen;
  detail::check_order(order, t.micro_batches, seen);
  detail::check_hop(hop);
  detail::check_schedule(sched);
  detail::check_operations(t, sched.kind == schedule_kind::interleaved ? sched.chunks : 1);
  detail::check_makespan_bound(t, sched.kind == schedule_kind::interleaved ? sched.chunks : 1, hop);
  return simulate_unchecked(t, order, sched, hop, ws, ops, std::numeric_limits<double>::infinity());
}

/// `simulate` with a fresh workspace.
inline double simulate(const stage_times& t, std::span<const std::uint32_t> order, const schedule& sched = {},
                       double hop = 0.0, std::vector<operation>* ops = nullptr) {
  simulation_workspace ws;
  return simulate(t, order, sched, hop, ws, ops);
}

/// The identity order 0, 1, …, m−1.
[[nodiscard]] inline std::vector<std::uint32_t> identity_order(std::uint32_t m) {
  std::vector<std::uint32_t> o(m);
  std::iota(o.begin(), o.end(), 0u);
  return o;
}

/// A lower bound on the makespan of schedule `sched` that holds for EVERY order of the
/// micro-batches:
///
///     LB = max( max_j chain(j),  min_{(a, b) allowed} max_s [ head_s(a) + W_s + tail_s(b) ] )
///
/// with W_s = Σ_j (F_sj + B_sj) the work of stage s, head_s(a) = Σ_{r<s} F_ra / v + s·hop,
/// tail_s(b) = Σ_{r<s} B_rb / v + s·hop, chain(j) = Σ_s (F_sj + B_sj) + 2·(p·v − 1)·hop
/// (hop only when p > 1), v = 1 unless interleaved.
///
/// Proof. Fix any order; let a be the micro-batch it runs first and b the one whose backward a
/// stage runs last. (i) Micro-batch j's forwards through all p·v virtual stages and its
/// backwards back through them form a chain of dependent operations, each starting after the
/// previous one ended (plus a hop between stages), so the makespan is ≥ chain(j) for every j.
/// (ii) Every stage s runs all its operations one at a time, W_s in total. Its first
/// operation is the forward of the first micro-batch a on its first chunk, which cannot start
/// before that micro-batch's chunk-0 forwards on stages 0..s−1 (Σ_{r<s} F_ra / v) and s hops
/// are done. Its last operation is the chunk-0 backward of the last micro-batch b, after which
/// b's chunk-0 backwards on stages s−1..0 and s hops still run one after another. So stage s
/// spans at least head_s(a) + W_s + tail_s(b), for every s; taking the minimum over every pair
/// the schedule allows gives a value below the makespan of every order. Allowed pairs: 1F1B and
/// interleaved run position 0 first and end every stage with the backward of position m−1
/// (Megatron's tables above), so a ≠ b when m ≥ 2; GPipe ends with position 0's backward, so
/// a = b. (The fill and drain run through the EARLIER stages: a stage's work plus the chains
/// through the later stages is not a bound, because those overlap with the stage's own work.) ∎
///
/// - Complexity: O(p·m²) (the pair minimum), O(p·m) for GPipe.
/// - Errors: as `simulate` (without the order).
[[nodiscard]] inline double lower_bound(const stage_times& t, const schedule& sched = {}, double hop = 0.0) {
  validate(t);
  detail::check_hop(hop);
  detail::check_schedule(sched);
  const std::uint32_t p = t.stages, m = t.micro_batches;
  const std::uint32_t v = sched.kind == schedule_kind::interleaved ? sched.chunks : 1;
  detail::check_operations(t, v);
  if (sched.kind != schedule_kind::gpipe) detail::check_quadratic_work(t, "pipeline lower_bound");
  detail::check_makespan_bound(t, v, hop);
  const double link = p > 1 ? hop : 0.0;
  double best = 0;
  for (std::uint32_t j = 0; j < m; ++j)
    best = std::max(best, t.work(j) + 2.0 * (static_cast<double>(p) * v - 1) * link);
  // head[s·m + j], tail[s·m + j], work[s]
  std::vector<double> head(std::size_t{p} * m), tail(std::size_t{p} * m), work(p, 0.0);
  for (std::uint32_t j = 0; j < m; ++j) {
    double f = 0, b = 0;
    for (std::uint32_t s = 0; s < p; ++s) {
      head[std::size_t{s} * m + j] = f / v + s * link;
      tail[std::size_t{s} * m + j] = b / v + s * link;
      f += t.forward_time(s, j);
      b += t.backward_time(s, j);
    }
  }
  for (std::uint32_t s = 0; s < p; ++s)
    for (std::uint32_t j = 0; j < m; ++j) work[s] += t.forward_time(s, j) + t.backward_time(s, j);
  const bool same = sched.kind == schedule_kind::gpipe || m == 1;
  double pair = std::numeric_limits<double>::infinity();
  for (std::uint32_t a = 0; a < m; ++a)
    // a = b only (GPipe, one micro-batch): one pair per a, O(p·m) in all (the loop over every
    // b visited m² pairs to use m of them: minutes at m = 10^6).
    for (std::uint32_t b = same ? a : 0; b < (same ? a + 1 : m); ++b) {
      if (!same && a == b) continue;
      double span = 0;
      for (std::uint32_t s = 0; s < p && span < pair; ++s)
        span = std::max(span, head[std::size_t{s} * m + a] + work[s] + tail[std::size_t{s} * m + b]);
      pair = std::min(pair, span);
    }
  return std::max(best, pair);
}

}  // namespace mmbal::pipeline
