#pragma once
/// @file
/// The Bitfield Attention Mask (BAM): one `std::uint64_t` per token plus a document id, and
/// its builders from documents in the EP, EE and MP layouts.
/// @see Cornstarch §4.3.1 (Bitfield Attention Mask), Fig. 11 (EP, EE, MP); docs/DESIGN.md §5.3.

#include <mmbal/core/error.hpp>
#include <mmbal/core/types.hpp>
#include <mmbal/mask/predicate.hpp>
#include <mmbal/workload/sample.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <utility>
#include <vector>

namespace mmbal {

/// What the modality bits 1..61 stand for (the caller's choice).
enum class bit_assignment {
  modality,  ///< one bit per modality (encoder): all spans of a modality in a document attend each other
  span,      ///< one bit per modality span of a document: a span attends only itself
};

/// A bitfield attention mask over a packed sequence of T tokens: `bits()[t]` is token t's
/// 64-bit pattern (bit 0 text, bits 1..61 modality, bit 62 causal, bit 63 reserved) and
/// `documents()[t]` its document id. Document ids are non-decreasing along the sequence (a
/// document is one contiguous range); tokens of different documents never attend.
///
/// The constructor also records the maximal runs of tokens with equal (bits, document), which
/// every workload computation works on: per-token and per-block workloads cost
/// O(runs · distinct patterns per document + T), never O(T²).
/// @see Cornstarch §4.3.1; docs/DESIGN.md §5.3.
class bitfield_mask {
 public:
  /// A maximal run of consecutive tokens with the same bits and document.
  struct run {
    std::uint32_t begin = 0;     ///< first token
    std::uint32_t length = 0;    ///< number of tokens (> 0)
    std::uint64_t bits = 0;      ///< the tokens' bit pattern
    std::uint32_t document = 0;  ///< index of the document (0-based, in order of appearance)
    friend bool operator==(const run&, const run&) = default;
  };

  /// The empty mask (T = 0).
  bitfield_mask() = default;

  /// Takes per-token bits and document ids and validates them. O(T).
  /// @throws invalid_input if the sizes differ, T exceeds 2^32 - 1, a token sets the
  /// reserved bit 63, a token has neither the text bit nor a modality bit, or the document
  /// ids decrease somewhere (naming the token and the values).
  bitfield_mask(std::vector<std::uint64_t> bits, std::vector<std::uint32_t> documents)
      : bits_(std::move(bits)), documents_(std::move(documents)) {
    if (bits_.size() != documents_.size())
      detail::throw_invalid("bitfield_mask: ", bits_.size(), " bit patterns but ", documents_.size(), " document ids");
    if (bits_.size() > std::numeric_limits<std::uint32_t>::max())
      detail::throw_invalid("bitfield_mask: ", bits_.size(), " tokens exceed 2^32 - 1");
    const auto n = static_cast<std::uint32_t>(bits_.size());
    for (std::uint32_t t = 0; t < n; ++t) {
      const std::uint64_t b = bits_[t];
      if ((b & reserved_bit) != 0) detail::throw_invalid("bitfield_mask: token ", t, " sets the reserved bit 63");
      if ((b & ~control_bits) == 0)
        detail::throw_invalid("bitfield_mask: token ", t, " has neither the text bit nor a modality bit (bits ", b,
                              ")");
      if (t > 0 && documents_[t] < documents_[t - 1])
        detail::throw_invalid("bitfield_mask: document id decreases at token ", t, " (", documents_[t - 1], " -> ",
                              documents_[t], "); documents must be contiguous and in order");
      if (t == 0 || b != bits_[t - 1] || documents_[t] != documents_[t - 1]) {
        if (t == 0 || documents_[t] != documents_[t - 1]) doc_runs_.push_back(static_cast<std::uint32_t>(runs_.size()));
        runs_.push_back(run{t, 0, b, static_cast<std::uint32_t>(doc_runs_.size() - 1)});
      }
      ++runs_.back().length;
    }
    doc_runs_.push_back(static_cast<std::uint32_t>(runs_.size()));
  }

  /// Number of tokens T.
  [[nodiscard]] std::uint32_t size() const noexcept { return static_cast<std::uint32_t>(bits_.size()); }
  /// Per-token bit patterns.
  [[nodiscard]] std::span<const std::uint64_t> bits() const noexcept { return bits_; }
  /// Per-token document ids (non-decreasing).
  [[nodiscard]] std::span<const std::uint32_t> documents() const noexcept { return documents_; }
  /// Maximal runs of equal (bits, document), in sequence order.
  [[nodiscard]] std::span<const run> runs() const noexcept { return runs_; }
  /// Number of non-empty documents.
  [[nodiscard]] std::uint32_t document_count() const noexcept {
    return doc_runs_.empty() ? 0 : static_cast<std::uint32_t>(doc_runs_.size() - 1);
  }
  /// The runs of document `d` (index in order of appearance, < document_count()).
  [[nodiscard]] std::span<const run> document_runs(std::uint32_t d) const {
    if (d >= document_count())
      detail::throw_invalid("bitfield_mask: document ", d, " >= document count ", document_count());
    return std::span<const run>(runs_).subspan(doc_runs_[d], doc_runs_[d + 1] - doc_runs_[d]);
  }
  /// First token of document `d` and one past its last token.
  [[nodiscard]] std::pair<std::uint32_t, std::uint32_t> document_range(std::uint32_t d) const {
    const auto r = document_runs(d);
    return {r.front().begin, r.back().begin + r.back().length};
  }

  /// Whether query q attends key k (both < size()). O(1).
  /// @see bitfield_attends for the rule.
  [[nodiscard]] bool attends(std::uint32_t q, std::uint32_t k) const {
    return bitfield_attends(q, k, bits_[q], bits_[k], documents_[q], documents_[k]);
  }

  friend bool operator==(const bitfield_mask&, const bitfield_mask&) = default;

 private:
  std::vector<std::uint64_t> bits_;
  std::vector<std::uint32_t> documents_;
  std::vector<run> runs_;
  std::vector<std::uint32_t> doc_runs_;  // runs_ index of each document's first run, plus the end
};

/// A modality span placed inside a document: tokens [offset, offset + length) carry `modality`.
struct placed_span {
  std::uint32_t offset = 0;  ///< first token, relative to the document start
  std::uint32_t length = 0;  ///< number of tokens (spans of length 0 are ignored)
  modality_id modality = 1;  ///< a non-text modality id (as in `workload::modalities`)
  friend bool operator==(const placed_span&, const placed_span&) = default;
};

/// A document of `length` tokens: the given modality spans at their offsets, text elsewhere.
struct document_layout {
  std::uint32_t length = 0;
  std::vector<placed_span> spans;
  friend bool operator==(const document_layout&, const document_layout&) = default;
};

/// The EE layout (encoder outputs embedded at their positions) of a sample: every non-text
/// segment becomes a span where it sits in the sample's segment order. O(segments).
/// @throws invalid_input if the sample is longer than 2^32 - 1 tokens.
/// @see Cornstarch Fig. 11(b).
[[nodiscard]] inline document_layout ee_document(const sample& s) {
  if (s.llm_length() > std::numeric_limits<std::uint32_t>::max())
    detail::throw_invalid("sample ", s.id, ": LLM length ", s.llm_length(), " exceeds 2^32 - 1");
  document_layout d;
  for (const segment& g : s.segments) {
    if (g.modality != text_modality && g.llm_tokens > 0) d.spans.push_back({d.length, g.llm_tokens, g.modality});
    d.length += g.llm_tokens;
  }
  return d;
}

/// The EP layout (encoder outputs prefixed) of a sample: its non-text segments first, in
/// their order, then all of its text. O(segments).
/// @throws invalid_input if the sample is longer than 2^32 - 1 tokens.
/// @see Cornstarch Fig. 11(a).
[[nodiscard]] inline document_layout ep_document(const sample& s) {
  document_layout d = ee_document(s);
  std::uint32_t at = 0;
  for (placed_span& p : d.spans) {
    p.offset = at;
    at += p.length;
  }
  return d;
}

/// Where a sample's modality segments sit when it becomes a document.
enum class span_layout {
  embedded,  ///< EE (and MP: many documents, each embedded): spans stay at their positions
  prefixed,  ///< EP: spans moved in front of the text
};

namespace detail {

/// Sorted, non-overlapping, in-range spans of one document (length-0 spans dropped); throws
/// otherwise, naming document, offsets and lengths.
inline std::vector<placed_span> checked_spans(const document_layout& d, std::size_t index) {
  std::vector<placed_span> spans;
  spans.reserve(d.spans.size());
  for (const placed_span& p : d.spans) {
    if (p.length == 0) continue;
    if (p.modality == text_modality)
      throw_invalid("document ", index, ": span at offset ", p.offset, " has the text modality");
    if (std::uint64_t{p.offset} + p.length > d.length)
      throw_invalid("document ", index, ": span [", p.offset, ", ", std::uint64_t{p.offset} + p.length,
                    ") exceeds the document length ", d.length);
    spans.push_back(p);
  }
  std::stable_sort(spans.begin(), spans.end(),
                   [](const placed_span& a, const placed_span& b) { return a.offset < b.offset; });
  for (std::size_t i = 1; i < spans.size(); ++i)
    if (spans[i].offset < spans[i - 1].offset + spans[i - 1].length)
      throw_invalid("document ", index, ": overlapping segments [", spans[i - 1].offset, ", ",
                    spans[i - 1].offset + spans[i - 1].length, ") and [", spans[i].offset, ", ",
                    std::uint64_t{spans[i].offset} + spans[i].length, ")");
  return spans;
}

}  // namespace detail

/// Builds the bitfield mask of a packed sequence of documents, in the given order (document
/// i gets id i). Text tokens carry bit 0, the causal bit and every modality bit used in their
/// document; a span's tokens carry only its modality bit.
///
/// - `bit_assignment::modality`: each distinct modality of the whole sequence gets one bit,
///   in ascending modality id (bit 1 for the smallest): Cornstarch's one bit per encoder.
/// - `bit_assignment::span`: the spans of each document get bits 1, 2, ... in offset order
///   (documents never attend each other, so bits are reused across documents).
///
/// O(T + total spans · log). Guarantee: `attends(q, k)` is exactly the rule "a text token
/// attends every earlier token of its document and itself; a span token attends every token
/// of its span (span bits) or of every span of its modality in its document (modality bits)".
/// @throws invalid_input for overlapping or out-of-range spans, a span with the text
/// modality, more than 61 modality bits requested (naming the count), or T > 2^32 - 1.
/// @see Cornstarch §4.3.1.
[[nodiscard]] inline bitfield_mask build_bitfield_mask(std::span<const document_layout> docs, bit_assignment assign) {
  std::uint64_t total = 0;
  for (const document_layout& d : docs) total += d.length;
  if (total > std::numeric_limits<std::uint32_t>::max())
    detail::throw_invalid("build_bitfield_mask: ", total, " tokens exceed 2^32 - 1");
  if (docs.size() > std::numeric_limits<std::uint32_t>::max())
    detail::throw_invalid("build_bitfield_mask: ", docs.size(), " documents exceed 2^32 - 1");

  std::vector<std::vector<placed_span>> spans(docs.size());
  for (std::size_t i = 0; i < docs.size(); ++i) spans[i] = detail::checked_spans(docs[i], i);

  // modality id -> bit (modality mode): ascending id, so the choice does not depend on order.
  std::vector<std::uint64_t> modality_bit_of(256, 0);
  if (assign == bit_assignment::modality) {
    std::vector<bool> used(256, false);
    for (const auto& s : spans)
      for (const placed_span& p : s) used[p.modality] = true;
    unsigned count = 0;
    for (unsigned m = 1; m < 256; ++m)
      if (used[m]) ++count;
    if (count > max_modality_bits)
      detail::throw_invalid("build_bitfield_mask: ", count, " distinct modalities need ", count,
                            " modality bits, the bitfield has ", max_modality_bits);
    unsigned next = 0;
    for (unsigned m = 1; m < 256; ++m)
      if (used[m]) modality_bit_of[m] = mmbal::modality_bit(next++);
  } else {
    for (std::size_t i = 0; i < docs.size(); ++i)
      if (spans[i].size() > max_modality_bits)
        detail::throw_invalid(
            "build_bitfield_mask: document ", i, " has ", spans[i].size(), " modality spans, span bits allow at most ",
            max_modality_bits,
            " (assign bits per modality instead: bit_assignment::modality, Python assign=\"modality\","
            " the tool's --bits modality)");
  }

  std::vector<std::uint64_t> bits(total);
  std::vector<std::uint32_t> ids(total);
  std::uint32_t at = 0;
  for (std::size_t i = 0; i < docs.size(); ++i) {
    const auto& s = spans[i];
    std::vector<std::uint64_t> span_bits(s.size());
    std::uint64_t text = text_bit | causal_bit;
    for (std::size_t j = 0; j < s.size(); ++j) {
      span_bits[j] = assign == bit_assignment::span ? mmbal::modality_bit(static_cast<unsigned>(j))
                                                    : modality_bit_of[s[j].modality];
      text |= span_bits[j];
    }
    const std::uint32_t begin = at, end = at + docs[i].length;
    std::fill(bits.begin() + begin, bits.begin() + end, text);
    std::fill(ids.begin() + begin, ids.begin() + end, static_cast<std::uint32_t>(i));
    for (std::size_t j = 0; j < s.size(); ++j)
      std::fill_n(bits.begin() + begin + s[j].offset, s[j].length, span_bits[j]);
    at = end;
  }
  return bitfield_mask(std::move(bits), std::move(ids));
}

/// Builds the mask of samples packed as consecutive documents (sample i = document i), each
/// laid out by `layout` (EE/MP: `embedded`, the default; EP: `prefixed`). O(T + segments).
/// @throws invalid_input as `build_bitfield_mask(documents, ...)`.
/// @see Cornstarch Fig. 11 (EP, EE, MP).
[[nodiscard]] inline bitfield_mask build_bitfield_mask(std::span<const sample> samples, bit_assignment assign,
                                                       span_layout layout = span_layout::embedded) {
  std::vector<document_layout> docs;
  docs.reserve(samples.size());
  for (const sample& s : samples) docs.push_back(layout == span_layout::prefixed ? ep_document(s) : ee_document(s));
  return build_bitfield_mask(std::span<const document_layout>(docs), assign);
}

}  // namespace mmbal
