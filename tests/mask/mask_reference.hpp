#pragma once
// Independent references for the mask tests: random documents in the EP, EE and MP layouts
// and the dense mask written straight from the attention semantics (Cornstarch §4.3.1,
// docs/WORKLOADS.md (e)), without going through bit patterns.

#include <mmbal/core/rng.hpp>
#include <mmbal/workload/sample.hpp>

#include <cstdint>
#include <vector>

namespace mask_test {

enum class layout { ep, ee, mp };

/// Random samples of one packed sequence: EP/EE one document, MP 1..6 documents (some text
/// only). Modalities 1..3 so that modality bits merge spans; lengths small (T <= ~200).
inline std::vector<mmbal::sample> random_documents(mmbal::rng_engine& g, layout l) {
  const int docs = l == layout::mp ? static_cast<int>(mmbal::uniform_int(g, 1, 6)) : 1;
  std::vector<mmbal::sample> out;
  for (int d = 0; d < docs; ++d) {
    mmbal::sample s;
    s.id = static_cast<std::uint64_t>(d);
    const int segs = static_cast<int>(mmbal::uniform_int(g, 0, 7));
    for (int i = 0; i < segs; ++i) {
      mmbal::segment seg;
      seg.modality = static_cast<mmbal::modality_id>(mmbal::uniform_int(g, 0, 3));
      seg.llm_tokens = static_cast<mmbal::length_t>(mmbal::uniform_int(g, seg.modality == 0 ? 1 : 0, 12));
      seg.encoder_len = seg.llm_tokens;
      s.segments.push_back(seg);
    }
    out.push_back(s);
  }
  return out;
}

/// One token of the reference sequence.
struct token {
  std::uint32_t doc;
  bool text;
  int span;  // index of the span in its document (-1 for text)
  mmbal::modality_id modality;
};

/// The token sequence: samples in order; EP puts every non-text segment first.
inline std::vector<token> tokens_of(const std::vector<mmbal::sample>& samples, bool prefixed) {
  std::vector<token> out;
  for (std::uint32_t d = 0; d < samples.size(); ++d) {
    int span = 0;
    std::vector<token> text, spans;
    std::vector<token> seq;
    for (const auto& seg : samples[d].segments) {
      if (seg.llm_tokens == 0) continue;
      const bool is_text = seg.modality == 0;
      for (std::uint32_t j = 0; j < seg.llm_tokens; ++j) {
        const token t{d, is_text, is_text ? -1 : span, seg.modality};
        (is_text ? text : spans).push_back(t);
        seq.push_back(t);
      }
      if (!is_text) ++span;
    }
    if (prefixed) {
      out.insert(out.end(), spans.begin(), spans.end());
      out.insert(out.end(), text.begin(), text.end());
    } else {
      out.insert(out.end(), seq.begin(), seq.end());
    }
  }
  return out;
}

/// Dense reference mask: a text token attends every earlier token of its document and
/// itself; a span token attends its own span (per_span) or every token of its modality's
/// spans in its document (per modality).
inline std::vector<std::uint8_t> reference_dense(const std::vector<token>& t, bool per_span) {
  const std::size_t n = t.size();
  std::vector<std::uint8_t> m(n * n, 0);
  for (std::size_t q = 0; q < n; ++q)
    for (std::size_t k = 0; k < n; ++k) {
      if (t[q].doc != t[k].doc) continue;
      bool a;
      if (t[q].text)
        a = k <= q;
      else if (per_span)
        a = !t[k].text && t[k].span == t[q].span;
      else
        a = !t[k].text && t[k].modality == t[q].modality;
      m[q * n + k] = a ? 1 : 0;
    }
  return m;
}

/// the contract's `token_workloads` formula (docs/DESIGN.md §6): text at document position p attends p + 1 keys; a
/// span token attends its span's length (span bits) or its modality's total in the document.
inline std::vector<std::uint32_t> formula_workloads(const std::vector<mmbal::sample>& samples, bool per_span) {
  std::vector<std::uint32_t> out;
  for (const auto& s : samples) {
    std::vector<std::uint64_t> per_mod(256, 0);
    for (const auto& seg : s.segments)
      if (seg.modality != 0) per_mod[seg.modality] += seg.llm_tokens;
    std::uint32_t pos = 0;
    for (const auto& seg : s.segments) {
      for (std::uint32_t j = 0; j < seg.llm_tokens; ++j)
        out.push_back(seg.modality == 0
                          ? pos + j + 1
                          : static_cast<std::uint32_t>(per_span ? seg.llm_tokens : per_mod[seg.modality]));
      pos += seg.llm_tokens;
    }
  }
  return out;
}

}  // namespace mask_test
