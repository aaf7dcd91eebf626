#pragma once
/// @file
/// The sample model (docs/DESIGN.md §3): a sample is an ordered list of segments, each with a
/// modality, a length in LLM tokens and an encoder length. A workload is a global batch of
/// samples with their current ranks, plus the modality names.

#include <mmbal/core/types.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mmbal {

/// Index into `workload::modalities`; 0 is always "text".
using modality_id = std::uint8_t;

/// The modality id of text.
inline constexpr modality_id text_modality = 0;

/// One segment of a sample's LLM sequence.
struct segment {
  modality_id modality = text_modality;
  length_t llm_tokens = 0;   ///< length in the LLM sequence
  length_t encoder_len = 0;  ///< encoder work units (patches, frames); equals llm_tokens when not given
  friend bool operator==(const segment&, const segment&) = default;
};

/// One sample of the dataset.
struct sample {
  std::uint64_t id = 0;                ///< the caller's id (JSONL `id`, default the line number)
  rank_t rank = 0;                     ///< current DP rank
  std::optional<std::uint64_t> group;  ///< items with the same group stay together (optional)
  std::vector<segment> segments;       ///< in sequence order

  /// Total LLM tokens (Σ segment llm_tokens). Checked against overflow when read from files.
  [[nodiscard]] std::uint64_t llm_length() const noexcept {
    std::uint64_t n = 0;
    for (const segment& s : segments) n += s.llm_tokens;
    return n;
  }
  friend bool operator==(const sample&, const sample&) = default;
};

/// A global batch: every rank's samples in rank-major order, and the modality names.
struct workload {
  std::vector<std::string> modalities{"text"};  ///< index = modality_id; [0] == "text"
  std::vector<sample> samples;

  /// The id of a modality name, added when new. Throws `invalid_input` past 255 modalities, for
  /// the reserved name "llm", an empty name and a name with a control character.
  modality_id intern_modality(std::string_view name) {
    for (std::size_t i = 0; i < modalities.size(); ++i)
      if (modalities[i] == name) return static_cast<modality_id>(i);
    // "llm" names the LLM phase everywhere a phase is named (policies, reports, --cost-llm):
    // an encoder modality of that name would make two phases of one name.
    if (name == "llm") detail::throw_invalid("modality 'llm' is reserved for the LLM phase");
    if (name.empty()) detail::throw_invalid("a modality name is empty");
    for (const char c : name)  // names are printed in reports and errors; a NUL would cut them short
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
        detail::throw_invalid("modality name '", name.substr(0, name.find('\0')), "...' holds control character ",
                              static_cast<int>(static_cast<unsigned char>(c)));
    if (modalities.size() >= 255) detail::throw_invalid("workload: too many modalities (adding '", name, "')");
    modalities.emplace_back(name);
    return static_cast<modality_id>(modalities.size() - 1);
  }

  /// The id of a modality name if present.
  [[nodiscard]] std::optional<modality_id> find_modality(std::string_view name) const {
    for (std::size_t i = 0; i < modalities.size(); ++i)
      if (modalities[i] == name) return static_cast<modality_id>(i);
    return std::nullopt;
  }
  friend bool operator==(const workload&, const workload&) = default;
};

/// The items of one phase (docs/DESIGN.md §3): for the LLM phase the samples (weight = total LLM
/// tokens), for an encoder phase that modality's segments in input order (weight = encoder
/// length). Item i came from sample `sample_of[i]`, segment `segment_of[i]` (0 for the LLM
/// phase), and sits on rank `origin[i]`.
struct phase_items {
  std::vector<length_t> weights;
  std::vector<rank_t> origin;
  std::vector<std::uint32_t> sample_of;
  std::vector<std::uint32_t> segment_of;
  /// The owning sample's group; empty when no sample of the workload has one (saves 16 bytes
  /// per item in the common case).
  std::vector<std::optional<std::uint64_t>> group;

  [[nodiscard]] std::size_t size() const noexcept { return weights.size(); }
};

namespace detail {
[[nodiscard]] inline bool has_groups(const workload& w) noexcept {
  for (const sample& s : w.samples)
    if (s.group) return true;
  return false;
}

/// tokens × bytes_per_token; throws `invalid_input` naming the phase and the item when the
/// product exceeds 2^64 − 1.
[[nodiscard]] inline std::uint64_t token_bytes(std::uint64_t tokens, std::uint64_t bytes_per_token,
                                               std::string_view phase, std::size_t item) {
  if (bytes_per_token != 0 && tokens > UINT64_MAX / bytes_per_token)
    throw_invalid("phase '", phase, "': item ", item, " has ", tokens, " tokens x ", bytes_per_token,
                  " bytes per token, which exceeds 2^64 - 1");
  return tokens * bytes_per_token;
}

/// How many samples ahead the passes over a workload ask for segments (`prefetch_segments`).
inline constexpr std::size_t segment_prefetch_distance = 16;

/// Asks the caches for the segments of `samples[i]`, if any: every sample's segments are a
/// heap block of their own, so a pass over a workload parsed from a file otherwise waits on
/// about one memory miss per sample (bench/RESULTS.md "Session 37 — where the image-heavy fresh plan goes; prefetched
/// segments").
inline void prefetch_segments(std::span<const sample> samples, std::size_t i) noexcept {
#if defined(__GNUC__)
  if (i < samples.size() && !samples[i].segments.empty()) {
    const segment* const first = samples[i].segments.data();
    __builtin_prefetch(first);
    __builtin_prefetch(first + (samples[i].segments.size() - 1));
  }
#else
  (void)samples;
  (void)i;
#endif
}
}  // namespace detail

/// What one pass over a workload counts: segments per modality id (all 256 ids), and whether
/// any sample has a group.
struct workload_counts {
  std::array<std::size_t, 256> segments{};
  bool grouped = false;

  /// Counts sample `s`. O(its segments).
  void add(const sample& s) noexcept {
    grouped |= s.group.has_value();
    for (const segment& g : s.segments) ++segments[g.modality];
  }
};

/// The counts of `w`. O(samples + segments).
[[nodiscard]] inline workload_counts count_segments(const workload& w) {
  workload_counts c;
  for (std::size_t i = 0; i < w.samples.size(); ++i) {
    detail::prefetch_segments(w.samples, i + detail::segment_prefetch_distance);
    c.add(w.samples[i]);
  }
  return c;
}

/// Where `collect_phase_items` writes; a null pointer (or an id beyond a span) skips that
/// output.
struct phase_item_sinks {
  phase_items* llm = nullptr;                ///< the LLM phase's items (`llm_phase_items`)
  std::span<phase_items* const> encoders{};  ///< [m]: modality m's items (`encoder_phase_items`); [0] is ignored
  /// [m]: for every item of modality m, in the same order, its segment's LLM tokens (what an
  /// encoder output occupies in the LLM sequence: the composed plan's item size).
  std::span<std::vector<std::uint64_t>* const> segment_tokens{};
};

namespace detail {
/// The sinks of `collect_phase_items` by modality id (all 256: a lookup per segment without a
/// bounds check).
struct phase_item_table {
  phase_items* llm = nullptr;
  std::array<phase_items*, 256> encoder{};
  std::array<std::vector<std::uint64_t>*, 256> tokens{};

  explicit phase_item_table(const phase_item_sinks& sinks) : llm(sinks.llm) {
    for (std::size_t m = 1; m < 256; ++m) {
      if (m < sinks.encoders.size()) encoder[m] = sinks.encoders[m];
      if (m < sinks.segment_tokens.size()) tokens[m] = sinks.segment_tokens[m];
    }
  }

  /// The requested sinks, as indices for `resize_sink`: 0 = the LLM phase's items, m = modality
  /// m's items, 256 + m = modality m's segment tokens.
  [[nodiscard]] std::vector<std::size_t> requested() const {
    std::vector<std::size_t> out;
    if (llm) out.push_back(0);
    for (std::size_t m = 1; m < 256; ++m) {
      if (encoder[m]) out.push_back(m);
      if (tokens[m]) out.push_back(256 + m);
    }
    return out;
  }

  /// Sizes sink `sink` (see `requested`) for `samples` samples with `counts` (`count_segments`
  /// of the workload). Sinks are independent: several threads may size different ones (a fresh
  /// plan's first touches of these pages then run in parallel).
  void resize_sink(std::size_t sink, const workload_counts& counts, std::size_t samples) const {
    const auto size = [&](phase_items& p, std::size_t count) {
      checked_count(count, "segments");
      p.weights.resize(count);
      p.origin.resize(count);
      p.sample_of.resize(count);
      p.segment_of.resize(count);
      p.group.resize(counts.grouped ? count : 0);
    };
    if (sink == 0) {
      size(*llm, samples);
      std::fill(llm->segment_of.begin(), llm->segment_of.end(), 0);
    } else if (sink < 256) {
      size(*encoder[sink], counts.segments[sink]);
    } else {
      tokens[sink - 256]->resize(counts.segments[sink - 256]);
    }
  }

  /// Sizes every requested sink (`resize_sink`).
  void resize(const workload_counts& counts, std::size_t samples) const {
    for (const std::size_t sink : requested()) resize_sink(sink, counts, samples);
  }

  /// Fills the sinks (sized by `resize`) from samples [begin, end) of `w`, whose first item of
  /// modality m goes to index `at[m]` (the segments of m before `begin`). Throws `invalid_input`
  /// when the LLM phase is requested and a sample's LLM length exceeds 2^32 - 1 (the first
  /// such sample of the range).
  void fill(const workload& w, std::uint32_t begin, std::uint32_t end, std::array<std::size_t, 256> at,
            bool grouped) const {
    for (std::uint32_t i = begin; i < end; ++i) {
      prefetch_segments(w.samples, std::size_t{i} + segment_prefetch_distance);
      const sample& s = w.samples[i];
      std::uint64_t length = 0;
      for (std::uint32_t k = 0; k < s.segments.size(); ++k) {
        const segment& g = s.segments[k];
        length += g.llm_tokens;
        const std::size_t j = at[g.modality]++;
        if (phase_items* p = encoder[g.modality]) {
          p->weights[j] = g.encoder_len;
          p->origin[j] = s.rank;
          p->sample_of[j] = i;
          p->segment_of[j] = k;
          if (grouped) p->group[j] = s.group;
        }
        if (std::vector<std::uint64_t>* t = tokens[g.modality]) (*t)[j] = g.llm_tokens;
      }
      if (llm) {
        if (length > UINT32_MAX) throw_invalid("sample ", s.id, ": LLM length ", length, " exceeds 2^32 - 1");
        llm->weights[i] = static_cast<length_t>(length);
        llm->origin[i] = s.rank;
        llm->sample_of[i] = i;
        if (grouped) llm->group[i] = s.group;
      }
    }
  }
};

/// `collect_phase_items` with the counts of `w` given (`counts` must equal `count_segments(w)`:
/// for callers whose own pass over the workload counted them, e.g. while validating).
inline void collect_phase_items(const workload& w, const workload_counts& counts, const phase_item_sinks& sinks) {
  const std::uint32_t n = checked_count(w.samples.size(), "samples");
  const phase_item_table table(sinks);
  table.resize(counts, n);
  table.fill(w, 0, n, {}, counts.grouped);
}
}  // namespace detail

/// Every requested phase's items in one pass over `w` after a counting pass (separate builds
/// read the whole workload once or twice per phase: for three phases of 845 K items in
/// 153,600 samples, 14 ms against 8). Same results as `llm_phase_items` and
/// `encoder_phase_items` for every requested phase. Buffers are reused; previous contents are
/// replaced. Throws `invalid_input` when the LLM phase is requested and a sample's LLM length
/// exceeds 2^32 - 1, or when a count exceeds 2^32 - 1. O(samples + segments).
inline void collect_phase_items(const workload& w, const phase_item_sinks& sinks) {
  detail::collect_phase_items(w, count_segments(w), sinks);
}

/// The LLM phase's items into `p` (its buffers are reused; previous contents are replaced):
/// one per sample, weighted by its LLM length. Throws if a sample's length exceeds 2^32 - 1.
inline void llm_phase_items(const workload& w, phase_items& p) {
  workload_counts counts;  // the LLM phase needs no segment counts
  counts.grouped = detail::has_groups(w);
  detail::collect_phase_items(w, counts, {.llm = &p});
}

/// The LLM phase's items: one per sample. Throws if a sample's length exceeds 2^32 - 1.
[[nodiscard]] inline phase_items llm_phase_items(const workload& w) {
  phase_items p;
  llm_phase_items(w, p);
  return p;
}

/// An encoder phase's items into `p` (its buffers are reused; previous contents are
/// replaced): every segment of `modality`, in input order, weighted by its encoder length.
/// Throws if `modality` is text.
inline void encoder_phase_items(const workload& w, modality_id modality, phase_items& p) {
  if (modality == text_modality) detail::throw_invalid("encoder_phase_items: text has no encoder phase");
  // Counted first: exact sizes instead of ~log n regrowths of five vectors (fresh memory costs
  // more than the extra pass).
  std::vector<phase_items*> encoders(std::size_t{modality} + 1, nullptr);
  encoders[modality] = &p;
  collect_phase_items(w, {.encoders = encoders});
}

/// An encoder phase's items: every segment of `modality`, in input order, weighted by its
/// encoder length. Throws if `modality` is text.
[[nodiscard]] inline phase_items encoder_phase_items(const workload& w, modality_id modality) {
  phase_items p;
  encoder_phase_items(w, modality, p);
  return p;
}

/// The items of the phase named `phase` into `p` (buffers reused): "llm" or a modality name
/// present in `w`.
inline void phase_items_of(const workload& w, std::string_view phase, phase_items& p) {
  if (phase == "llm") return llm_phase_items(w, p);
  const auto m = w.find_modality(phase);
  if (!m || *m == text_modality) {
    std::string known = "llm";
    for (std::size_t i = 1; i < w.modalities.size(); ++i) known += ", " + w.modalities[i];
    detail::throw_invalid("unknown phase '", phase, "' (this workload has: ", known, ")");
  }
  encoder_phase_items(w, *m, p);
}

/// The items of the phase named `phase`: "llm" or a modality name present in `w`.
[[nodiscard]] inline phase_items phase_items_of(const workload& w, std::string_view phase) {
  phase_items p;
  phase_items_of(w, phase, p);
  return p;
}

/// The most bytes one phase may carry in all: 2^57 (128 PiB). Every traffic count sums item
/// bytes over at most two hops and the 62 phases a workload can have (61 modalities and the
/// LLM), so 2 · 62 · 2^57 < 2^64 keeps every reported sum exact instead of wrapping.
inline constexpr std::uint64_t max_phase_bytes = std::uint64_t{1} << 57;

/// Bytes of each item of a phase: its weight (LLM tokens for the LLM phase, encoder length for
/// an encoder phase) × `bytes_per_token`. Throws `invalid_input` naming the phase and item if a
/// product exceeds 2^64 − 1, or naming the phase if their sum exceeds `max_phase_bytes`. Writes
/// into `bytes` (its buffer is reused). O(n).
inline void phase_item_bytes(const phase_items& items, std::uint64_t bytes_per_token, std::string_view phase,
                             std::vector<std::uint64_t>& bytes) {
  bytes.resize(items.size());
  bool over = false;
  if (bytes_per_token <= UINT32_MAX) {
    // No product of a 32-bit weight can wrap, and the sum is bytes_per_token × Σ weights (< 2^64
    // for fewer than 2^32 items): one multiply per item, no checks in the loop (the checked
    // loop below cost 1.1 ms on the image-heavy image phase's 584 K items).
    std::uint64_t weights = 0;
    for (std::size_t i = 0; i < items.size(); ++i) {
      bytes[i] = std::uint64_t{items.weights[i]} * bytes_per_token;
      weights += items.weights[i];
    }
    over = bytes_per_token != 0 && weights > max_phase_bytes / bytes_per_token;
  } else {
    std::uint64_t total = 0;  // saturates just above the limit: never wraps
    for (std::size_t i = 0; i < items.size(); ++i) {
      bytes[i] = detail::token_bytes(items.weights[i], bytes_per_token, phase, i);
      if (total <= max_phase_bytes) total += std::min(bytes[i], max_phase_bytes + 1);
    }
    over = total > max_phase_bytes;
  }
  if (over)
    detail::throw_invalid("phase '", phase, "': its ", items.size(),
                          " items carry more than 2^57 bytes (max_phase_bytes) at ", bytes_per_token,
                          " bytes per token");
}

/// `phase_item_bytes` into a new vector.
[[nodiscard]] inline std::vector<std::uint64_t> phase_item_bytes(const phase_items& items,
                                                                 std::uint64_t bytes_per_token,
                                                                 std::string_view phase) {
  std::vector<std::uint64_t> bytes;
  phase_item_bytes(items, bytes_per_token, phase, bytes);
  return bytes;
}

/// Group id per item for the `groups` balancing constraint, or empty when no sample has a
/// group. Items of samples without a group get ids of their own (2^63 + item index); a caller
/// group ≥ 2^63 could collide with those and is rejected, naming the phase and the sample. O(n).
[[nodiscard]] inline std::vector<std::uint64_t> phase_group_ids(const phase_items& items, std::string_view phase) {
  bool any = false;
  for (const auto& g : items.group) any = any || g.has_value();
  if (!any) return {};
  constexpr std::uint64_t own = std::uint64_t{1} << 63;
  std::vector<std::uint64_t> groups(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (items.group[i] && *items.group[i] >= own)
      detail::throw_invalid("phase '", phase, "': group ", *items.group[i], " of sample ", items.sample_of[i],
                            " is >= 2^63");
    groups[i] = items.group[i] ? *items.group[i] : own + i;
  }
  return groups;
}

}  // namespace mmbal
