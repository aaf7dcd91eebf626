#pragma once
/// @file
/// Per-sample metadata on the wire: a rank's samples serialized to a flat `std::uint32_t`
/// array, and the merge of every rank's array into one global `workload` (docs/DESIGN.md §3:
/// item ids are positions in the gathered, rank-major order). Transports all-gather the
/// words (`MPI_Allgatherv` for MPI); this file is pure host code shared by all of them.
/// @see OrchMLLM §6 (every rank plans on the same gathered metadata)

#include <mmbal/core/error.hpp>
#include <mmbal/core/types.hpp>
#include <mmbal/workload/sample.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mmbal::transport {

/// First word of every serialized block ("MMB" + format version 1), so a rank that sends
/// something else (another library version, garbage) is detected instead of misparsed.
inline constexpr std::uint32_t metadata_magic = 0x4D4D4201u;

/// The one-word block a rank sends instead when its samples cannot be serialized
/// (`gather_workload`): every rank then throws instead of waiting for it.
inline constexpr std::uint32_t metadata_failed = 0x4D4D42FFu;

/// Serializes `local` (one rank's samples) to words. Layout, all `std::uint32_t`:
/// `magic, modality_count, {name_bytes, ⌈name_bytes/4⌉ words of UTF-8} × modality_count,
/// sample_count, {id_lo, id_hi, has_group, group_lo, group_hi, segment_count,
/// {modality, llm_tokens, encoder_len} × segment_count} × sample_count`.
/// The sample's `rank` is not sent: the receiver knows which rank sent each block.
/// O(total segments + modality name bytes). Throws `invalid_input` if a segment refers to a
/// modality id outside `local.modalities` or a count exceeds 2^32 - 1.
[[nodiscard]] inline std::vector<std::uint32_t> serialize_samples(const workload& local) {
  std::vector<std::uint32_t> out;
  std::size_t words = 3 + 6 * local.samples.size();
  for (const sample& s : local.samples) words += 3 * s.segments.size();
  out.reserve(words);
  out.push_back(metadata_magic);
  out.push_back(checked_count(local.modalities.size(), "modalities"));
  for (const std::string& name : local.modalities) {
    const std::uint32_t n = checked_count(name.size(), "modality name bytes");
    out.push_back(n);
    for (std::uint32_t i = 0; i < n; i += 4) {
      std::uint32_t w = 0;
      for (std::uint32_t k = 0; k < 4 && i + k < n; ++k)
        w |= std::uint32_t{static_cast<unsigned char>(name[i + k])} << (8 * k);
      out.push_back(w);
    }
  }
  out.push_back(checked_count(local.samples.size(), "samples"));
  for (const sample& s : local.samples) {
    out.push_back(static_cast<std::uint32_t>(s.id));
    out.push_back(static_cast<std::uint32_t>(s.id >> 32));
    out.push_back(s.group.has_value() ? 1u : 0u);
    const std::uint64_t g = s.group.value_or(0);
    out.push_back(static_cast<std::uint32_t>(g));
    out.push_back(static_cast<std::uint32_t>(g >> 32));
    out.push_back(checked_count(s.segments.size(), "segments"));
    for (const segment& seg : s.segments) {
      if (seg.modality >= local.modalities.size())
        detail::throw_invalid("serialize_samples: sample ", s.id, " has modality id ", unsigned{seg.modality},
                              " but the workload names only ", local.modalities.size(), " modalities");
      out.push_back(seg.modality);
      out.push_back(seg.llm_tokens);
      out.push_back(seg.encoder_len);
    }
  }
  return out;
}

namespace detail {

/// Bounds-checked reader over one rank's block; errors name the rank and word position.
class word_reader {
 public:
  word_reader(std::span<const std::uint32_t> words, rank_t rank) : words_(words), rank_(rank) {}
  std::uint32_t next(const char* what) {
    if (pos_ >= words_.size())
      mmbal::detail::throw_invalid("metadata from rank ", rank_, ": truncated at word ", pos_, " while reading ", what);
    return words_[pos_++];
  }
  [[nodiscard]] bool done() const noexcept { return pos_ == words_.size(); }
  [[nodiscard]] std::size_t position() const noexcept { return pos_; }
  /// Words not read yet. Reservations are capped by what they can hold, never sized by a count
  /// from the wire alone (a corrupt 0xFFFFFFFF segment count asked for 48 GB before the
  /// truncation was found).
  [[nodiscard]] std::size_t remaining() const noexcept { return words_.size() - pos_; }

 private:
  std::span<const std::uint32_t> words_;
  rank_t rank_;
  std::size_t pos_ = 0;
};

}  // namespace detail

/// Merges the gathered blocks into one global workload. `words` holds every rank's block
/// back to back; rank r's block is `words[offsets[r] .. offsets[r+1])` (`offsets.size()` =
/// ranks + 1, `offsets[0] == 0`, non-decreasing, `offsets.back() == words.size()`).
/// Samples keep their rank-major order and get `rank = r`. Modality names are merged in
/// (rank, local id) order and segment modality ids remapped, so ranks may have listed their
/// modalities in different orders; the result is identical on every rank that merges the
/// same words. O(words). Throws `invalid_input` naming the rank and position on malformed
/// data (bad magic, truncation, trailing words, unknown modality id).
[[nodiscard]] inline workload deserialize_samples(std::span<const std::uint32_t> words,
                                                  std::span<const std::uint64_t> offsets) {
  if (offsets.empty() || offsets.front() != 0 || offsets.back() != words.size())
    mmbal::detail::throw_invalid("deserialize_samples: offsets must start at 0 and end at ", words.size(), " (got ",
                                 offsets.size(), " offsets)");
  workload out;
  const std::size_t ranks = offsets.size() - 1;
  checked_count(ranks, "ranks");
  for (std::size_t r = 0; r < ranks; ++r) {
    if (offsets[r + 1] < offsets[r]) mmbal::detail::throw_invalid("deserialize_samples: offsets decrease at rank ", r);
    const auto rank = static_cast<rank_t>(r);
    detail::word_reader in(words.subspan(offsets[r], offsets[r + 1] - offsets[r]), rank);
    const std::uint32_t magic = in.next("the magic word");
    if (magic != metadata_magic)
      mmbal::detail::throw_invalid("metadata from rank ", r, ": bad magic word ", magic, " (expected ", metadata_magic,
                                   ")");
    const std::uint32_t modality_count = in.next("the modality count");
    std::vector<modality_id> remap;
    remap.reserve(std::min<std::size_t>(modality_count, in.remaining()));
    for (std::uint32_t m = 0; m < modality_count; ++m) {
      const std::uint32_t n = in.next("a modality name length");
      std::string name;
      name.reserve(std::min<std::size_t>(n, 4 * in.remaining()));  // 4 characters a word
      for (std::uint32_t i = 0; i < n; i += 4) {
        const std::uint32_t w = in.next("a modality name");
        for (std::uint32_t k = 0; k < 4 && i + k < n; ++k) name.push_back(static_cast<char>((w >> (8 * k)) & 0xFFu));
      }
      remap.push_back(out.intern_modality(name));
    }
    const std::uint32_t sample_count = in.next("the sample count");
    for (std::uint32_t i = 0; i < sample_count; ++i) {
      sample s;
      s.rank = rank;
      s.id = in.next("a sample id");
      s.id |= std::uint64_t{in.next("a sample id")} << 32;
      const std::uint32_t has_group = in.next("a group flag");
      std::uint64_t g = in.next("a group");
      g |= std::uint64_t{in.next("a group")} << 32;
      if (has_group > 1)
        mmbal::detail::throw_invalid("metadata from rank ", r, ": sample ", i, " has group flag ", has_group);
      if (has_group == 1) s.group = g;
      const std::uint32_t segments = in.next("a segment count");
      s.segments.reserve(std::min<std::size_t>(segments, in.remaining() / 3));  // 3 words a segment
      for (std::uint32_t k = 0; k < segments; ++k) {
        const std::uint32_t m = in.next("a segment modality");
        if (m >= remap.size())
          mmbal::detail::throw_invalid("metadata from rank ", r, ": sample ", i, " segment ", k, " has modality id ", m,
                                       " but the rank named ", remap.size(), " modalities");
        segment seg;
        seg.modality = remap[m];
        seg.llm_tokens = in.next("a segment length");
        seg.encoder_len = in.next("a segment encoder length");
        s.segments.push_back(seg);
      }
      out.samples.push_back(std::move(s));
    }
    if (!in.done())
      mmbal::detail::throw_invalid("metadata from rank ", r, ": ", (offsets[r + 1] - offsets[r]) - in.position(),
                                   " trailing words");
  }
  checked_count(out.samples.size(), "samples");
  return out;
}

}  // namespace mmbal::transport
