// JSONL workload format (docs/DESIGN.md §6): exact output format, round trips, defaults, and every
// error case with file, line and field in the message.
#include <mmbal/core/rng.hpp>
#include <mmbal/workload/jsonl.hpp>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

mmbal::workload read(const std::string& text, mmbal::rank_t ranks = 4) {
  std::istringstream in(text);
  return mmbal::read_jsonl(in, "data.jsonl", ranks);
}

std::string write(const mmbal::workload& w) {
  std::ostringstream out;
  mmbal::write_jsonl(out, w);
  return out.str();
}

// The message of the invalid_input thrown by reading `text` (fails the test if none).
std::string error_of(const std::string& text, mmbal::rank_t ranks = 4) {
  try {
    (void)read(text, ranks);
  } catch (const mmbal::invalid_input& e) {
    return e.what();
  }
  FAIL("no invalid_input for input: " << text);
  return {};
}

// A random workload whose modality table lists names in order of first use (as the reader
// builds it), with optional groups and encoder lengths.
mmbal::workload random_workload(std::uint64_t seed, mmbal::rank_t ranks) {
  auto g = mmbal::make_rng(seed);
  const std::vector<std::string> names{"image", "audio", "video", "odd \"name\"\\x", "ünï"};
  mmbal::workload w;
  const auto n = 1 + mmbal::uniform_below(g, 60);
  for (std::uint64_t i = 0; i < n; ++i) {
    mmbal::sample s;
    s.id = i * 7 + mmbal::uniform_below(g, 7);  // unique, not the index
    s.rank = static_cast<mmbal::rank_t>(mmbal::uniform_below(g, ranks));
    if (mmbal::uniform01(g) < 0.3) s.group = mmbal::uniform_below(g, 1000);
    const auto k = 1 + mmbal::uniform_below(g, 6);
    for (std::uint64_t j = 0; j < k; ++j) {
      mmbal::segment seg;
      seg.llm_tokens = static_cast<mmbal::length_t>(mmbal::uniform_below(g, 5000));
      if (mmbal::uniform01(g) < 0.5) {
        seg.encoder_len = seg.llm_tokens;
      } else {
        seg.modality = w.intern_modality(names[mmbal::uniform_below(g, names.size())]);
        seg.encoder_len = mmbal::uniform01(g) < 0.5 ? seg.llm_tokens
                                                    : static_cast<mmbal::length_t>(mmbal::uniform_below(g, 1u << 31));
      }
      s.segments.push_back(seg);
    }
    w.samples.push_back(s);
  }
  return w;
}

}  // namespace

TEST_CASE("jsonl: the writer emits the docs/DESIGN.md §6 example line exactly", "[workload][jsonl]") {
  const std::string line =
      R"({"id": 17, "rank": 3, "group": 5, "segments": [["text", 120], ["image", 1196, 4784], ["text", 300], ["audio", 750, 1500]]})";
  const mmbal::workload w = read(line + "\n", 4);
  REQUIRE(w.samples.size() == 1);
  const mmbal::sample& s = w.samples[0];
  CHECK(s.id == 17);
  CHECK(s.rank == 3);
  REQUIRE(s.group.has_value());
  CHECK(*s.group == 5);
  REQUIRE(w.modalities == std::vector<std::string>{"text", "image", "audio"});
  REQUIRE(s.segments.size() == 4);
  CHECK(s.segments[0] == mmbal::segment{0, 120, 120});
  CHECK(s.segments[1] == mmbal::segment{1, 1196, 4784});
  CHECK(s.segments[2] == mmbal::segment{0, 300, 300});
  CHECK(s.segments[3] == mmbal::segment{2, 750, 1500});
  CHECK(s.llm_length() == 120 + 1196 + 300 + 750);
  CHECK(write(w) == line + "\n");
}

TEST_CASE("jsonl: write then read reproduces random workloads", "[workload][jsonl]") {
  for (std::uint64_t seed = 0; seed < 60; ++seed) {
    const mmbal::rank_t ranks = 1 + static_cast<mmbal::rank_t>(seed % 9);
    const mmbal::workload w = random_workload(seed, ranks);
    const std::string text = write(w);
    const mmbal::workload back = read(text, ranks);
    REQUIRE(back == w);
    CHECK(read(text, 0) == w);  // no rank count: ranks are taken as written
    CHECK(write(back) == text);
  }
}

TEST_CASE("jsonl: defaults for id, rank, group and encoder length", "[workload][jsonl]") {
  // Blank lines do not count as samples: the default id is the 0-based sample index.
  const std::string text =
      "{\"segments\": [[\"text\", 5]]}\n"
      "\n"
      "   \t\n"
      "{\"segments\": [[\"image\", 7]]}\r\n"
      "{\"segments\": [[\"text\", 9], [\"image\", 1, 2]]}\n"
      "{\"id\": 100, \"segments\": [[\"audio\", 3]]}\n"
      "{\"segments\": [[\"text\", 1]]}";  // no final newline
  const mmbal::workload w = read(text, 3);
  REQUIRE(w.samples.size() == 5);
  const std::vector<std::uint64_t> ids{0, 1, 2, 100, 4};
  for (std::size_t i = 0; i < 5; ++i) {
    CHECK(w.samples[i].id == ids[i]);
    CHECK(w.samples[i].rank == i % 3);  // round-robin by sample index
    CHECK_FALSE(w.samples[i].group.has_value());
  }
  CHECK(w.samples[1].segments[0] == mmbal::segment{1, 7, 7});  // encoder_len defaults to llm_tokens
  CHECK(w.samples[2].segments[1] == mmbal::segment{1, 1, 2});
  CHECK(w.modalities == std::vector<std::string>{"text", "image", "audio"});

  // ranks == 0: no rank count known; absent ranks are 0 and any rank is accepted.
  const mmbal::workload z =
      read("{\"segments\": [[\"text\", 5]]}\n{\"rank\": 4000000000, \"segments\": [[\"text\", 5]]}\n", 0);
  CHECK(z.samples[0].rank == 0);
  CHECK(z.samples[1].rank == 4000000000u);
  // Zero lengths are allowed (not negative).
  CHECK(read("{\"segments\": [[\"text\", 0]]}\n").samples[0].llm_length() == 0);
}

TEST_CASE("jsonl: unknown keys are ignored", "[workload][jsonl]") {
  const mmbal::workload w = read(
      R"({"id": 3, "source": "coco", "meta": {"a": [1, 2, {"b": null}]}, "rank": 1, "weight": -7.5, "segments": [["text", 4]], "zzz": true})"
      "\n");
  REQUIRE(w.samples.size() == 1);
  CHECK(w.samples[0].id == 3);
  CHECK(w.samples[0].rank == 1);
  CHECK(w.samples[0].segments == std::vector<mmbal::segment>{{0, 4, 4}});
}

TEST_CASE("jsonl: every error names the file, the line and the field", "[workload][jsonl]") {
  const std::string ok = "{\"id\": 0, \"rank\": 0, \"segments\": [[\"text\", 10]]}\n";
  struct bad_case {
    std::string text;
    std::string line;                 // "line N"
    std::string field;                // field name ("" for whole-line errors)
    std::vector<std::string> naming;  // further words the message must contain (the value)
  };
  std::string many = "{\"segments\": [";
  for (int k = 0; k < 255; ++k) many += (k ? ", " : "") + std::string("[\"m") + std::to_string(k) + "\", 1]";
  many += "]}\n";
  const std::vector<bad_case> cases{
      {ok + "{\"id\": 1, \"rank\": 0, \"segments\": [[\"text\", -5]]}\n",
       "line 2",
       "'segments[0][1]'",
       {"-5", "negative"}},
      {ok + "{\"segments\": [[\"text\", 3], [\"image\", -5]]}\n", "line 2", "'segments[1][1]'", {"-5", "negative"}},
      {ok + "{\"segments\": [[\"text\", 1.5]]}\n", "line 2", "'segments[0][1]'", {"1.5", "not an integer"}},
      {ok + "{\"segments\": [[\"text\", 5.0]]}\n", "line 2", "'segments[0][1]'", {"5.0", "not an integer"}},
      {ok + "{\"segments\": [[\"text\", \"10\"]]}\n", "line 2", "'segments[0][1]'", {"\"10\"", "string"}},
      {ok + "{\"segments\": [[\"text\", 4294967296]]}\n", "line 2", "'segments[0][1]'", {"4294967296"}},
      {ok + "{\"segments\": [[\"text\", 1e30]]}\n", "line 2", "'segments[0][1]'", {"exceeds"}},
      {ok + "{\"segments\": [[\"image\", 5, -1]]}\n", "line 2", "'segments[0][2]'", {"-1", "negative"}},
      {ok + "{\"segments\": [[\"image\", 5, null]]}\n", "line 2", "'segments[0][2]'", {"null"}},
      {ok + "{\"segments\": [[\"text\", 5, 6]]}\n", "line 2", "'segments[0][2]'", {"6", "text"}},
      // nlohmann-json keeps the last of repeated keys: the sample was read with 20 tokens
      {ok + "{\"segments\": [[\"text\", 10]], \"segments\": [[\"text\", 20]]}\n",
       "line 2",
       "",
       {"duplicate key 'segments'"}},
      {ok + "{\"segments\": [[\"llm\", 10]]}\n", "line 2", "'segments[0][0]'", {"'llm' is reserved"}},
      {"{\"segments\": [[\"text\", 4294967295], [\"image\", 4294967295]]}\n",
       "line 1",
       "'segments[1]'",
       {"8589934590"}},
      {"{\"segments\": [[\"text\", 4294967295], [\"image\", 1]]}\n", "line 1", "'segments[1]'", {"4294967296"}},
      {ok + "{\"segments\": []}\n", "line 2", "'segments'", {"empty"}},
      {ok + "{\"id\": 5}\n", "line 2", "'segments'", {"missing"}},
      {ok + "{\"segments\": {\"text\": 5}}\n", "line 2", "'segments'", {"array", "object"}},
      {ok + "{\"segments\": [\"text\", 5]}\n", "line 2", "'segments[0]'", {"\"text\""}},
      {ok + "{\"segments\": [[\"text\"]]}\n", "line 2", "'segments[0]'", {"1 elements"}},
      {ok + "{\"segments\": [[\"image\", 1, 2, 3]]}\n", "line 2", "'segments[0]'", {"4 elements"}},
      {ok + "{\"segments\": [[5, 10]]}\n", "line 2", "'segments[0][0]'", {"5", "modality"}},
      {ok + "{\"segments\": [[\"\", 10]]}\n", "line 2", "'segments[0][0]'", {"non-empty"}},
      {many, "line 1", "'segments[254][0]'", {"m254", "too many modalities"}},
      {ok + "{\"id\": 1, \"rank\": 0, \"segments\": [[\"text\", 10]]\n", "line 2", "", {"malformed JSON"}},
      {ok + "\n\nnot json at all\n", "line 4", "", {"malformed JSON"}},
      // Numbers beyond a double throw nlohmann's out_of_range, not parse_error (fuzz_jsonl).
      {ok + "{\"id\": 1e811, \"segments\": [[\"text\", 5]]}\n", "line 2", "", {"out of range", "1e811"}},
      {ok + "{\"segments\": [[\"text\", -1e400]]}\n", "line 2", "", {"out of range", "-1e400"}},
      {ok + "[1, 2]\n", "line 2", "", {"object", "array"}},
      {ok + "17\n", "line 2", "", {"object", "number"}},
      {ok + "{\"id\": 0, \"segments\": [[\"text\", 5]]}\n", "line 2", "'id'", {"duplicate id 0", "line 1"}},
      {ok + "{\"id\": 1, \"segments\": [[\"text\", 5]]}\n\n" + "{\"id\": 9, \"segments\": [[\"text\", 5]]}\n" +
           "{\"id\": 9, \"segments\": [[\"text\", 5]]}\n",
       "line 5",
       "'id'",
       {"duplicate id 9", "line 4"}},
      {"{\"segments\": [[\"text\", 5]]}\n{\"id\": 0, \"segments\": [[\"text\", 5]]}\n",
       "line 2",
       "'id'",
       {"duplicate id 0", "line 1"}},
      {ok + "{\"id\": -3, \"segments\": [[\"text\", 5]]}\n", "line 2", "'id'", {"-3"}},
      {ok + "{\"id\": \"a\", \"segments\": [[\"text\", 5]]}\n", "line 2", "'id'", {"\"a\""}},
      {ok + "{\"id\": 2, \"rank\": 4, \"segments\": [[\"text\", 5]]}\n",
       "line 2",
       "'rank'",
       {"rank 4", ">= rank count 4"}},
      {ok + "{\"id\": 2, \"rank\": -1, \"segments\": [[\"text\", 5]]}\n", "line 2", "'rank'", {"-1"}},
      {ok + "{\"id\": 2, \"rank\": 1.0, \"segments\": [[\"text\", 5]]}\n", "line 2", "'rank'", {"1.0"}},
      {ok + "{\"id\": 2, \"group\": -2, \"segments\": [[\"text\", 5]]}\n", "line 2", "'group'", {"-2"}},
      {ok + "{\"id\": 2, \"group\": \"g\", \"segments\": [[\"text\", 5]]}\n", "line 2", "'group'", {"\"g\""}},
      {ok + "{\"id\": 2, \"group\": 0.5, \"segments\": [[\"text\", 5]]}\n", "line 2", "'group'", {"0.5"}},
  };
  for (const bad_case& c : cases) {
    INFO("input: " << c.text);
    const std::string msg = error_of(c.text, 4);
    INFO("message: " << msg);
    CHECK(msg.find("data.jsonl") != std::string::npos);
    CHECK(msg.find(c.line) != std::string::npos);
    if (!c.field.empty()) CHECK(msg.find("field " + c.field) != std::string::npos);
    for (const std::string& word : c.naming) CHECK(msg.find(word) != std::string::npos);
  }
  // A rank beyond the count with ranks given; accepted without a count.
  CHECK(error_of("{\"rank\": 7, \"segments\": [[\"text\", 5]]}\n", 7).find("rank 7") != std::string::npos);
  CHECK_NOTHROW(read("{\"rank\": 7, \"segments\": [[\"text\", 5]]}\n", 0));
}

TEST_CASE("jsonl: an empty input is an error", "[workload][jsonl]") {
  for (const std::string text : {"", "\n", "  \n\t\n\r\n"}) {
    const std::string msg = error_of(text);
    CHECK(msg.find("data.jsonl") != std::string::npos);
    CHECK(msg.find("empty") != std::string::npos);
  }
}

TEST_CASE("jsonl: files", "[workload][jsonl]") {
  const auto dir = std::filesystem::temp_directory_path();
  const std::string path = (dir / ("mmbal_jsonl_test_" + std::to_string(::getpid()) + ".jsonl")).string();
  const mmbal::workload w = random_workload(42, 5);
  {
    std::ofstream out(path, std::ios::binary);
    mmbal::write_jsonl(out, w);
  }
  CHECK(mmbal::read_jsonl_file(path, 5) == w);
  std::remove(path.c_str());
  try {
    (void)mmbal::read_jsonl_file(path, 5);
    FAIL("missing file accepted");
  } catch (const mmbal::invalid_input& e) {
    CHECK(std::string(e.what()).find(path) != std::string::npos);
  }
}

TEST_CASE("jsonl: the writer rejects a modality id without a name", "[workload][jsonl]") {
  mmbal::workload w;
  w.samples.push_back({0, 0, std::nullopt, {{3, 1, 1}}});
  std::ostringstream out;
  CHECK_THROWS_AS(mmbal::write_jsonl(out, w), mmbal::invalid_input);
}

TEST_CASE("jsonl: the fast path reads what nlohmann-json reads, and every line write_jsonl writes",
          "[workload][jsonl]") {
  using mmbal::detail::jsonl_fields;
  const mmbal::detail::jsonl_where at{"data.jsonl", 1};
  // Every line the writer emits takes the fast path (names with escapes or non-ASCII bytes
  // excepted: nlohmann-json decodes and validates those).
  std::vector<std::string> lines;
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    std::istringstream text(write(random_workload(seed, 8)));
    for (std::string line; std::getline(text, line);) lines.push_back(line);
  }
  std::size_t written_fast = 0, written_escaped = 0;
  for (const std::string& line : lines) {
    jsonl_fields fast, slow;
    nlohmann::json doc;
    const bool escaped = line.find('\\') != std::string::npos || line.find("\xc3") != std::string::npos;
    INFO(line);
    CHECK(mmbal::detail::jsonl_fields_fast(line, fast) == !escaped);
    written_fast += escaped ? 0 : 1;
    written_escaped += escaped ? 1 : 0;
    if (escaped) continue;
    mmbal::detail::jsonl_fields_of(line, at, doc, slow);
    CHECK(fast == slow);
  }
  CHECK(written_fast > 200);
  CHECK(written_escaped > 20);
  // Hand-written lines: other spacing and key orders, every default, and shapes the fast path
  // leaves to nlohmann-json.
  const std::vector<std::string> seeds = {
      R"({"segments":[["text",5]]})",
      R"(  { "group" : 7 ,"segments" : [ [ "image" , 1 , 2 ] , ["text",0] ] , "rank":3, "id": 18446744073709551615 } )",
      R"({"id": 3, "source": "coco", "segments": [["text", 4]]})",
      R"({"segments": [["text", 5.0]]})",
      R"({"segments": [["text", -5]]})",
      R"({"segments": [["text", 4294967296]]})",
      R"({"rank": 4294967296, "segments": [["text", 1]]})",
      R"({"id": 1, "id": 2, "segments": [["text", 1]]})",
      R"({"segments": [["te\u0078t", 1]]})",
      R"({"segments": []})",
      R"({"segments": [["", 1]]})",
      R"({"segments": [["text", 01]]})",
      R"({"segments": [["text", 1e3]]})",
      R"({"segments": [["text", 1, 2, 3]]})",
      "{\"segments\": [[\"text\", 1]]}\t ",
      R"([1, 2])",
  };
  for (const std::string& line : seeds) lines.push_back(line);
  // Mutations: a character replaced, inserted or removed, drawn from JSON's own alphabet.
  const std::string alphabet = "{}[]\",: \t0123456789-+.eE\\ubadgisrnkt\x80\x01";
  auto g = mmbal::make_rng(2026, 0x15011);
  std::size_t both = 0, slow_only = 0, rejected = 0;
  for (std::size_t trial = 0; trial < 40000; ++trial) {
    std::string line = lines[mmbal::uniform_below(g, lines.size())];
    for (std::uint64_t edits = 1 + mmbal::uniform_below(g, 3); edits > 0; --edits) {
      const std::size_t pos = mmbal::uniform_below(g, line.size() + 1);
      const char c = alphabet[mmbal::uniform_below(g, alphabet.size())];
      const std::uint64_t kind = mmbal::uniform_below(g, 3);
      if (kind == 0 && pos < line.size()) line[pos] = c;
      if (kind == 1) line.insert(line.begin() + static_cast<std::ptrdiff_t>(pos), c);
      if (kind == 2 && pos < line.size()) line.erase(pos, 1);
    }
    jsonl_fields fast, slow;
    nlohmann::json doc;
    const bool fast_ok = mmbal::detail::jsonl_fields_fast(line, fast);
    bool slow_ok = true;
    try {
      mmbal::detail::jsonl_fields_of(line, at, doc, slow);
    } catch (const mmbal::invalid_input&) {
      slow_ok = false;
    }
    INFO("line: " << line);
    if (fast_ok) {
      REQUIRE(slow_ok);  // the fast path accepts nothing that nlohmann-json rejects
      REQUIRE(fast == slow);
      ++both;
    } else {
      (slow_ok ? slow_only : rejected) += 1;
    }
  }
  // Every outcome is exercised (2,615 / 5,089 / 32,296 of the 40,000 with this seed).
  CHECK(both > 2000);
  CHECK(slow_only > 3000);
  CHECK(rejected > 20000);
}

TEST_CASE("jsonl: the duplicate-id table answers as a map of first lines, across its growth", "[workload][jsonl]") {
  // An ascending run (appended), then the largest id (appended), ids with equal low bits
  // (multiples of 2^20: the table), a dense run that meets the ascending one (found by binary
  // search) and fills the table's gaps, and random ids; then everything again: every answer
  // is what a map of first lines answers.
  mmbal::rng_engine g = mmbal::make_rng(41);
  std::vector<std::uint64_t> ids;
  for (std::uint64_t k = 1; k <= 4000; ++k) ids.push_back(10 * k);
  ids.push_back(~std::uint64_t{0});
  for (std::uint64_t k = 0; k < 3000; ++k) ids.push_back(k << 20);
  for (std::uint64_t k = 0; k < 5000; ++k) ids.push_back(k);
  for (int k = 0; k < 5000; ++k) ids.push_back(g());
  std::map<std::uint64_t, std::uint64_t> reference;
  mmbal::detail::id_lines table;
  std::uint64_t line = 0;
  for (int round = 0; round < 2; ++round)
    for (const std::uint64_t id : ids) {
      ++line;
      const auto [pos, fresh] = reference.emplace(id, line);
      REQUIRE(table.first_or_record(id, line) == (fresh ? 0 : pos->second));
    }
}

TEST_CASE("jsonl: a duplicate id far from its first use names both lines", "[workload][jsonl]") {
  std::string text;
  for (int i = 0; i < 20000; ++i) text += "{\"id\": " + std::to_string(7 * i) + ", \"segments\": [[\"text\", 5]]}\n";
  text += "{\"id\": 69993, \"segments\": [[\"text\", 5]]}\n";  // id of line 9,999 + 1
  const std::string e = error_of(text);
  CHECK(e.find("line 20001") != std::string::npos);
  CHECK(e.find("duplicate id 69993") != std::string::npos);
  CHECK(e.find("first used on line 10000") != std::string::npos);
  text.resize(text.rfind("{\"id\": 69993"));
  CHECK(read(text).samples.size() == 20000);
}
