// Realistic generators (docs/WORKLOADS.md): formulas against values of the normative
// the reference generator (docs/WORKLOADS.md), determinism, sample structure, and every family's summary
// statistics against the table of docs/WORKLOADS.md within stated tolerances.
#include <mmbal/workload/generators.hpp>
#include <mmbal/workload/jsonl.hpp>
#include <mmbal/workload/length_data.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <unistd.h>

namespace {

const mmbal::length_data& data() {
  static const mmbal::length_data d = mmbal::load_length_data(mmbal::find_data_dir(MMBAL_DATA_DIR));
  return d;
}

// Summary statistics computed the way the reference generator's (docs/WORKLOADS.md) `summarize` does.
struct summary {
  double mean = 0, std = 0;
  double p10 = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;
  double image_frac = 0, image_frac_std = 0, audio_frac = 0, audio_frac_std = 0;
  double image_frac_max = 0, audio_frac_max = 0;
};

summary summarize(const mmbal::workload& w) {
  const auto img = w.find_modality("image"), vid = w.find_modality("video"), aud = w.find_modality("audio");
  std::vector<double> len, fi, fa;
  for (const mmbal::sample& s : w.samples) {
    double l = 0, im = 0, au = 0;
    for (const mmbal::segment& g : s.segments) {
      l += g.llm_tokens;
      if ((img && g.modality == *img) || (vid && g.modality == *vid)) im += g.llm_tokens;  // video = image frames
      if (aud && g.modality == *aud) au += g.llm_tokens;
    }
    len.push_back(l);
    fi.push_back(im / std::max(1.0, l));
    fa.push_back(au / std::max(1.0, l));
  }
  const auto mean_std = [](const std::vector<double>& v, double& m, double& sd) {
    m = 0;
    for (double x : v) m += x;
    m /= static_cast<double>(v.size());
    double q = 0;
    for (double x : v) q += (x - m) * (x - m);
    sd = std::sqrt(q / static_cast<double>(v.size()));
  };
  summary r;
  mean_std(len, r.mean, r.std);
  mean_std(fi, r.image_frac, r.image_frac_std);
  mean_std(fa, r.audio_frac, r.audio_frac_std);
  r.image_frac_max = *std::max_element(fi.begin(), fi.end());
  r.audio_frac_max = *std::max_element(fa.begin(), fa.end());
  std::sort(len.begin(), len.end());
  const std::size_t n = len.size();
  r.p10 = len[n / 10];
  r.p50 = len[n / 2];
  r.p90 = len[9 * n / 10];
  r.p99 = len[99 * n / 100];
  r.max = len.back();
  return r;
}

// |got / want - 1| <= tol
#define CHECK_REL(got, want, tol)                            \
  do {                                                       \
    INFO(#got << " = " << (got) << ", expected " << (want)); \
    CHECK(std::abs((got) / (want)-1.0) <= (tol));            \
  } while (0)
#define CHECK_ABS(got, want, tol)                            \
  do {                                                       \
    INFO(#got << " = " << (got) << ", expected " << (want)); \
    CHECK(std::abs((got) - (want)) <= (tol));                \
  } while (0)

// Tolerances of the statistics tests (20,000 samples, as the docs/WORKLOADS.md table): the mean
// within 3 %, the standard deviation within 6 %, p10/p50/p90 within 5 %, p99 within 6 %
// (a 200-sample tail), token fractions within 0.03 absolute.
constexpr std::uint64_t stat_samples = 20000;
constexpr double tol_mean = 0.03, tol_std = 0.06, tol_pct = 0.05, tol_p99 = 0.06, tol_frac = 0.03;

mmbal::workload gen(mmbal::family f, std::uint64_t seed, std::uint64_t samples = stat_samples,
                    mmbal::generator_options o = {}) {
  o.samples = samples;
  o.ranks = o.ranks ? o.ranks : 8;
  o.seed = seed;
  return mmbal::generate(f, o, data());
}

// Allowed (q, k) pairs of a pack under the Cornstarch bitfield rule with one bit per span,
// as the reference generator's (docs/WORKLOADS.md) mask_area: text attends causally to every earlier token of its
// document, a modality token to its own span (a full square).
double mask_area(const mmbal::workload& pack) {
  double area = 0, pos = 0;
  for (const mmbal::sample& doc : pack.samples) {
    const double start = pos;
    for (const mmbal::segment& g : doc.segments) {
      const double n = g.llm_tokens;
      area += g.modality == mmbal::text_modality ? n * (pos - start) + n * (n + 1) / 2 : n * n;
      pos += n;
    }
  }
  return area;
}

}  // namespace

TEST_CASE("generators: preprocessing formulas match the reference generator", "[workload][generators]") {
  // Values printed by the reference generator's (docs/WORKLOADS.md) internvl_tiles / qwen2vl_image_tokens / audio_item.
  struct tiles_case {
    std::uint32_t w, h, max_num, tiles;
  };
  for (const tiles_case& c : {tiles_case{640, 480, 12, 13}, tiles_case{640, 427, 12, 7}, tiles_case{1280, 720, 12, 9},
                              tiles_case{500, 375, 4, 1}, tiles_case{427, 640, 6, 7}, tiles_case{200, 1000, 12, 6},
                              tiles_case{1000, 100, 12, 11}, tiles_case{448, 448, 12, 1}, tiles_case{896, 448, 12, 3},
                              tiles_case{3000, 200, 40, 16}}) {
    INFO(c.w << "x" << c.h << " max_num " << c.max_num);
    CHECK(mmbal::internvl_tiles(c.w, c.h, c.max_num) == c.tiles);
  }
  struct qwen_case {
    std::uint32_t w, h, tokens;
  };
  for (const qwen_case& c : {qwen_case{640, 480, 391}, qwen_case{1280, 720, 1196}, qwen_case{20, 20, 4},
                             qwen_case{10000, 9000, 16214}, qwen_case{42, 70, 4}, qwen_case{300, 30, 11}}) {
    INFO(c.w << "x" << c.h);
    CHECK(mmbal::qwen2vl_image_tokens(c.w, c.h) == c.tokens);
  }
  struct audio_case {
    double seconds;
    std::uint32_t enc, tokens;
  };
  for (const audio_case& c : {audio_case{30.0, 1500, 750}, audio_case{1.0, 50, 25}, audio_case{0.01, 1, 0},
                              audio_case{2.5, 125, 62}, audio_case{17.3456, 867, 433}, audio_case{0.0, 0, 0}}) {
    INFO(c.seconds << " s");
    CHECK(mmbal::audio_item(c.seconds).enc_frames == c.enc);
    CHECK(mmbal::audio_item(c.seconds).tokens == c.tokens);
    CHECK(mmbal::audio_item(c.seconds, true).enc_frames == 1500);
  }
  CHECK_THROWS_AS(mmbal::audio_item(-1.0), mmbal::invalid_input);
  CHECK_THROWS_AS(mmbal::internvl_tiles(0, 5), mmbal::invalid_input);
  CHECK_THROWS_AS(mmbal::qwen2vl_image_tokens(5, 0), mmbal::invalid_input);
}

TEST_CASE("generators: length data loads with the documented row counts", "[workload][generators]") {
  const mmbal::length_data& d = data();
  CHECK(d.librispeech_train.size() == 28539);
  CHECK(d.librispeech_test.size() == 2703);
  REQUIRE(d.omnibal.size() == 2);
  CHECK(d.omnibal[0].size() == 12413);
  CHECK(d.omnibal[1].size() == 18317);
  CHECK(d.coco_sizes.size() == 601);
  CHECK(d.coco_cumulative.back() == 5000);  // the COCO "5k" split
  CHECK(d.magi_bins.size() == 14);
  CHECK(d.magi_cumulative.back() == 13463214);
  CHECK(d.magi_bins.front().lo == 1);  // [0, 10] clipped to a 1-token minimum
  CHECK(d.magi_bins.back().hi == 196608);
}

TEST_CASE("generators: length data errors name the file and the line", "[workload][generators]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("mmbal_length_data_test_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::copy(mmbal::find_data_dir(MMBAL_DATA_DIR), dir, fs::copy_options::recursive);
  const auto corrupt = [&](const char* rel, int line, const std::string& text) {
    std::ifstream in(dir / rel);
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    in.close();
    lines[static_cast<std::size_t>(line - 1)] = text;
    std::ofstream out(dir / rel, std::ios::trunc);
    for (const auto& l : lines) out << l << '\n';
  };
  const auto message = [&] {
    try {
      (void)mmbal::load_length_data(dir.string());
    } catch (const mmbal::invalid_input& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  CHECK_NOTHROW(mmbal::load_length_data(dir.string()));
  CHECK(mmbal::find_data_dir(dir.string()) == dir.string());

  corrupt("coco_val5k_image_size_hist.csv", 5, "640,x480,3");
  std::string msg = message();
  CHECK(msg.find("coco_val5k_image_size_hist.csv, line 5") != std::string::npos);
  CHECK(msg.find("x480") != std::string::npos);
  corrupt("coco_val5k_image_size_hist.csv", 5, "640,480,3");

  corrupt("magiattention_doc_length_distribution.csv", 3, "\"[11 50]\",391188,2.91,3.13");
  msg = message();
  CHECK(msg.find("magiattention_doc_length_distribution.csv, line 3") != std::string::npos);
  corrupt("magiattention_doc_length_distribution.csv", 3, "\"[11, 50]\",391188,2.91,3.13");

  corrupt("internvl_omnibal_lengths/chartqa_train_18k.csv", 7, "5");
  msg = message();
  CHECK(msg.find("chartqa_train_18k.csv, line 7") != std::string::npos);
  corrupt("internvl_omnibal_lengths/chartqa_train_18k.csv", 7, "5,100,1");  // fewer tokens than 256 per tile
  msg = message();
  CHECK(msg.find("chartqa_train_18k.csv, line 7") != std::string::npos);
  CHECK(msg.find("100") != std::string::npos);
  corrupt("internvl_omnibal_lengths/chartqa_train_18k.csv", 7, "5,1359,5");

  corrupt("librispeech_durations/dev-clean.csv", 2, "1272-128104-0000,-93680");
  msg = message();
  CHECK(msg.find("dev-clean.csv, line 2") != std::string::npos);
  CHECK(msg.find("-93680") != std::string::npos);

  fs::remove(dir / "librispeech_durations" / "dev-clean.csv");
  msg = message();
  CHECK(msg.find("dev-clean.csv") != std::string::npos);
  CHECK(msg.find("cannot open") != std::string::npos);
  fs::remove_all(dir);

  try {
    (void)mmbal::find_data_dir("/nonexistent/mmbal-data");
    FAIL("a bad explicit directory was accepted");
  } catch (const mmbal::invalid_input& e) {
    CHECK(std::string(e.what()).find("/nonexistent/mmbal-data") != std::string::npos);
  }
  // Without an explicit path the compile-time MMBAL_DATA_DIR of the tests is found.
  CHECK_NOTHROW(mmbal::find_data_dir());
}

TEST_CASE("generators: option parsing", "[workload][generators]") {
  CHECK(mmbal::parse_family("llava") == mmbal::family::llava);
  CHECK(mmbal::parse_family("internvl") == mmbal::family::internvl);
  CHECK(mmbal::parse_family("audio") == mmbal::family::audio);
  CHECK(mmbal::parse_family("omni") == mmbal::family::omni);
  CHECK(mmbal::parse_family("longctx") == mmbal::family::longctx);
  for (auto f : {mmbal::family::llava, mmbal::family::internvl, mmbal::family::audio, mmbal::family::omni,
                 mmbal::family::longctx})
    CHECK(mmbal::parse_family(mmbal::to_string(f)) == f);
  CHECK_THROWS_WITH(mmbal::parse_family("video"), Catch::Contains("'video'"));
  CHECK(mmbal::parse_pack_layout("EP") == mmbal::pack_layout::ep);
  CHECK(mmbal::parse_pack_layout("ee") == mmbal::pack_layout::ee);
  CHECK(mmbal::parse_pack_layout("mp") == mmbal::pack_layout::mp);
  CHECK_THROWS_WITH(mmbal::parse_pack_layout("zz"), Catch::Contains("'zz'"));
  CHECK(mmbal::parse_vision_backend("internvl") == mmbal::vision_backend::internvl);
  CHECK(mmbal::parse_llava_variant("v1.5") == mmbal::llava_variant::v1_5);
  CHECK(mmbal::parse_llava_variant("anyres") == mmbal::llava_variant::anyres);
  CHECK(mmbal::parse_llava_variant("pretrain") == mmbal::llava_variant::pretrain);
  CHECK_THROWS_WITH(mmbal::parse_llava_variant("next"), Catch::Contains("'next'"));
  CHECK_THROWS_WITH(mmbal::parse_vision_backend("clip"), Catch::Contains("'clip'"));

  mmbal::generator_options o;
  o.samples = 10;
  o.ranks = 0;
  CHECK_THROWS_WITH(mmbal::generate(mmbal::family::omni, o, data()), Catch::Contains("ranks = 0"));
  o.ranks = 2;
  o.internvl_max_num = 0;
  CHECK_THROWS_WITH(mmbal::generate(mmbal::family::internvl, o, data()), Catch::Contains("internvl_max_num 0"));
  o.internvl_max_num = 12;
  o.p_asr = 1.5;
  CHECK_THROWS_WITH(mmbal::generate(mmbal::family::audio, o, data()), Catch::Contains("1.5"));
  o.p_asr = 0.5;
  o.llava_max_len = 100;
  CHECK_THROWS_WITH(mmbal::generate(mmbal::family::llava, o, data()), Catch::Contains("100"));
  o.llava_max_len = 2048;
  o.llava = mmbal::llava_variant::anyres;  // 2,880-token images do not fit 2,048
  CHECK_THROWS_WITH(mmbal::generate(mmbal::family::llava, o, data()), Catch::Contains("2880"));
  o.llava = mmbal::llava_variant::v1_5;
  CHECK_THROWS_WITH(mmbal::generate_pack(mmbal::pack_layout::mp, 0, 1, data()), Catch::Contains("pack_tokens = 0"));
  CHECK_THROWS_WITH(mmbal::generate_pack(mmbal::pack_layout::mp, 3, 1, data()), Catch::Contains("3"));
  CHECK_THROWS_AS(mmbal::generate(mmbal::family::omni, o, mmbal::length_data{}), mmbal::invalid_input);
}

TEST_CASE("generators: deterministic, seed-dependent and prefix-stable", "[workload][generators]") {
  for (auto f : {mmbal::family::llava, mmbal::family::internvl, mmbal::family::audio, mmbal::family::omni}) {
    INFO(mmbal::to_string(f));
    const mmbal::workload a = gen(f, 11, 2000);
    CHECK(a == gen(f, 11, 2000));
    CHECK_FALSE(a == gen(f, 12, 2000));
    // Sample i does not depend on how many samples are generated.
    mmbal::workload b = gen(f, 11, 700);
    REQUIRE(b.samples.size() == 700);
    CHECK(std::equal(b.samples.begin(), b.samples.end(), a.samples.begin()));
  }
  for (auto l : {mmbal::pack_layout::ep, mmbal::pack_layout::ee, mmbal::pack_layout::mp}) {
    mmbal::pack_options small;
    small.docs_per_refill = 2000;
    CHECK(mmbal::generate_pack(l, 16384, 5, data(), small) == mmbal::generate_pack(l, 16384, 5, data(), small));
    CHECK_FALSE(mmbal::generate_pack(l, 16384, 5, data(), small) == mmbal::generate_pack(l, 16384, 6, data(), small));
  }
}

TEST_CASE("generators: sample structure, ids, ranks and encoder accounting", "[workload][generators]") {
  const std::set<std::string> known{"text", "image", "video", "audio"};
  for (auto f : {mmbal::family::llava, mmbal::family::internvl, mmbal::family::audio, mmbal::family::omni}) {
    for (auto vision : {mmbal::vision_backend::qwen2vl, mmbal::vision_backend::internvl}) {
      for (bool pad : {false, true}) {
        INFO(mmbal::to_string(f) << " vision " << static_cast<int>(vision) << " pad " << pad);
        mmbal::generator_options o;
        o.ranks = 7;
        o.omni_vision = vision;
        o.whisper_pad_to_30s = pad;
        const mmbal::workload w = gen(f, 3, 3000, o);
        REQUIRE(w.samples.size() == 3000);
        REQUIRE(w.modalities[0] == "text");
        for (const auto& m : w.modalities) CHECK(known.count(m) == 1);
        // The writer/reader pair reproduces generated workloads (modalities in first-use order).
        std::stringstream io;
        mmbal::write_jsonl(io, w);
        REQUIRE(mmbal::read_jsonl(io, "generated", 7) == w);
        const auto img = w.find_modality("image"), vid = w.find_modality("video"), aud = w.find_modality("audio");
        for (std::size_t i = 0; i < w.samples.size(); ++i) {
          const mmbal::sample& s = w.samples[i];
          REQUIRE(s.id == i);
          REQUIRE(s.rank == i % 7);
          REQUIRE_FALSE(s.segments.empty());
          std::uint64_t tiles = 0;
          bool media_seen = false, text_after = false;
          for (std::size_t k = 0; k < s.segments.size(); ++k) {
            const mmbal::segment& g = s.segments[k];
            REQUIRE(g.llm_tokens > 0);
            if (g.modality == mmbal::text_modality) {
              REQUIRE(g.encoder_len == g.llm_tokens);
              text_after = text_after || media_seen;
              if (k > 0) REQUIRE(s.segments[k - 1].modality != mmbal::text_modality);  // no split text runs
            } else {
              REQUIRE_FALSE(text_after);  // order: prefix text, media, rest of the text
              media_seen = true;
            }
            if (aud && g.modality == *aud) {
              if (pad)
                REQUIRE(g.encoder_len == 1500);
              else
                REQUIRE(g.llm_tokens == (g.encoder_len - 2) / 2 + 1);  // Qwen2-Audio pooling
              REQUIRE(g.llm_tokens <= 900);  // LibriSpeech utterances ≤ 35 s, other clips ≤ 30 s
            }
            const bool vis = (img && g.modality == *img) || (vid && g.modality == *vid);
            if (vis && f == mmbal::family::llava) REQUIRE((g.llm_tokens == 576 && g.encoder_len == 577));
            if (vis && f == mmbal::family::internvl) {
              REQUIRE(g.llm_tokens % 256 == 0);
              REQUIRE(g.encoder_len == g.llm_tokens / 256 * 1025);
              tiles += g.llm_tokens / 256;
            }
            if (vis && f == mmbal::family::omni && vision == mmbal::vision_backend::qwen2vl)
              REQUIRE(g.encoder_len == 4 * g.llm_tokens);
          }
          if (s.segments.front().modality == mmbal::text_modality && media_seen)
            REQUIRE(s.segments.front().llm_tokens <= 16);  // the default text prefix
          if (f == mmbal::family::llava) REQUIRE(s.llm_length() <= 2048);
          if (f == mmbal::family::internvl) REQUIRE(tiles <= 32);  // docs/WORKLOADS.md: 0 to 32 tiles
        }
      }
      if (f != mmbal::family::omni) break;  // the vision backend only affects omni
    }
  }
}

TEST_CASE("generators: family statistics match docs/WORKLOADS.md", "[workload][generators][stats]") {
  // Expected values: the docs/WORKLOADS.md table (reference generator, seed 1234, 20k samples).
  // Two seeds each, so a port that only matches by luck on one seed is unlikely to pass.
  for (std::uint64_t seed : {1, 1234}) {
    INFO("seed " << seed);
    {
      INFO("(a) llava");
      const summary s = summarize(gen(mmbal::family::llava, seed));
      CHECK_REL(s.mean, 808.0, tol_mean);
      CHECK_REL(s.std, 227.0, tol_std);
      CHECK_REL(s.p10, 633.0, tol_pct);
      CHECK_REL(s.p50, 755.0, tol_pct);
      CHECK_REL(s.p90, 1033.0, tol_pct);
      CHECK_REL(s.p99, 1985.0, tol_p99);
      CHECK(s.max <= 2048);
      CHECK_ABS(s.image_frac, 0.71, tol_frac);
      CHECK_ABS(s.image_frac_std, 0.21, tol_frac);
    }
    {
      INFO("(b) internvl, max_num 12, shipped ai2d + chartqa rows");
      const summary s = summarize(gen(mmbal::family::internvl, seed));
      CHECK_REL(s.mean, 2137.0, tol_mean);
      CHECK_REL(s.std, 1606.0, tol_std);
      CHECK_REL(s.p50, 1848.0, tol_pct);
      CHECK_REL(s.p90, 3785.0, tol_pct);
      CHECK_REL(s.p99, 8406.0, tol_p99);
      CHECK_ABS(s.image_frac, 0.76, tol_frac);
      CHECK_ABS(s.image_frac_std, 0.33, tol_frac);
    }
    {
      INFO("(c) audio");
      const summary s = summarize(gen(mmbal::family::audio, seed));
      CHECK_REL(s.mean, 357.0, tol_mean);
      CHECK_REL(s.std, 162.0, tol_std);
      CHECK_REL(s.p10, 152.0, tol_pct);
      CHECK_REL(s.p50, 351.0, tol_pct);
      CHECK_REL(s.p90, 542.0, tol_pct);
      CHECK_REL(s.p99, 799.0, tol_p99);
      CHECK_ABS(s.audio_frac, 0.79, tol_frac);
      CHECK_ABS(s.audio_frac_std, 0.11, tol_frac);
    }
    {
      INFO("(d) omni, qwen2vl");
      const summary s = summarize(gen(mmbal::family::omni, seed));
      CHECK_REL(s.mean, 1449.0, tol_mean);
      CHECK_REL(s.std, 2204.0, tol_std);
      CHECK_REL(s.p10, 254.0, tol_pct);
      CHECK_REL(s.p50, 617.0, tol_pct);
      CHECK_REL(s.p90, 3272.0, tol_pct);
      CHECK_REL(s.p99, 12700.0, tol_p99);
      CHECK_ABS(s.image_frac, 0.35, tol_frac);
      CHECK_ABS(s.image_frac_std, 0.38, tol_frac);
      CHECK_ABS(s.audio_frac, 0.31, tol_frac);
      CHECK_ABS(s.audio_frac_std, 0.37, tol_frac);
      CHECK(s.image_frac_max > 0.9);  // MCI: fractions span 0 to ~0.97
      CHECK(s.audio_frac_max > 0.9);
    }
    {
      INFO("(d) omni, internvl");
      mmbal::generator_options o;
      o.omni_vision = mmbal::vision_backend::internvl;
      const summary s = summarize(gen(mmbal::family::omni, seed, stat_samples, o));
      CHECK_REL(s.mean, 2303.0, tol_mean);
      CHECK_REL(s.std, 2929.0, tol_std);
      CHECK_REL(s.p99, 13300.0, tol_p99);
    }
  }
  for (auto [max_num, mean, std] : {std::tuple{4u, 1330.0, 1433.0}, std::tuple{6u, 1756.0, 1364.0}}) {
    INFO("(b) internvl, max_num " << max_num << ", seed 7");
    mmbal::generator_options o;
    o.internvl_max_num = max_num;
    const summary s = summarize(gen(mmbal::family::internvl, 7, stat_samples, o));
    CHECK_REL(s.mean, mean, tol_mean);
    CHECK_REL(s.std, std, tol_std);
  }
}

TEST_CASE("generators: long-context packs", "[workload][generators][pack]") {
  for (auto layout : {mmbal::pack_layout::ep, mmbal::pack_layout::ee, mmbal::pack_layout::mp}) {
    for (std::uint32_t len : {4096u, 32768u, 65536u}) {
      mmbal::pack_options o;
      o.docs_per_refill = 20000;
      mmbal::pack_generator gen_packs(layout, len, 17, data(), o);
      for (int p = 0; p < 20; ++p) {
        INFO("layout " << static_cast<int>(layout) << " L " << len << " pack " << p);
        const mmbal::workload w = gen_packs.next();
        std::uint64_t total = 0;
        for (std::size_t i = 0; i < w.samples.size(); ++i) {
          const mmbal::sample& doc = w.samples[i];
          REQUIRE(doc.id == i);  // documents in sequence order
          REQUIRE_FALSE(doc.segments.empty());
          for (const auto& g : doc.segments) {
            REQUIRE(g.llm_tokens > 0);
            REQUIRE(g.encoder_len == g.llm_tokens);
          }
          total += doc.llm_length();
          if (layout == mmbal::pack_layout::mp) {
            REQUIRE(doc.llm_length() <= len / 4);  // pieces of at most a quarter pack
            if (doc.llm_length() <= 64) REQUIRE(doc.segments.size() == 1);
          }
        }
        REQUIRE(total == len);  // exactly the pack
        if (layout != mmbal::pack_layout::mp) {
          REQUIRE(w.samples.size() == 1);
          const auto& segs = w.samples[0].segments;
          std::uint64_t spans = 0;
          for (const auto& g : segs) spans += g.modality == mmbal::text_modality ? 0 : g.llm_tokens;
          CHECK(spans >= static_cast<std::uint64_t>(0.3 * len) - 1);
          CHECK(spans <= static_cast<std::uint64_t>(0.9 * len));
          if (layout == mmbal::pack_layout::ep) {  // spans first, then one text segment
            REQUIRE(segs.back().modality == mmbal::text_modality);
            for (std::size_t k = 0; k + 1 < segs.size(); ++k) REQUIRE(segs[k].modality != mmbal::text_modality);
          }
        }
      }
    }
  }
}

TEST_CASE("generators: pack mask areas and document counts match docs/WORKLOADS.md", "[workload][generators][pack]") {
  // Expected (docs/WORKLOADS.md (e), 200 packs): area ratio means EP 0.81, EE 0.58, MP 0.13 at
  // 32K with 21 docs/pack; 0.10 and 41 docs at 64K. Tolerances: ±0.04 for EP/EE (per-pack
  // standard deviation ~0.17, so ~3 standard errors over 150 packs), ±0.015 for MP, doc counts ±10 %.
  struct row {
    mmbal::pack_layout layout;
    std::uint32_t len;
    int packs;
    double ratio, tol, docs;
  };
  for (const row& r :
       {row{mmbal::pack_layout::ep, 32768, 150, 0.81, 0.04, 1}, row{mmbal::pack_layout::ee, 32768, 150, 0.58, 0.04, 1},
        row{mmbal::pack_layout::mp, 32768, 150, 0.13, 0.015, 21},
        row{mmbal::pack_layout::mp, 65536, 60, 0.10, 0.015, 41}}) {
    INFO("layout " << static_cast<int>(r.layout) << " L " << r.len);
    mmbal::pack_generator packs(r.layout, r.len, 2024, data());
    double ratio = 0, docs = 0, lo = 1e9, hi = 0;
    for (int p = 0; p < r.packs; ++p) {
      const mmbal::workload w = packs.next();
      const double causal = static_cast<double>(r.len) * (r.len + 1.0) / 2;
      const double x = mask_area(w) / causal;
      ratio += x;
      lo = std::min(lo, x);
      hi = std::max(hi, x);
      docs += static_cast<double>(w.samples.size());
    }
    ratio /= r.packs;
    docs /= r.packs;
    CHECK_ABS(ratio, r.ratio, r.tol);
    CHECK_REL(docs, r.docs, 0.10);
    CHECK(hi - lo > 0.1);  // the wide spread that makes uniform sharding imbalanced
  }
}

TEST_CASE("generators: longctx through generate() deals documents round-robin", "[workload][generators][pack]") {
  mmbal::generator_options o;
  o.ranks = 3;
  o.seed = 9;
  o.layout = mmbal::pack_layout::mp;
  o.pack_tokens = 8192;
  const mmbal::workload w = mmbal::generate(mmbal::family::longctx, o, data());
  mmbal::workload p = mmbal::generate_pack(mmbal::pack_layout::mp, 8192, 9, data());
  REQUIRE(w.samples.size() == p.samples.size());
  REQUIRE(w.samples.size() > 1);
  for (std::size_t i = 0; i < w.samples.size(); ++i) {
    CHECK(w.samples[i].rank == i % 3);
    p.samples[i].rank = static_cast<mmbal::rank_t>(i % 3);
  }
  CHECK(w == p);
}

TEST_CASE("generators: omni task weights", "[workload][generators]") {
  mmbal::generator_options o;
  o.omni_task_weights = {1, 0, 0, 0, 0, 0, 0};  // text only
  const mmbal::workload t = gen(mmbal::family::omni, 4, 2000, o);
  CHECK(t.modalities == std::vector<std::string>{"text"});
  for (const auto& s : t.samples) CHECK(s.segments.size() == 1);
  o.omni_task_weights = {0, 0, 0, 0, 0, 0, 1};  // long audio only: 30..300 s in ≤ 30 s windows
  const mmbal::workload a = gen(mmbal::family::omni, 4, 2000, o);
  for (const auto& s : a.samples) {
    std::size_t windows = 0;
    for (const auto& g : s.segments) windows += g.modality != mmbal::text_modality;
    CHECK(windows >= 1);
    CHECK(windows <= 10);
  }
  // The heavy-tail setting (long_audio_text 0.15) lengthens sequences on average.
  o.omni_task_weights = {0.15, 0.30, 0.10, 0.15, 0.15, 0.10, 0.15};
  CHECK(summarize(gen(mmbal::family::omni, 4, 5000, o)).mean > 1.2 * summarize(gen(mmbal::family::omni, 4, 5000)).mean);
  for (const std::array<double, 7>& bad :
       {std::array<double, 7>{0, 0, 0, 0, 0, 0, 0}, std::array<double, 7>{1, -1, 0, 0, 0, 0, 0},
        std::array<double, 7>{1, std::nan(""), 0, 0, 0, 0, 0}}) {
    o.omni_task_weights = bad;
    CHECK_THROWS_AS(gen(mmbal::family::omni, 4, 10, o), mmbal::invalid_input);
  }
}

TEST_CASE("generators: data directory precedence", "[workload][generators]") {
  namespace fs = std::filesystem;
  const std::string compiled = MMBAL_DATA_DIR;
  const fs::path copy = fs::temp_directory_path() / ("mmbal_data_dir_test_" + std::to_string(::getpid()));
  fs::remove_all(copy);
  fs::create_directories(copy);
  fs::copy_file(fs::path(compiled) / "magiattention_doc_length_distribution.csv",
                copy / "magiattention_doc_length_distribution.csv");
  const char* old = std::getenv("MMBAL_DATA_DIR");
  const std::string saved = old ? old : "";
  ::setenv("MMBAL_DATA_DIR", copy.c_str(), 1);
  CHECK(mmbal::find_data_dir() == copy.string());     // environment before compile-time
  CHECK(mmbal::find_data_dir(compiled) == compiled);  // explicit before environment
  ::setenv("MMBAL_DATA_DIR", "/nonexistent/env-dir", 1);
  CHECK(mmbal::find_data_dir() == compiled);  // unusable environment: compile-time
  if (old)
    ::setenv("MMBAL_DATA_DIR", saved.c_str(), 1);
  else
    ::unsetenv("MMBAL_DATA_DIR");
  fs::remove_all(copy);
}

TEST_CASE("generators: LLaVA variants, long-audio stress, heavy-tail and text-only packs", "[workload][generators]") {
  // anyres grid choice: LLaVA-NeXT select_best_resolution by hand for these sizes.
  CHECK(mmbal::anyres_grid_tiles(640, 480) == 4);  // 672x672 holds it at scale 1.05
  CHECK(mmbal::anyres_grid_tiles(480, 640) == 4);
  CHECK(mmbal::anyres_grid_tiles(1000, 100) == 3);  // 1008x336: effective 1008x100
  CHECK(mmbal::anyres_grid_tiles(100, 1000) == 3);
  CHECK(mmbal::anyres_grid_tiles(300, 150) == 2);  // all pins hold it, 336x672 and 672x336 waste the same: first
  CHECK_THROWS_AS(mmbal::anyres_grid_tiles(0, 1), mmbal::invalid_input);

  mmbal::generator_options o;
  o.llava = mmbal::llava_variant::anyres;
  const mmbal::workload any = gen(mmbal::family::llava, 2, 3000, o);
  std::set<std::uint32_t> views;
  for (const auto& s : any.samples) {
    CHECK(s.llm_length() <= 4096);
    for (const auto& g : s.segments)
      if (g.modality != mmbal::text_modality) {
        REQUIRE(g.llm_tokens % 576 == 0);
        REQUIRE(g.encoder_len == g.llm_tokens / 576 * 577);
        views.insert(g.llm_tokens / 576);
      }
  }
  for (std::uint32_t v : views) CHECK((v >= 3 && v <= 5));  // base view + 2..4 grid tiles
  CHECK(views.count(5) == 1);

  o.llava = mmbal::llava_variant::pretrain;
  const mmbal::workload pre = gen(mmbal::family::llava, 2, 3000, o);
  double caption = 0;
  for (const auto& s : pre.samples) {
    std::uint32_t text = 0, images = 0;
    for (const auto& g : s.segments) {
      if (g.modality == mmbal::text_modality)
        text += g.llm_tokens;
      else
        images += g.llm_tokens == 576;
    }
    REQUIRE(images == 1);
    REQUIRE((text >= 3 && text <= 77));
    caption += text;
  }
  CHECK_REL(caption / 3000, 14 * std::exp(0.6 * 0.6 / 2), 0.05);  // lognormal mean, barely clipped

  mmbal::generator_options la;
  la.audio_long_stress = true;
  const mmbal::workload longa = gen(mmbal::family::audio, 2, 2000, la);
  for (const auto& s : longa.samples) {
    std::uint64_t audio = 0, windows = 0;
    for (const auto& g : s.segments)
      if (g.modality != mmbal::text_modality) {
        REQUIRE(g.llm_tokens <= 750);
        audio += g.llm_tokens;
        ++windows;
      }
    REQUIRE((windows >= 1 && windows <= 10));
    REQUIRE(audio >= 30 * 25 - 2);  // ≥ 30 s at 25 tokens per second
  }

  // Heavy-tail MP packs: exact length, fewer (longer) documents than the MagiAttention ones.
  mmbal::pack_options heavy, magi;
  heavy.doc_lengths = mmbal::doc_length_source::heavy_tail;
  heavy.docs_per_refill = magi.docs_per_refill = 5000;
  mmbal::pack_generator ph(mmbal::pack_layout::mp, 32768, 3, data(), heavy),
      pm(mmbal::pack_layout::mp, 32768, 3, data(), magi);
  double docs_h = 0, docs_m = 0;
  for (int p = 0; p < 30; ++p) {
    const mmbal::workload a = ph.next(), b = pm.next();
    std::uint64_t total = 0;
    for (const auto& d : a.samples) total += d.llm_length();
    REQUIRE(total == 32768);
    docs_h += static_cast<double>(a.samples.size());
    docs_m += static_cast<double>(b.samples.size());
  }
  CHECK(docs_h < 0.5 * docs_m);

  // mm_doc_fraction = 0: the pure-text causal_document control; its mask is block-causal.
  mmbal::generator_options t;
  t.layout = mmbal::pack_layout::mp;
  t.pack_tokens = 32768;
  t.pack.mm_doc_fraction = 0;
  const mmbal::workload text = mmbal::generate(mmbal::family::longctx, t, data());
  CHECK(text.modalities == std::vector<std::string>{"text"});
  double area = 0;
  for (const auto& d : text.samples) {
    REQUIRE(d.segments.size() == 1);
    const double n = d.llm_length();
    area += n * (n + 1) / 2;
  }
  CHECK(mask_area(text) == area);
}

TEST_CASE("generators: tiny MP packs are generated with a bounded piece pool", "[workload][generators][pack]") {
  // Found by fuzz/fuzz_tool (`mmbal generate --family longctx --pack-tokens 99`): a tiny pack
  // cuts every document into tiny pieces, and one refill of the pool (200,000 documents by
  // default) needed billions of them — minutes and gigabytes. With the caps each refill holds
  // at most 64 pieces per document drawn and 512 packs' worth (512 · L pieces; session 13:
  // the first cap alone still made 12.8 M pieces for one 99-token pack), plus the last
  // document's pieces; every pack still sums to exactly its length.
  const std::pair<mmbal::doc_length_source, std::uint32_t> cases[] = {{mmbal::doc_length_source::magiattention, 99},
                                                                      {mmbal::doc_length_source::heavy_tail, 1000}};
  for (const auto& [source, len] : cases) {
    mmbal::pack_options o;
    o.doc_lengths = source;
    mmbal::pack_generator packs(mmbal::pack_layout::mp, len, 5, data(), o);
    for (int p = 0; p < 3; ++p) {
      const mmbal::workload w = packs.next();
      std::uint64_t total = 0;
      for (const mmbal::sample& s : w.samples) total += s.llm_length();
      CHECK(total == len);
      const std::size_t chunk = len / 4, longest_doc = std::size_t{4} << 20;  // heavy tail ≤ 4 Mi
      CHECK(packs.pool_pieces() > 0);
      CHECK(packs.pool_pieces() <= 512 * std::size_t{len} + longest_doc / chunk + 1);
    }
  }
}

TEST_CASE("generators: multi-image variant and video as image", "[workload][generators][variant]") {
  // The image-heavy mix of bench/bench_scaling.cpp (docs/WORKLOADS.md "Variants"): the variant
  // workload is the plain one with blocks of image copies inserted after the text prefix.
  mmbal::generator_options plain;
  plain.video_as_image = true;
  const mmbal::workload base = gen(mmbal::family::omni, 5, 4000, plain);
  mmbal::generator_options o = plain;
  o.multi_image = {.fraction = 0.65, .max_images = 10, .seed = 2026};
  const mmbal::workload w = gen(mmbal::family::omni, 5, 4000, o);

  // Deterministic for a seed; the variant's own seed changes only the additions.
  CHECK(w == gen(mmbal::family::omni, 5, 4000, o));
  mmbal::generator_options other = o;
  other.multi_image.seed = 7;
  CHECK_FALSE(w == gen(mmbal::family::omni, 5, 4000, other));
  // Round trip through JSONL reproduces it (no unused modality names).
  std::stringstream io;
  mmbal::write_jsonl(io, w);
  CHECK(mmbal::read_jsonl(io, "variant", 8) == w);

  // video_as_image: no video modality; the same segments as the plain family, video renamed.
  const mmbal::workload raw = gen(mmbal::family::omni, 5, 4000);
  const auto raw_video = raw.find_modality("video");
  REQUIRE(raw_video);  // the check below would be empty otherwise
  CHECK_FALSE(base.find_modality("video"));
  CHECK_FALSE(w.find_modality("video"));
  const auto image = w.find_modality("image");
  REQUIRE(image);
  REQUIRE(base.samples.size() == raw.samples.size());
  for (std::size_t i = 0; i < raw.samples.size(); ++i) {
    REQUIRE(base.samples[i].segments.size() == raw.samples[i].segments.size());
    for (std::size_t j = 0; j < raw.samples[i].segments.size(); ++j) {
      const mmbal::segment &a = raw.samples[i].segments[j], &b = base.samples[i].segments[j];
      REQUIRE((a.llm_tokens == b.llm_tokens && a.encoder_len == b.encoder_len));
      REQUIRE(base.modalities[b.modality] ==
              (raw.modalities[a.modality] == "video" ? "image" : raw.modalities[a.modality]));
    }
  }

  std::set<std::tuple<std::uint32_t, std::uint32_t>> pool;  // the image segments of the workload
  for (const auto& s : base.samples)
    for (const auto& g : s.segments)
      if (g.modality == *image) pool.emplace(g.llm_tokens, g.encoder_len);
  std::size_t without = 0, without_topped = 0, topped = 0;
  std::vector<std::size_t> added_count(11, 0);
  REQUIRE(w.samples.size() == base.samples.size());
  for (std::size_t i = 0; i < w.samples.size(); ++i) {
    const auto &b = base.samples[i].segments, &v = w.samples[i].segments;
    REQUIRE(v.size() >= b.size());
    const std::size_t k = v.size() - b.size();
    const std::size_t at = b.front().modality == mmbal::text_modality ? 1 : 0;
    // The sample's own segments are unchanged around one block of k image copies.
    REQUIRE(std::equal(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(at), v.begin()));
    REQUIRE(std::equal(b.begin() + static_cast<std::ptrdiff_t>(at), b.end(),
                       v.begin() + static_cast<std::ptrdiff_t>(at + k)));
    for (std::size_t j = at; j < at + k; ++j) {
      REQUIRE(v[j].modality == *image);
      REQUIRE(pool.count({v[j].llm_tokens, v[j].encoder_len}) == 1);  // a copy of an existing image
    }
    const auto have = static_cast<std::size_t>(
        std::count_if(b.begin(), b.end(), [&](const mmbal::segment& g) { return g.modality == *image; }));
    if (k > 0) {
      ++topped;
      REQUIRE(have + k <= 10);  // topped up to U{1..10} images, existing ones counted
    }
    if (have == 0) {  // every chosen sample without images gets 1..10
      ++without;
      if (k > 0) {
        ++without_topped;
        ++added_count[k];
      }
    }
  }
  REQUIRE(without > 1000);
  CHECK(std::abs(static_cast<double>(without_topped) / static_cast<double>(without) - 0.65) < 0.04);
  for (std::size_t k = 1; k <= 10; ++k) {  // U{1..10}: each count about a tenth of the topped-up samples
    INFO(k);
    CHECK(std::abs(static_cast<double>(added_count[k]) / static_cast<double>(without_topped) - 0.1) < 0.03);
  }
  CHECK(topped < w.samples.size() * 0.65);  // samples with ≥ the drawn count keep theirs

  // fraction 0: the plain workload; fraction 1 and max 1: every sample has an image.
  o.multi_image.fraction = 0;
  CHECK(gen(mmbal::family::omni, 5, 4000, o) == base);
  o.multi_image = {.fraction = 1, .max_images = 1, .seed = 3};
  for (const auto& s : gen(mmbal::family::omni, 5, 2000, o).samples) {
    const auto n = std::count_if(s.segments.begin(), s.segments.end(),
                                 [&](const mmbal::segment& g) { return g.modality == *image; });
    REQUIRE(n >= 1);
  }
  // A family without images is left unchanged; the variant works on the other families too.
  mmbal::generator_options a;
  a.multi_image = {.fraction = 0.5, .max_images = 4, .seed = 1};
  CHECK(gen(mmbal::family::audio, 2, 1000, a) == gen(mmbal::family::audio, 2, 1000));
  CHECK_FALSE(gen(mmbal::family::llava, 2, 1000, a) == gen(mmbal::family::llava, 2, 1000));

  // Bad values name the field.
  mmbal::generator_options bad;
  bad.samples = 10;
  for (const double f : {-0.1, 1.5, std::nan("")}) {
    bad.multi_image = {.fraction = f, .max_images = 3, .seed = 1};
    CHECK_THROWS_WITH(mmbal::generate(mmbal::family::omni, bad, data()), Catch::Contains("multi_image.fraction"));
  }
  bad.multi_image = {.fraction = 0.5, .max_images = 257, .seed = 1};
  CHECK_THROWS_WITH(mmbal::generate(mmbal::family::omni, bad, data()), Catch::Contains("257"));
  bad.multi_image = {.fraction = 0.5, .max_images = 0, .seed = 1};
  CHECK_THROWS_WITH(mmbal::generate(mmbal::family::omni, bad, data()), Catch::Contains("max_images"));
}

TEST_CASE("internvl_tiles bounds max_num", "[workload]") {
  // 4e9 hung in the O(max_num²) grid; 65,536 x 65,537 wrapped i·j in 32 bits.
  REQUIRE_THROWS_WITH(mmbal::internvl_tiles(448, 448, 4000000000u), Catch::Contains("max_num 4000000000"));
  REQUIRE_THROWS_AS(mmbal::internvl_tiles(65536, 65537, 70000), mmbal::invalid_input);
  REQUIRE(mmbal::internvl_tiles(448 * 40, 448, 40) == 41);  // 40 x 1 tiles and the thumbnail
}
