#pragma once
/// @file
/// The real length data behind the workload generators (docs/WORKLOADS.md, `data/` of the
/// repository, sources and licences in `data/README.md`): LibriSpeech utterance durations,
/// per-sample InternVL-Chat-1.2 statistics from OmniBal, COCO image sizes and the
/// MagiAttention document-length histogram. Loaded once from CSV files; every parse error
/// names the file and the line.

#include <mmbal/core/error.hpp>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace mmbal {

/// One row of OmniBal's InternVL statistics: ViT tiles (incl. thumbnail) and LLM tokens
/// (256 per tile plus text).
struct omnibal_row {
  std::uint32_t vit_num = 0;
  std::uint32_t token_num = 0;
};

/// An image size (pixels).
struct image_size {
  std::uint32_t width = 0;
  std::uint32_t height = 0;
};

/// One bin of the MagiAttention document-length histogram: lengths in [lo, hi], `count` docs.
struct doc_length_bin {
  std::uint32_t lo = 0;
  std::uint32_t hi = 0;
  std::uint64_t count = 0;
};

/// The real length files, parsed. Cumulative weight tables are precomputed for
/// `choose_cumulative` (O(log n) per draw).
struct length_data {
  std::vector<double> librispeech_train;          ///< seconds, train-clean-100 (28,539 utterances)
  std::vector<double> librispeech_test;           ///< seconds, dev-clean (2,703 utterances)
  std::vector<std::string> omnibal_names;         ///< "ai2d_train_12k", "chartqa_train_18k"
  std::vector<std::vector<omnibal_row>> omnibal;  ///< rows per subset, file order
  std::vector<double> omnibal_cumulative;         ///< subset chosen ∝ its row count
  std::vector<image_size> coco_sizes;             ///< COCO val 5k, distinct sizes
  std::vector<double> coco_cumulative;            ///< cumulative image counts
  std::vector<doc_length_bin> magi_bins;          ///< lo clipped to ≥ 1
  std::vector<double> magi_cumulative;            ///< cumulative document counts
};

namespace detail {

/// Splits one CSV line into fields; double quotes group commas ("[0, 10]").
inline std::vector<std::string> split_csv(std::string_view line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (char c : line) {
    if (c == '"')
      quoted = !quoted;
    else if (c == ',' && !quoted)
      out.emplace_back();
    else if (c != '\r')
      out.back() += c;
  }
  return out;
}

/// Parses a non-negative decimal integer field (surrounding spaces allowed).
inline std::uint64_t csv_unsigned(std::string_view s, const std::string& file, std::uint64_t line,
                                  std::string_view column) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  if (s.empty()) throw_invalid(file, ", line ", line, ", column '", column, "': empty value");
  std::uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9')
      throw_invalid(file, ", line ", line, ", column '", column, "': '", s, "' is not a non-negative integer");
    const auto d = static_cast<std::uint64_t>(c - '0');
    if (v > (std::numeric_limits<std::uint64_t>::max() - d) / 10)
      throw_invalid(file, ", line ", line, ", column '", column, "': '", s, "' is too large");
    v = v * 10 + d;
  }
  return v;
}

inline std::uint32_t csv_u32(std::string_view s, const std::string& file, std::uint64_t line, std::string_view column) {
  const std::uint64_t v = csv_unsigned(s, file, line, column);
  if (v > std::numeric_limits<std::uint32_t>::max())
    throw_invalid(file, ", line ", line, ", column '", column, "': ", v, " exceeds 2^32 - 1");
  return static_cast<std::uint32_t>(v);
}

/// Reads a CSV file with a header line; calls `row(fields, line_number)` for each non-blank
/// data line after checking it has at least `min_fields` fields.
template <class F>
void read_csv(const std::string& file, std::size_t min_fields, F&& row) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw_invalid(file, ": cannot open length data file");
  std::string text;
  std::uint64_t line = 0;
  std::size_t rows = 0;
  while (std::getline(in, text)) {
    ++line;
    if (line == 1) continue;  // header
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    const auto fields = split_csv(text);
    if (fields.size() < min_fields)
      throw_invalid(file, ", line ", line, ": expected ", min_fields, " fields, got ", fields.size(), " in '", text,
                    "'");
    row(fields, line);
    ++rows;
  }
  if (rows == 0) throw_invalid(file, ": no data rows");
}

inline std::vector<double> cumulative_of(const std::vector<double>& w) {
  std::vector<double> c;
  c.reserve(w.size());
  double acc = 0;
  for (double x : w) c.push_back(acc += x);
  return c;
}

inline std::vector<double> load_librispeech(const std::string& file) {
  std::vector<double> out;
  read_csv(file, 2, [&](const std::vector<std::string>& f, std::uint64_t line) {
    const std::uint64_t n = csv_unsigned(f[1], file, line, "num_samples_16khz");
    if (n == 0) throw_invalid(file, ", line ", line, ", column 'num_samples_16khz': zero-length utterance");
    // Exactly the reference's arithmetic (samples / 16000.0), so audio token counts agree.
    out.push_back(static_cast<double>(n) / 16000.0);
  });
  return out;
}

}  // namespace detail

/// Finds the data directory: `explicit_dir` if non-empty, else the environment variable
/// `MMBAL_DATA_DIR`, else the compile-time definition `MMBAL_DATA_DIR` (set by the project's
/// CMake for its own targets) if defined. The chosen directory must contain
/// `magiattention_doc_length_distribution.csv`; an unusable environment value falls through
/// to the compile-time one. Throws `invalid_input` naming every place tried when none is
/// usable. Define `MMBAL_DATA_DIR` identically (or not at all) in every translation unit of
/// a program, since this inline function reads it.
[[nodiscard]] inline std::string find_data_dir(std::string_view explicit_dir = {}) {
  const auto usable = [](const std::string& d) {
    std::error_code ec;
    return std::filesystem::is_regular_file(std::filesystem::path(d) / "magiattention_doc_length_distribution.csv", ec);
  };
  std::string tried;
  if (!explicit_dir.empty()) {
    const std::string d(explicit_dir);
    if (usable(d)) return d;
    detail::throw_invalid("data directory '", d,
                          "' (given explicitly) does not hold the length files "
                          "(magiattention_doc_length_distribution.csv missing)");
  }
  if (const char* env = std::getenv("MMBAL_DATA_DIR"); env && *env) {
    if (usable(env)) return env;
    tried += detail::concat("environment MMBAL_DATA_DIR='", env, "' (no length files there); ");
  } else {
    tried += "environment MMBAL_DATA_DIR (not set); ";
  }
#ifdef MMBAL_DATA_DIR
  if (usable(MMBAL_DATA_DIR)) return MMBAL_DATA_DIR;
  tried += detail::concat("compile-time MMBAL_DATA_DIR='", MMBAL_DATA_DIR, "' (no length files there)");
#else
  tried += "compile-time MMBAL_DATA_DIR (not defined)";
#endif
  detail::throw_invalid("cannot find the mmbal length data directory; tried: ", tried,
                        ". Pass --data-dir DIR or set MMBAL_DATA_DIR to the repository's data/ folder (installed: "
                        "<prefix>/share/mmbal/data, find_package(mmbal) sets mmbal_DATA_DIR)");
}

/// Loads every length file from `dir` (layout of the repository's `data/`). O(rows).
/// Throws `invalid_input` naming the file and line of any malformed row, or a missing file.
[[nodiscard]] inline length_data load_length_data(const std::string& dir) {
  namespace fs = std::filesystem;
  const auto path = [&](const char* rel) { return (fs::path(dir) / rel).string(); };
  length_data d;
  d.librispeech_train = detail::load_librispeech(path("librispeech_durations/train-clean-100.csv"));
  d.librispeech_test = detail::load_librispeech(path("librispeech_durations/dev-clean.csv"));

  std::vector<double> subset_rows;
  for (const char* name : {"ai2d_train_12k", "chartqa_train_18k"}) {
    const std::string file = path((std::string("internvl_omnibal_lengths/") + name + ".csv").c_str());
    std::vector<omnibal_row> rows;
    detail::read_csv(file, 2, [&](const std::vector<std::string>& f, std::uint64_t line) {
      omnibal_row r{detail::csv_u32(f[0], file, line, "vit_num"), detail::csv_u32(f[1], file, line, "token_num")};
      if (r.vit_num == 0) detail::throw_invalid(file, ", line ", line, ", column 'vit_num': 0 tiles");
      if (std::uint64_t{r.vit_num} * 256 > r.token_num)
        detail::throw_invalid(file, ", line ", line, ", column 'token_num': ", r.token_num, " < 256 x vit_num ",
                              r.vit_num);
      rows.push_back(r);
    });
    d.omnibal_names.emplace_back(name);
    subset_rows.push_back(static_cast<double>(rows.size()));
    d.omnibal.push_back(std::move(rows));
  }
  d.omnibal_cumulative = detail::cumulative_of(subset_rows);

  {
    const std::string file = path("coco_val5k_image_size_hist.csv");
    std::vector<double> w;
    detail::read_csv(file, 3, [&](const std::vector<std::string>& f, std::uint64_t line) {
      image_size s{detail::csv_u32(f[0], file, line, "width"), detail::csv_u32(f[1], file, line, "height")};
      if (s.width == 0 || s.height == 0)
        detail::throw_invalid(file, ", line ", line, ": zero image dimension ", s.width, "x", s.height);
      d.coco_sizes.push_back(s);
      w.push_back(static_cast<double>(detail::csv_unsigned(f[2], file, line, "count")));
    });
    d.coco_cumulative = detail::cumulative_of(w);
  }
  {
    const std::string file = path("magiattention_doc_length_distribution.csv");
    std::vector<double> w;
    detail::read_csv(file, 2, [&](const std::vector<std::string>& f, std::uint64_t line) {
      std::string_view r = f[0];
      if (r.size() < 2 || r.front() != '[' || r.back() != ']')
        detail::throw_invalid(file, ", line ", line, ", column 'range': '", r, "' is not of the form [lo, hi]");
      r = r.substr(1, r.size() - 2);
      const auto comma = r.find(',');
      if (comma == std::string_view::npos)
        detail::throw_invalid(file, ", line ", line, ", column 'range': '", f[0], "' is not of the form [lo, hi]");
      doc_length_bin b{detail::csv_u32(r.substr(0, comma), file, line, "range"),
                       detail::csv_u32(r.substr(comma + 1), file, line, "range"),
                       detail::csv_unsigned(f[1], file, line, "number")};
      b.lo = b.lo < 1 ? 1 : b.lo;  // a document has at least one token (as the reference clips)
      if (b.hi < b.lo) detail::throw_invalid(file, ", line ", line, ", column 'range': empty range ", f[0]);
      d.magi_bins.push_back(b);
      w.push_back(static_cast<double>(b.count));
    });
    d.magi_cumulative = detail::cumulative_of(w);
  }
  for (const auto* c : {&d.omnibal_cumulative, &d.coco_cumulative, &d.magi_cumulative})
    if (!(c->back() > 0)) detail::throw_invalid(dir, ": a length histogram has zero total weight");
  return d;
}

/// The length data of `find_data_dir()`, loaded on first use and shared afterwards
/// (thread-safe initialization). Convenient for tests and benchmarks.
[[nodiscard]] inline const length_data& default_length_data() {
  static const length_data data = load_length_data(find_data_dir());
  return data;
}

}  // namespace mmbal
