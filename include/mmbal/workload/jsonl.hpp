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
#include <mmbal/core/rng.hpp>
#include <mmbal/core/types.hpp>
#include <mmbal/workload/sample.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <istream>
#include <limits>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace mmbal {

namespace detail {

/// `nlohmann::json::parse(text)`, stricter: an object that repeats a key (nlohmann keeps the
/// last, so `{"segments": A, "segments": B}` was read as B without a word) is refused, and
/// every parse failure becomes `invalid_input`: "malformed JSON (...)", "number out of range
/// (...)" for a well-formed number beyond a double (1e400), or "duplicate key 'k'". The
/// callers add where (file, line). O(size · log keys per object).
[[nodiscard]] inline nlohmann::json parse_json_strict(std::string_view text) {
  std::vector<std::set<std::string, std::less<>>> keys;  // per open object
  const auto on_event = [&keys](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using parse_event = nlohmann::json::parse_event_t;
    if (event == parse_event::object_start) {
      keys.emplace_back();
    } else if (event == parse_event::object_end) {
      keys.pop_back();
    } else if (event == parse_event::key && !keys.back().insert(parsed.get<std::string>()).second) {
      throw_invalid("duplicate key '", parsed.get<std::string>(), "'");
    }
    return true;
  };
  try {
    return nlohmann::json::parse(text, on_event);
  } catch (const nlohmann::json::parse_error& e) {
    throw_invalid("malformed JSON (", e.what(), ")");
  } catch (const nlohmann::json::exception& e) {
    // Well-formed but unrepresentable, e.g. a number beyond a double (1e400): the parser
    // throws out_of_range, not parse_error (found by fuzz/fuzz_jsonl).
    throw_invalid("number out of range (", e.what(), ")");
  }
}

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

/// One sample line's fields as read, before they are checked against the rest of the workload
/// (unique ids, the rank count, modality names, the sample's total length). `modality` views
/// the line's text or its parsed document.
struct jsonl_fields {
  struct segment_fields {
    std::string_view modality;
    length_t llm_tokens = 0;
    std::optional<length_t> encoder_len;
    friend bool operator==(const segment_fields&, const segment_fields&) = default;
  };
  std::optional<std::uint64_t> id, group;
  std::optional<rank_t> rank;
  std::vector<segment_fields> segments;

  void clear() {
    id.reset();
    group.reset();
    rank.reset();
    segments.clear();
  }
  friend bool operator==(const jsonl_fields&, const jsonl_fields&) = default;
};

/// The first line of every sample id read so far. Ids above every earlier one (the common
/// case: files written in id order) are appended to a sorted array and need no search; any
/// other id is looked up there by binary search and then in an open-addressing table (linear
/// probing, at most half full, doubled when it would be more). Why not a `std::map`: its node
/// per sample left ≈ 150 K small blocks behind a 150 K-sample file, and the next large
/// allocation — the one-shot plan's first — paid 2–5 ms for glibc to coalesce them
/// (bench/RESULTS.md "Session 41 — the reader's garbage in the plan's time"); a table alone
/// read ordered ids 8 % slower than the map. Only looked up, never iterated, so its order
/// cannot reach a result. O(1) per id in order, O(log n) expected otherwise.
class id_lines {
 public:
  /// The line that first used `id`, or 0 after recording `line` (≥ 1) as its first.
  std::uint64_t first_or_record(std::uint64_t id, std::uint64_t line) {
    if (ascending_.empty() || id > ascending_.back().id) {
      ascending_.push_back({id, line});
      return 0;
    }
    const auto it = std::lower_bound(ascending_.begin(), ascending_.end(), id,
                                     [](const entry& e, std::uint64_t v) { return e.id < v; });
    if (it != ascending_.end() && it->id == id) return it->line;
    if (2 * (others_used_ + 1) > others_.size()) grow_others();
    for (std::size_t k = home(id);; k = (k + 1) & (others_.size() - 1)) {
      if (others_[k].line == 0) {
        others_[k] = {id, line};
        ++others_used_;
        return 0;
      }
      if (others_[k].id == id) return others_[k].line;
    }
  }

 private:
  struct entry {
    std::uint64_t id = 0;
    std::uint64_t line = 0;  ///< in `others_`, 0 marks an empty slot (lines are 1-based)
  };

  [[nodiscard]] std::size_t home(std::uint64_t id) const noexcept {
    return static_cast<std::size_t>(splitmix64(id)) & (others_.size() - 1);
  }

  void grow_others() {
    std::vector<entry> old(std::max<std::size_t>(1024, 2 * others_.size()));
    old.swap(others_);
    for (const entry& e : old)
      if (e.line != 0) {
        std::size_t k = home(e.id);
        while (others_[k].line != 0) k = (k + 1) & (others_.size() - 1);
        others_[k] = e;
      }
  }

  std::vector<entry> ascending_;  ///< ids in ascending order, each above all before it
  std::vector<entry> others_;     ///< the other ids; a power of two in size
  std::size_t others_used_ = 0;
};

/// The fast path of `read_jsonl`: reads a line in the shape `write_jsonl` writes and most
/// producers use without building a JSON document — one object whose keys are `id`, `rank`,
/// `group` (integers) and `segments` (arrays `[name, n]` or `[name, n, m]`), each at most once,
/// in any order, with JSON whitespace; integers without sign, fraction or exponent and within
/// the field's range; names non-empty printable ASCII without escapes. Returns false for
/// anything else — other keys, escapes, other number forms, out-of-range values, empty names
/// or segment lists, malformed text — and `read_jsonl` then reads the line with nlohmann-json,
/// which also words every error. When it returns true, `out` holds what that reader extracts
/// (`jsonl_fields_of`; compared on mutated lines by tests/workload/jsonl_test.cpp and by
/// fuzz/fuzz_jsonl). O(line length).
inline bool jsonl_fields_fast(std::string_view line, jsonl_fields& out) {
  out.clear();
  std::size_t at = 0;
  const std::size_t end = line.size();
  auto skip_space = [&] {
    while (at < end && (line[at] == ' ' || line[at] == '\t' || line[at] == '\n' || line[at] == '\r')) ++at;
  };
  auto take = [&](char c) {
    skip_space();
    if (at >= end || line[at] != c) return false;
    ++at;
    return true;
  };
  // A string of printable ASCII without escapes (nlohmann-json also validates UTF-8 and
  // decodes escapes: those lines take the slow path).
  auto string = [&](std::string_view& value) {
    if (!take('"')) return false;
    const std::size_t begin = at;
    while (at < end && line[at] != '"') {
      const auto c = static_cast<unsigned char>(line[at]);
      if (c < 0x20 || c >= 0x7f || c == '\\') return false;
      ++at;
    }
    if (at >= end) return false;
    value = line.substr(begin, at - begin);
    ++at;
    return true;
  };
  // A JSON integer without sign, fraction or exponent, at most `max`.
  auto integer = [&](std::uint64_t max, std::uint64_t& value) {
    skip_space();
    const std::size_t begin = at;
    value = 0;
    while (at < end && line[at] >= '0' && line[at] <= '9') {
      const auto digit = static_cast<std::uint64_t>(line[at] - '0');
      if (value > (max - digit) / 10) return false;
      value = value * 10 + digit;
      ++at;
    }
    if (at == begin || (line[begin] == '0' && at - begin > 1)) return false;  // none, or a leading zero
    return at >= end || (line[at] != '.' && line[at] != 'e' && line[at] != 'E');
  };
  auto segments = [&] {
    if (!take('[')) return false;
    do {
      jsonl_fields::segment_fields seg;
      std::uint64_t value = 0;
      if (!take('[') || !string(seg.modality) || seg.modality.empty() || !take(',') ||
          !integer(std::numeric_limits<length_t>::max(), value))
        return false;
      seg.llm_tokens = static_cast<length_t>(value);
      if (take(',')) {
        if (!integer(std::numeric_limits<length_t>::max(), value)) return false;
        seg.encoder_len = static_cast<length_t>(value);
      }
      if (!take(']')) return false;
      out.segments.push_back(seg);
    } while (take(','));
    return take(']');
  };
  bool have_segments = false;
  if (!take('{')) return false;
  do {
    std::string_view key;
    std::uint64_t value = 0;
    if (!string(key) || !take(':')) return false;
    if (key == "segments") {
      if (have_segments || !segments()) return false;
      have_segments = true;
    } else if (key == "id" || key == "group") {
      std::optional<std::uint64_t>& field = key == "id" ? out.id : out.group;
      if (field || !integer(std::numeric_limits<std::uint64_t>::max(), value)) return false;
      field = value;
    } else if (key == "rank") {
      if (out.rank || !integer(std::numeric_limits<rank_t>::max(), value)) return false;
      out.rank = static_cast<rank_t>(value);
    } else {
      return false;
    }
  } while (take(','));
  if (!take('}')) return false;
  skip_space();
  return at == end && have_segments;
}

/// The fields of one line parsed by nlohmann-json into `doc` (kept by the caller: `modality`
/// views its strings). Unknown keys are ignored. Throws `invalid_input` naming the line and the
/// field for malformed JSON and for every field of the wrong type or range.
inline void jsonl_fields_of(const std::string& line, const jsonl_where& at, nlohmann::json& doc, jsonl_fields& out) {
  out.clear();
  try {
    doc = parse_json_strict(line);
  } catch (const invalid_input& e) {
    throw_jsonl(at, "", e.what());
  }
  if (!doc.is_object()) throw_jsonl(at, "", "expected a JSON object, got ", doc.type_name());
  if (const auto it = doc.find("id"); it != doc.end())
    out.id = jsonl_unsigned(*it, at, "id", "id", std::numeric_limits<std::uint64_t>::max());
  if (const auto it = doc.find("rank"); it != doc.end())
    out.rank = static_cast<rank_t>(jsonl_unsigned(*it, at, "rank", "rank", std::numeric_limits<rank_t>::max()));
  if (const auto it = doc.find("group"); it != doc.end())
    out.group = jsonl_unsigned(*it, at, "group", "group", std::numeric_limits<std::uint64_t>::max());
  const auto segs = doc.find("segments");
  if (segs == doc.end()) throw_jsonl(at, "segments", "missing");
  if (!segs->is_array()) throw_jsonl(at, "segments", "must be an array, got ", segs->type_name(), " ", segs->dump());
  if (segs->empty()) throw_jsonl(at, "segments", "empty (a sample needs at least one segment)");
  for (std::size_t k = 0; k < segs->size(); ++k) {
    const nlohmann::json& e = (*segs)[k];
    const auto field = jsonl_field::element("segments", k);
    if (!e.is_array())
      throw_jsonl(at, field, "must be [modality, llm_tokens] or [modality, llm_tokens, encoder_len], got ", e.dump());
    if (e.size() != 2 && e.size() != 3)
      throw_jsonl(at, field, "has ", e.size(), " elements; expected 2 or 3 ([modality, llm_tokens(, encoder_len)])");
    if (!e[0].is_string() || e[0].get_ref<const std::string&>().empty())
      throw_jsonl(at, jsonl_field::element("segments", k, 0), "modality must be a non-empty string, got ", e[0].dump());
    jsonl_fields::segment_fields seg;
    seg.modality = e[0].get_ref<const std::string&>();
    seg.llm_tokens = static_cast<length_t>(jsonl_unsigned(e[1], at, jsonl_field::element("segments", k, 1), "length",
                                                          std::numeric_limits<length_t>::max()));
    if (e.size() == 3)
      seg.encoder_len = static_cast<length_t>(jsonl_unsigned(e[2], at, jsonl_field::element("segments", k, 2),
                                                             "encoder length", std::numeric_limits<length_t>::max()));
    out.segments.push_back(seg);
  }
}

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
/// Lines in the writer's shape are read straight from the text (`detail::jsonl_fields_fast`),
/// every other line with nlohmann-json (`detail::jsonl_fields_of`); both give the same result.
///
/// Complexity: O(bytes + samples) for ids in ascending order, O(bytes + samples · log samples)
/// expected otherwise (the duplicate-id check, `detail::id_lines`).
/// Throws `invalid_input` naming source, line and field (see the file comment).
/// @see docs/DESIGN.md §6.
[[nodiscard]] inline workload read_jsonl(std::istream& in, std::string_view source_name, rank_t ranks) {
  workload w;
  detail::id_lines line_of_id;
  detail::jsonl_where at{source_name, 0};
  std::string text;
  nlohmann::json doc;           // the slow path's parsed line
  detail::jsonl_fields fields;  // reused: no allocation per line
  std::uint64_t index = 0;
  while (std::getline(in, text)) {
    ++at.line;
    if (!text.empty() && text.back() == '\r') text.pop_back();
    if (text.find_first_not_of(" \t\r\n\f\v") == std::string::npos) continue;
    // Most lines take the fast path; anything else (and every error) goes through nlohmann-json.
    if (!detail::jsonl_fields_fast(text, fields)) detail::jsonl_fields_of(text, at, doc, fields);

    sample s;
    if (index > std::numeric_limits<std::uint32_t>::max()) detail::throw_jsonl(at, "", "more than 2^32 - 1 samples");
    s.id = fields.id.value_or(index);
    if (const std::uint64_t first = line_of_id.first_or_record(s.id, at.line); first != 0)
      detail::throw_jsonl(at, "id", "duplicate id ", s.id, " (first used on line ", first, ")");
    if (fields.rank) {
      if (ranks != 0 && *fields.rank >= ranks)
        detail::throw_jsonl(at, "rank", "rank ", *fields.rank, " >= rank count ", ranks);
      s.rank = *fields.rank;
    } else {
      s.rank = ranks == 0 ? 0 : static_cast<rank_t>(index % ranks);
    }
    s.group = fields.group;
    s.segments.reserve(fields.segments.size());
    std::uint64_t total = 0;
    for (std::size_t k = 0; k < fields.segments.size(); ++k) {
      const detail::jsonl_fields::segment_fields& f = fields.segments[k];
      segment seg;
      seg.llm_tokens = f.llm_tokens;
      seg.encoder_len = f.encoder_len.value_or(f.llm_tokens);
      try {
        seg.modality = w.intern_modality(f.modality);
      } catch (const invalid_input& err) {
        detail::throw_jsonl(at, detail::jsonl_field::element("segments", k, 0), err.what());
      }
      if (seg.modality == text_modality && seg.encoder_len != seg.llm_tokens)
        detail::throw_jsonl(at, detail::jsonl_field::element("segments", k, 2),
                            "a text segment has no encoder, but encoder length ", seg.encoder_len,
                            " differs from its length ", seg.llm_tokens);
      total += seg.llm_tokens;
      if (total > std::numeric_limits<length_t>::max())
        detail::throw_jsonl(at, detail::jsonl_field::element("segments", k), "the sample's LLM length reaches ", total,
                            " > 2^32 - 1");
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
