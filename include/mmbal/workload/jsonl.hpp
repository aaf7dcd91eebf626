#pragma once
/// @file
/// The JSON Lines workload format of docs/DESIGN.md §6: one sample per line,
///
///     {"id": 17, "rank": 3, "group": 5, "segments": [["text", 120], ["image", 1196, 4784]]}
///
/// `segments` entries are `[modality, llm_tokens]` or `[modality, llm_tokens, encoder_len]`.
/// Reading validates everything and reports the first problem as `mmbal::invalid_input` whose
/// message names the file, the 1-based line and the field, e.g.
/// `data.jsonl, line 2, field 'segments[0][1]': length -5 is negative`.

#include <mmbal/core/error.hpp>
#include <mmbal/core/types.hpp>
#include <mmbal/workload/sample.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <fstream>
#include <istream>
#include <limits>
#include <map>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace mmbal {

namespace detail {

/// Location of the line being read, for error messages.
struct jsonl_where {
  std::string_view source;
  std::uint64_t line = 0;
};

/// The field an error message names: a plain name ("id", "rank"), or an element of an array
/// field (`segments[k]`, `segments[k][e]`), formatted only when an error is thrown, so that
/// valid input formats nothing per element (a formatted name per segment was two thirds of the time
/// spent reading a large workload: bench/RESULTS.md "Session 21 — backing the heap while the
/// input is read").
struct jsonl_field {
  static constexpr std::size_t none = std::numeric_limits<std::size_t>::max();
  std::string_view name;
  std::size_t index = none;  // `name[index]` when set
  std::size_t sub = none;    // `name[index][sub]` when also set

  // Implicit: every plain name a caller passes (a literal, a view, a string) is a field.
  jsonl_field(const char* n) : name(n) {}
  jsonl_field(std::string_view n) : name(n) {}
  jsonl_field(const std::string& n) : name(n) {}
  /// `array[k]`, or `array[k][e]`.
  static jsonl_field element(std::string_view array, std::size_t k, std::size_t e = none) {
    jsonl_field f(array);
    f.index = k;
    f.sub = e;
    return f;
  }
  [[nodiscard]] bool empty() const { return name.empty() && index == none; }
  [[nodiscard]] std::string str() const {
    if (index == none) return std::string(name);
    return sub == none ? concat(name, "[", index, "]") : concat(name, "[", index, "][", sub, "]");
  }
};

template <class... Args>
[[noreturn]] void throw_jsonl(const jsonl_where& at, const jsonl_field& field, Args&&... args) {
  if (field.empty()) throw_invalid(at.source, ", line ", at.line, ": ", std::forward<Args>(args)...);
  throw_invalid(at.source, ", line ", at.line, ", field '", field.str(), "': ", std::forward<Args>(args)...);
}

/// A non-negative integer no larger than `max`; `what` names the quantity in messages
/// ("length", "id", ...). Floats (even 5.0), strings, booleans and null are rejected.
inline std::uint64_t jsonl_unsigned(const nlohmann::json& v, const jsonl_where& at, const jsonl_field& field,
                                    std::string_view what, std::uint64_t max) {
  if (v.is_number_unsigned()) {
    const auto x = v.get<std::uint64_t>();
    if (x > max) throw_jsonl(at, field, what, " ", x, " exceeds ", max);
    return x;
  }
  if (v.is_number_integer()) throw_jsonl(at, field, what, " ", v.get<std::int64_t>(), " is negative");
  if (v.is_number_float()) {
    const double x = v.get<double>();
    if (x < 0) throw_jsonl(at, field, what, " ", v.dump(), " is negative");
    if (x > static_cast<double>(max)) throw_jsonl(at, field, what, " ", v.dump(), " exceeds ", max);
    throw_jsonl(at, field, what, " ", v.dump(), " is not an integer");
  }
  throw_jsonl(at, field, what, " must be a non-negative integer, got ", v.type_name(), " ", v.dump());
}

inline void jsonl_write_escaped(std::ostream& out, std::string_view s) { out << nlohmann::json(std::string(s)).dump(); }

}  // namespace detail

/// Reads a JSONL workload from `in`; `source_name` names the input in error messages.
///
/// Fields per line (an object; unknown keys are ignored):
/// - `segments` (required): a non-empty array of `[modality, llm_tokens]` or
///   `[modality, llm_tokens, encoder_len]`; modality a non-empty string, lengths integers in
///   [0, 2^32 - 1]; `encoder_len` defaults to `llm_tokens`. A `text` segment may not carry an
///   encoder length different from its LLM length (text has no encoder). The sample's total
///   LLM length must not exceed 2^32 - 1. Modality names are interned into
///   `workload::modalities` in order of first appearance ("text" is always id 0).
/// - `id` (optional, non-negative integer): defaults to the sample's 0-based index among the
///   non-blank lines (what docs/DESIGN.md §6 calls "the line number"; the contract checker uses
///   the same 0-based index). Ids must be unique (the error names both lines).
/// - `rank` (optional, non-negative integer): with `ranks > 0` it must be < `ranks` and
///   defaults to the sample index % `ranks` (round-robin). `ranks == 0` means "no rank count
///   is known": any rank in [0, 2^32 - 1] is accepted and the default is 0.
/// - `group` (optional, non-negative integer).
///
/// Blank (whitespace-only) lines are skipped; line numbers in messages are 1-based physical
/// lines. A trailing `\r` is ignored. A file without any sample is an error.
///
/// Complexity: O(bytes + samples · log samples) (the duplicate-id check).
/// Throws `invalid_input` naming source, line and field (see the file comment).
/// @see docs/DESIGN.md §6.
[[nodiscard]] inline workload read_jsonl(std::istream& in, std::string_view source_name, rank_t ranks) {
  workload w;
  std::map<std::uint64_t, std::uint64_t> line_of_id;  // ordered: no unordered iteration anywhere
  detail::jsonl_where at{source_name, 0};
  std::string text;
  std::uint64_t index = 0;
  while (std::getline(in, text)) {
    ++at.line;
    if (!text.empty() && text.back() == '\r') text.pop_back();
    if (text.find_first_not_of(" \t\r\n\f\v") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
      detail::throw_jsonl(at, "", "malformed JSON (", e.what(), ")");
    } catch (const nlohmann::json::exception& e) {
      // Well-formed but unrepresentable, e.g. a number beyond a double (1e400): the parser
      // throws out_of_range, not parse_error (found by fuzz/fuzz_jsonl).
      detail::throw_jsonl(at, "", "number out of range (", e.what(), ")");
    }
    if (!j.is_object()) detail::throw_jsonl(at, "", "expected a JSON object, got ", j.type_name());

    sample s;
    if (index > std::numeric_limits<std::uint32_t>::max()) detail::throw_jsonl(at, "", "more than 2^32 - 1 samples");

    if (const auto it = j.find("id"); it != j.end())
      s.id = detail::jsonl_unsigned(*it, at, "id", "id", std::numeric_limits<std::uint64_t>::max());
    else
      s.id = index;
    if (const auto [pos, fresh] = line_of_id.emplace(s.id, at.line); !fresh)
      detail::throw_jsonl(at, "id", "duplicate id ", s.id, " (first used on line ", pos->second, ")");

    if (const auto it = j.find("rank"); it != j.end()) {
      const std::uint64_t r = detail::jsonl_unsigned(*it, at, "rank", "rank", std::numeric_limits<rank_t>::max());
      if (ranks != 0 && r >= ranks) detail::throw_jsonl(at, "rank", "rank ", r, " >= rank count ", ranks);
      s.rank = static_cast<rank_t>(r);
    } else {
      s.rank = ranks == 0 ? 0 : static_cast<rank_t>(index % ranks);
    }

    if (const auto it = j.find("group"); it != j.end())
      s.group = detail::jsonl_unsigned(*it, at, "group", "group", std::numeric_limits<std::uint64_t>::max());

    const auto segs = j.find("segments");
    if (segs == j.end()) detail::throw_jsonl(at, "segments", "missing");
    if (!segs->is_array())
      detail::throw_jsonl(at, "segments", "must be an array, got ", segs->type_name(), " ", segs->dump());
    if (segs->empty()) detail::throw_jsonl(at, "segments", "empty (a sample needs at least one segment)");
    s.segments.reserve(segs->size());
    std::uint64_t total = 0;
    for (std::size_t k = 0; k < segs->size(); ++k) {
      const nlohmann::json& e = (*segs)[k];
      const auto field = detail::jsonl_field::element("segments", k);
      if (!e.is_array())
        detail::throw_jsonl(at, field, "must be [modality, llm_tokens] or [modality, llm_tokens, encoder_len], got ",
                            e.dump());
      if (e.size() != 2 && e.size() != 3)
        detail::throw_jsonl(at, field, "has ", e.size(),
                            " elements; expected 2 or 3 ([modality, llm_tokens(, encoder_len)])");
      if (!e[0].is_string() || e[0].get_ref<const std::string&>().empty())
        detail::throw_jsonl(at, detail::jsonl_field::element("segments", k, 0),
                            "modality must be a non-empty string, got ", e[0].dump());
      const auto& name = e[0].get_ref<const std::string&>();
      segment seg;
      seg.llm_tokens = static_cast<length_t>(detail::jsonl_unsigned(
          e[1], at, detail::jsonl_field::element("segments", k, 1), "length", std::numeric_limits<length_t>::max()));
      seg.encoder_len =
          e.size() == 3
              ? static_cast<length_t>(detail::jsonl_unsigned(e[2], at, detail::jsonl_field::element("segments", k, 2),
                                                             "encoder length", std::numeric_limits<length_t>::max()))
              : seg.llm_tokens;
      try {
        seg.modality = w.intern_modality(name);
      } catch (const invalid_input& err) {
        detail::throw_jsonl(at, detail::jsonl_field::element("segments", k, 0), err.what());
      }
      if (seg.modality == text_modality && seg.encoder_len != seg.llm_tokens)
        detail::throw_jsonl(at, detail::jsonl_field::element("segments", k, 2),
                            "a text segment has no encoder, but encoder length ", seg.encoder_len,
                            " differs from its length ", seg.llm_tokens);
      total += seg.llm_tokens;
      if (total > std::numeric_limits<length_t>::max())
        detail::throw_jsonl(at, field, "the sample's LLM length reaches ", total, " > 2^32 - 1");
      s.segments.push_back(seg);
    }
    w.samples.push_back(std::move(s));
    ++index;
  }
  if (in.bad()) detail::throw_invalid(source_name, ": read error after line ", at.line);
  if (w.samples.empty()) detail::throw_invalid(source_name, ": empty workload (no samples in ", at.line, " lines)");
  return w;
}

/// Reads the JSONL workload file at `path` (see `read_jsonl`; "-" is not special).
/// Throws `invalid_input` if the file cannot be opened.
[[nodiscard]] inline workload read_jsonl_file(const std::string& path, rank_t ranks) {
  std::ifstream in(path, std::ios::binary);
  if (!in) detail::throw_invalid(path, ": cannot open workload file");
  return read_jsonl(in, path, ranks);
}

/// Writes `w` as JSONL, one sample per line in order, always with `id`, `rank`, `group`
/// (only when set) and `segments`; a segment is written as `[name, llm_tokens]` when its
/// encoder length equals its LLM length, else as `[name, llm_tokens, encoder_len]`. Spacing
/// follows docs/DESIGN.md §6. `read_jsonl(write_jsonl(w))` reproduces `w` exactly when every id
/// is unique and `w.modalities` lists names in order of first use (as `read_jsonl` and the
/// generators produce them). O(total segments). Throws `invalid_input` for a segment whose
/// modality id has no name.
inline void write_jsonl(std::ostream& out, const workload& w) {
  std::vector<std::string> names;
  names.reserve(w.modalities.size());
  for (const std::string& m : w.modalities) names.push_back(nlohmann::json(m).dump());
  std::string line;
  for (const sample& s : w.samples) {
    line.clear();
    line += "{\"id\": ";
    line += std::to_string(s.id);
    line += ", \"rank\": ";
    line += std::to_string(s.rank);
    if (s.group) {
      line += ", \"group\": ";
      line += std::to_string(*s.group);
    }
    line += ", \"segments\": [";
    for (std::size_t k = 0; k < s.segments.size(); ++k) {
      const segment& g = s.segments[k];
      if (g.modality >= names.size())
        detail::throw_invalid("write_jsonl: sample ", s.id, " segment ", k, " has modality id ", int{g.modality},
                              " but the workload names only ", names.size(), " modalities");
      if (k) line += ", ";
      line += '[';
      line += names[g.modality];
      line += ", ";
      line += std::to_string(g.llm_tokens);
      if (g.encoder_len != g.llm_tokens) {
        line += ", ";
        line += std::to_string(g.encoder_len);
      }
      line += ']';
    }
    line += "]}\n";
    out << line;
  }
}

}  // namespace mmbal
