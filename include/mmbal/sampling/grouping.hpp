#pragma once
/// @file
/// Groups of samples (dynamic mini-batches) and how balanced they are: the `grouping` type
/// that ISF and the random-grouping baseline return, and OmniBal's pad ratio (eq. 1) and
/// dist ratio (eq. 2) of a grouping whose groups are dealt to d ranks per step
/// (docs/DESIGN.md §5.2).

#include <mmbal/core/error.hpp>
#include <mmbal/core/rng.hpp>
#include <mmbal/core/types.hpp>
#include <mmbal/cost/metrics.hpp>

#include <cstddef>
#include <cstdint>
#include <numeric>
#include <span>
#include <vector>

namespace mmbal::sampling {

/// A grouping of samples into mini-batches, stored compactly (CSR): group g holds the sample
/// indices `members[offsets[g] .. offsets[g + 1])`, in the order they were drawn.
/// Invariant: `offsets.front() == 0`, `offsets` ascending, `offsets.back() == members.size()`.
struct grouping {
  std::vector<std::uint32_t> members;     ///< sample indices, group after group
  std::vector<std::uint32_t> offsets{0};  ///< group g = [offsets[g], offsets[g + 1])

  /// Number of groups.
  [[nodiscard]] std::size_t size() const noexcept { return offsets.size() - 1; }
  /// Number of grouped samples (Σ group sizes).
  [[nodiscard]] std::size_t sample_count() const noexcept { return members.size(); }
  /// The members of group g (sample indices). O(1); g < size().
  [[nodiscard]] std::span<const std::uint32_t> group(std::size_t g) const noexcept {
    return std::span<const std::uint32_t>(members).subspan(offsets[g], offsets[g + 1] - offsets[g]);
  }
  /// Closes the group made of the members appended since the last call (no-op when empty).
  void close_group() {
    if (members.size() != offsets.back()) offsets.push_back(checked_count(members.size(), "grouped samples"));
  }
  friend bool operator==(const grouping&, const grouping&) = default;
};

/// Balance of a grouping whose groups are dealt to `ranks` devices per training step:
/// step s holds groups [s·d, (s + 1)·d) in grouping order (the last step may hold fewer).
struct grouping_metrics {
  std::size_t groups = 0;        ///< number of groups
  std::size_t steps = 0;         ///< ⌈groups / d⌉
  double average_batch = 0;      ///< grouped samples / groups (OmniBal's AVE-BS)
  double pad_ratio = 0;          ///< eq. (1) over each group's per-sample LLM tokens, averaged over groups
  double dist_ratio_vision = 0;  ///< eq. (2) over the groups' Σ v within a step, averaged over steps
  double dist_ratio_text = 0;    ///< eq. (2) over the groups' Σ t within a step, averaged over steps
};

/// Pad ratio and dist ratios of `g` (OmniBal eq. 1 and 2). `vision[i]` and `text[i]` are
/// sample i's vision size (images or vision tokens) and LLM tokens.
///
/// - pad ratio: eq. (1) with t_i = the LLM tokens of each sample of a group, i.e. the padding
///   the group would carry if its samples were padded to its longest one (an ISF group is
///   packed in OmniBal, so its real padding is 0; this is what the random baseline pays and
///   what the threshold search trades against batch size); averaged over groups.
/// - dist ratio: eq. (2) with T_i = Σ v (vision) or Σ t (text) of the group on device i, over
///   the groups of one step; averaged over steps. A last, partial step counts with the groups
///   it has (idle devices are not counted).
///
/// Complexity O(n + groups). Throws `invalid_input` when ranks = 0 or above `max_ranks`, the
/// spans differ in size, or a member index is out of range. @see OmniBal §4.1, eq. (1)–(2), Table 3.
[[nodiscard]] inline grouping_metrics evaluate_grouping(const grouping& g, std::span<const length_t> vision,
                                                        std::span<const length_t> text, rank_t ranks) {
  (void)checked_ranks(ranks, "evaluate_grouping: ranks");
  if (vision.size() != text.size())
    detail::throw_invalid("evaluate_grouping: ", vision.size(), " vision sizes but ", text.size(), " text sizes");
  if (g.offsets.empty() || g.offsets.front() != 0 || g.offsets.back() != g.members.size())
    detail::throw_invalid("evaluate_grouping: malformed grouping offsets");
  // All of them before any group is read: with {0, 10, 3} group 0 would run past the members.
  for (std::size_t k = 0; k + 1 < g.offsets.size(); ++k)
    if (g.offsets[k + 1] < g.offsets[k]) detail::throw_invalid("evaluate_grouping: offsets not ascending at group ", k);
  grouping_metrics m;
  m.groups = g.size();
  if (m.groups == 0) return m;
  m.steps = (m.groups + ranks - 1) / ranks;
  m.average_batch = static_cast<double>(g.sample_count()) / static_cast<double>(m.groups);

  std::vector<std::uint64_t> sample_tokens, step_v, step_t;
  step_v.reserve(ranks);
  step_t.reserve(ranks);
  double pad_sum = 0, dist_v_sum = 0, dist_t_sum = 0;
  for (std::size_t k = 0; k < m.groups; ++k) {
    sample_tokens.clear();
    std::uint64_t sum_v = 0, sum_t = 0;
    for (std::uint32_t i : g.group(k)) {
      if (i >= text.size())
        detail::throw_invalid("evaluate_grouping: group ", k, " names sample ", i, " of ", text.size());
      sample_tokens.push_back(text[i]);
      sum_v += vision[i];
      sum_t += text[i];
    }
    pad_sum += pad_ratio(sample_tokens);
    step_v.push_back(sum_v);
    step_t.push_back(sum_t);
    if (step_v.size() == ranks || k + 1 == m.groups) {
      dist_v_sum += dist_ratio(step_v);
      dist_t_sum += dist_ratio(step_t);
      step_v.clear();
      step_t.clear();
    }
  }
  m.pad_ratio = pad_sum / static_cast<double>(m.groups);
  m.dist_ratio_vision = dist_v_sum / static_cast<double>(m.steps);
  m.dist_ratio_text = dist_t_sum / static_cast<double>(m.steps);
  return m;
}

/// The baseline of OmniBal's Table 3 ("randomly combining data into a mini-batch"): shuffle
/// samples 0..n−1 with `seed` and cut them into groups of `batch_size` consecutive samples
/// (the last group may be smaller). O(n). Throws `invalid_input` when batch_size = 0.
[[nodiscard]] inline grouping random_grouping(std::size_t samples, std::uint32_t batch_size, std::uint64_t seed) {
  if (batch_size == 0) detail::throw_invalid("random_grouping: batch_size = 0");
  grouping g;
  g.members.resize(checked_count(samples, "samples"));
  std::iota(g.members.begin(), g.members.end(), std::uint32_t{0});
  rng_engine rng = make_rng(seed);
  shuffle(std::span<std::uint32_t>(g.members), rng);
  g.offsets.reserve(samples / batch_size + 2);
  for (std::size_t start = batch_size; start < samples; start += batch_size)
    g.offsets.push_back(static_cast<std::uint32_t>(start));
  if (samples > 0) g.offsets.push_back(static_cast<std::uint32_t>(samples));
  return g;
}

}  // namespace mmbal::sampling
