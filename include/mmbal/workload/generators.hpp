#pragma once
/// @file
/// Realistic workload generators: the families (a)–(e) of docs/WORKLOADS.md, ported from
/// its normative Python reference generator (same formulas and mixtures; the random stream is
/// mmbal's portable one from core/rng.hpp, so the samples differ from Python's but follow the
/// same distributions). Lengths come from the real files of `length_data.hpp`.
///
/// How a generated sample becomes segments (docs/DESIGN.md §3), the same for every family:
///   [text: min(text, text_prefix)] [media 1] ... [media k] [text: the rest]
/// i.e. a short prompt prefix (chat template, instruction), then every image / video /
/// audio clip in generation order (images and videos before audio), then the rest of the
/// text (question and answer); a sample without media is a single text segment. Segments
/// with zero LLM tokens are omitted. Modality names:
/// "image", "video" (a frame sequence, one segment per video; "image" with
/// `generator_options::video_as_image`), "audio" (one segment per clip or 30 s window); they
/// are interned in order of first use, so `write_jsonl` + `read_jsonl` reproduce a generated
/// workload exactly. The multi-image variant (`multi_image_options`) adds copies of image
/// segments after the text prefix. Encoder lengths:
/// - InternViT image: tiles × 1,025 patches (448 px tiles, 256 LLM tokens per tile);
/// - LLaVA-1.5 image: 577 patches (576 LLM tokens); anyres: 577 · (1 + k) for 576 · (1 + k);
/// - Qwen2-VL image or video: 4 × LLM tokens patches (2 × 2 merge);
/// - video frames in InternVL style (family b, and family d with the internvl backend):
///   frames × 1,025;
/// - audio: Whisper encoder frames (50 per second; 1,500 per clip when padded to 30 s).
/// Samples are dealt round-robin: sample i has id i and rank i % ranks.
///
/// @see docs/WORKLOADS.md; OrchMLLM §2 (modality composition incoherence), OmniBal §3,
///      Cornstarch §4.3 and Fig. 11 (mask layouts).

#include <mmbal/core/error.hpp>
#include <mmbal/core/rng.hpp>
#include <mmbal/core/types.hpp>
#include <mmbal/workload/length_data.hpp>
#include <mmbal/workload/sample.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mmbal {

/// The generator families of docs/WORKLOADS.md.
enum class family {
  llava,     ///< (a) LLaVA-1.5 instruction tuning: 0/1 image of 576 tokens
  internvl,  ///< (b) InternVL dynamic high resolution, multi-image, video frames
  audio,     ///< (c) LibriSpeech ASR + AIR-Bench-like audio QA
  omni,      ///< (d) three-modality mix with modality composition incoherence
  longctx,   ///< (e) long-context packed sequences (one pack; see generate_pack)
};

/// Layout of a long-context pack (Cornstarch Fig. 11).
enum class pack_layout {
  ep,  ///< encoder-prefixed: one document, modality spans first, then text
  ee,  ///< encoder-embedded: one document, spans at uniformly random text positions
  mp,  ///< multimodal packing: many documents (MagiAttention sampler), each EE-like
};

/// Vision token accounting of family (d).
enum class vision_backend {
  qwen2vl,   ///< Qwen2-VL smart_resize tokens, 4 patches per token
  internvl,  ///< InternVL dynamic_preprocess tiles (max 12), 256 tokens / 1,025 patches per tile
};

/// Variants of family (a) (docs/WORKLOADS.md).
enum class llava_variant {
  v1_5,      ///< LLaVA-1.5 665K instruction mix: 0/1 image of 576 tokens
  anyres,    ///< LLaVA-NeXT anyres: 576·(1 + k) image tokens, k = grid tiles (2..4) of a COCO size
  pretrain,  ///< LCS-558K pretraining: 1 image of 576 tokens + a caption LN(14, 0.6) [3, 77]
};

/// Document-length distribution of MP packs.
enum class doc_length_source {
  magiattention,  ///< the MagiAttention histogram (13.46 M real documents), log-uniform in a bin
  heavy_tail,     ///< docs/WORKLOADS.md's heavier tail: intervals 0–2K ... 2–4M, uniform inside
};

/// "v1.5" | "anyres" | "pretrain". Throws `invalid_input` otherwise.
[[nodiscard]] inline llava_variant parse_llava_variant(std::string_view s) {
  if (s == "v1.5") return llava_variant::v1_5;
  if (s == "anyres") return llava_variant::anyres;
  if (s == "pretrain") return llava_variant::pretrain;
  detail::throw_invalid("unknown llava variant '", s, "' (expected v1.5, anyres or pretrain)");
}

/// "llava" | "internvl" | "audio" | "omni" | "longctx". Throws `invalid_input` otherwise.
[[nodiscard]] inline family parse_family(std::string_view s) {
  if (s == "llava") return family::llava;
  if (s == "internvl") return family::internvl;
  if (s == "audio") return family::audio;
  if (s == "omni") return family::omni;
  if (s == "longctx") return family::longctx;
  detail::throw_invalid("unknown workload family '", s, "' (expected llava, internvl, audio, omni or longctx)");
}

/// The name accepted by `parse_family`.
[[nodiscard]] constexpr std::string_view to_string(family f) noexcept {
  switch (f) {
    case family::llava:
      return "llava";
    case family::internvl:
      return "internvl";
    case family::audio:
      return "audio";
    case family::omni:
      return "omni";
    case family::longctx:
      return "longctx";
  }
  return "?";
}

/// "ep" | "ee" | "mp" (case-insensitive). Throws `invalid_input` otherwise.
[[nodiscard]] inline pack_layout parse_pack_layout(std::string_view s) {
  std::string l(s);
  for (char& c : l) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  if (l == "ep") return pack_layout::ep;
  if (l == "ee") return pack_layout::ee;
  if (l == "mp") return pack_layout::mp;
  detail::throw_invalid("unknown pack layout '", s, "' (expected ep, ee or mp)");
}

/// "qwen2vl" | "internvl". Throws `invalid_input` otherwise.
[[nodiscard]] inline vision_backend parse_vision_backend(std::string_view s) {
  if (s == "qwen2vl") return vision_backend::qwen2vl;
  if (s == "internvl") return vision_backend::internvl;
  detail::throw_invalid("unknown vision backend '", s, "' (expected qwen2vl or internvl)");
}

/// Options of the long-context pack sampler (defaults = the reference generator's).
struct pack_options {
  double chunk_ratio = 0.25;     ///< MP: documents are cut into pieces of ⌊L · chunk_ratio⌋
  double mm_doc_fraction = 0.5;  ///< MP: probability that a document (> 64 tokens) is multimodal
  double ep_span_lo = 0.3;       ///< EP/EE: spans take U(lo, hi) of L
  double ep_span_hi = 0.9;
  double mp_span_lo = 0.2;  ///< MP: spans take U(lo, hi) of a multimodal document
  double mp_span_hi = 0.9;
  /// MP: documents drawn per refill of the piece pool (fewer once the pool holds 64 × this many
  /// pieces or 512 × pack_tokens pieces, which only small packs reach: below ≈ 2 K tokens with
  /// MagiAttention's lengths, ≈ 16 K with the heavy tail)
  std::uint32_t docs_per_refill = 200000;
  /// MP: where document lengths come from. With `mm_doc_fraction = 0` MP packs are the
  /// pure-text `causal_document` control of docs/WORKLOADS.md.
  doc_length_source doc_lengths = doc_length_source::magiattention;
};

/// The multi-image variant of families (a)–(d) (docs/WORKLOADS.md "Variants"; the image-heavy
/// mix of bench/bench_scaling.cpp): each sample is chosen with probability `fraction` and a
/// chosen sample is topped up to U{1..max_images} image segments. Its existing image segments
/// count (none is removed, so it keeps more when it has more); each added one is a copy of an
/// image segment drawn uniformly from the whole generated workload (after `video_as_image`),
/// inserted where the media start: after the leading text segment (the text prefix, or the
/// whole text of a sample without media), or first when the sample starts with a medium.
/// The draws come from their own stream, `make_rng(seed, ranks)`, so the base samples are
/// those of the plain family (seed 2026 and the rank count are the stream bench_scaling
/// used before the variant moved here: its workloads, and their recorded numbers, stay the
/// same). Off when `max_images` is 0 (the default); a workload without image segments is left
/// unchanged.
struct multi_image_options {
  double fraction = 0;           ///< probability that a sample is topped up, in [0, 1]
  std::uint32_t max_images = 0;  ///< a chosen sample gets U{1..max_images} images (≤ 256); 0 = off
  std::uint64_t seed = 2026;     ///< seed of the variant's stream (with the rank count)
};

/// Options of `generate`. Every knob has the default of docs/WORKLOADS.md.
struct generator_options {
  std::uint64_t samples = 0;            ///< number of samples (ignored by longctx, which makes one pack)
  rank_t ranks = 1;                     ///< samples are dealt round-robin: rank = index % ranks (> 0)
  std::uint64_t seed = 0;               ///< the whole workload is a function of (family, options, data)
  std::uint32_t internvl_max_num = 12;  ///< (b) dynamic_preprocess max_num, 1..40
  vision_backend omni_vision = vision_backend::qwen2vl;  ///< (d) vision accounting
  bool whisper_pad_to_30s = false;            ///< (c), (d): audio encoder length 1,500 per clip (vanilla Whisper)
  double p_asr = 0.5;                         ///< (c): probability of an ASR sample (else audio QA), in [0, 1]
  llava_variant llava = llava_variant::v1_5;  ///< (a) variant
  /// (a): text is truncated so the sequence is at most this; 0 = the variant's
  /// model_max_length (2048 for v1.5 and pretrain, 4096 for anyres). Must be ≥ the largest
  /// image (576 tokens; 2,880 for anyres).
  std::uint32_t llava_max_len = 0;
  /// (c) stress variant: every clip lasts U(30, 300) s and is cut into 30 s windows (≤ 750
  /// tokens each); ASR text follows the whole duration.
  bool audio_long_stress = false;
  std::uint32_t text_prefix = 16;  ///< text tokens placed before the media (segment order)
  /// (d) task weights (need not sum to 1; non-negative, not all 0), in the order text_only,
  /// image_text, multi_image_video, asr, audio_qa, image_audio, long_audio_text. Change them
  /// over steps for a curriculum drift, or raise long_audio_text / multi_image_video to 0.15
  /// for the heavy-tail setting of docs/WORKLOADS.md.
  std::array<double, 7> omni_task_weights{0.15, 0.30, 0.10, 0.15, 0.15, 0.10, 0.05};
  /// (a)–(d): video segments are named "image" (one vision encoder for frames and images, as
  /// in Qwen2-VL), so the vision work is one orchestrator phase instead of two.
  bool video_as_image = false;
  multi_image_options multi_image{};     ///< (a)–(d) multi-image variant (off by default)
  pack_layout layout = pack_layout::mp;  ///< (e) layout
  std::uint32_t pack_tokens = 65536;     ///< (e) pack length L
  pack_options pack{};                   ///< (e) sampler options
};

namespace detail {

inline constexpr std::uint32_t internvit_patches_per_tile = 1025;
inline constexpr std::uint32_t internvl_tokens_per_tile = 256;
inline constexpr std::uint32_t llava_image_tokens = 576;
inline constexpr std::uint32_t llava_image_patches = 577;
inline constexpr std::uint32_t qwen2vl_patches_per_token = 4;
inline constexpr std::uint32_t video_tokens_per_frame = 196;
inline constexpr std::uint32_t whisper_padded_frames = 1500;

/// Python's round(): to nearest, ties to even (independent of the FPU rounding mode).
[[nodiscard]] inline double round_half_even(double x) {
  const double f = std::floor(x);
  const double diff = x - f;
  if (diff > 0.5) return f + 1;
  if (diff < 0.5) return f;
  return std::fmod(f, 2.0) == 0 ? f : f + 1;
}

/// Python's a // b for b > 0.
[[nodiscard]] constexpr std::int64_t floor_div(std::int64_t a, std::int64_t b) noexcept {
  const std::int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

[[nodiscard]] inline std::uint32_t lognormal_int(rng_engine& g, double median, double sigma, std::uint32_t lo,
                                                 std::uint32_t hi) {
  const double x = round_half_even(lognormal(g, median, sigma));
  return static_cast<std::uint32_t>(std::min<double>(hi, std::max<double>(lo, x)));
}

/// The aspect-ratio grid of InternVL's dynamic_preprocess for one max_num: every (i, j) with
/// min_num ≤ i·j ≤ max_num, sorted by i·j (ties by (i, j); the result depends only on i·j
/// within a tie, so the order inside a tie does not matter).
[[nodiscard]] inline std::vector<std::pair<std::uint32_t, std::uint32_t>> internvl_ratios(std::uint32_t max_num,
                                                                                          std::uint32_t min_num = 1) {
  std::vector<std::pair<std::uint32_t, std::uint32_t>> r;
  for (std::uint32_t i = 1; i <= max_num; ++i)
    for (std::uint32_t j = 1; j <= max_num; ++j)
      if (i * j >= min_num && i * j <= max_num) r.emplace_back(i, j);
  std::stable_sort(r.begin(), r.end(),
                   [](const auto& a, const auto& b) { return a.first * a.second < b.first * b.second; });
  return r;
}

/// InternVL dynamic_preprocess tile count (internvl_chat/internvl/train/dataset.py) over a
/// precomputed ratio grid; a thumbnail tile is added when more than one tile is used.
[[nodiscard]] inline std::uint32_t internvl_tiles(std::uint32_t w, std::uint32_t h,
                                                  std::span<const std::pair<std::uint32_t, std::uint32_t>> ratios,
                                                  bool thumbnail = true, double size = 448) {
  const double ar = static_cast<double>(w) / static_cast<double>(h);
  double best = std::numeric_limits<double>::infinity();
  std::pair<std::uint32_t, std::uint32_t> br{1, 1};
  const double area = static_cast<double>(w) * static_cast<double>(h);
  for (const auto& r : ratios) {
    const double d = std::abs(ar - static_cast<double>(r.first) / static_cast<double>(r.second));
    if (d < best) {
      best = d;
      br = r;
    } else if (d == best && area > 0.5 * size * size * r.first * r.second) {
      br = r;
    }
  }
  const std::uint32_t b = br.first * br.second;
  return thumbnail && b != 1 ? b + 1 : b;
}

}  // namespace detail

/// InternVL `dynamic_preprocess` tile count of a w × h image with at most `max_num` tiles
/// (plus a thumbnail when more than one tile). O(max_num²). Throws for zero sizes or a max_num
/// outside [1, 40] (InternVL's configurations use 6 to 40; the generator takes the same range).
[[nodiscard]] inline std::uint32_t internvl_tiles(std::uint32_t w, std::uint32_t h, std::uint32_t max_num = 12) {
  if (w == 0 || h == 0 || max_num == 0 || max_num > 40)
    detail::throw_invalid("internvl_tiles: bad size ", w, "x", h, " or max_num ", max_num, " (expected 1 to 40)");
  return detail::internvl_tiles(w, h, detail::internvl_ratios(max_num));
}

/// Qwen2-VL `smart_resize` LLM token count of a w × h image: (H/28)·(W/28) after resizing to
/// multiples of 28 with the pixel count in [4·28², 16384·28²]. O(1).
[[nodiscard]] inline std::uint32_t qwen2vl_image_tokens(std::uint32_t w, std::uint32_t h) {
  constexpr double factor = 28, min_pixels = 4 * 28 * 28, max_pixels = 16384.0 * 28 * 28;
  if (w == 0 || h == 0) detail::throw_invalid("qwen2vl_image_tokens: bad size ", w, "x", h);
  const double H = h, W = w;
  double hb = std::max(factor, detail::round_half_even(H / factor) * factor);
  double wb = std::max(factor, detail::round_half_even(W / factor) * factor);
  if (hb * wb > max_pixels) {
    const double beta = std::sqrt(H * W / max_pixels);
    hb = std::floor(H / beta / factor) * factor;
    wb = std::floor(W / beta / factor) * factor;
  } else if (hb * wb < min_pixels) {
    const double beta = std::sqrt(min_pixels / (H * W));
    hb = std::ceil(H * beta / factor) * factor;
    wb = std::ceil(W * beta / factor) * factor;
  }
  return static_cast<std::uint32_t>(hb / factor) * static_cast<std::uint32_t>(wb / factor);
}

/// Whisper / Qwen2-Audio accounting of one clip (16 kHz, 10 ms mel hop, conv stride 2,
/// average pool 2): mel = ⌊seconds·16000⌋ // 160, encoder frames = (mel − 1) // 2 + 1,
/// LLM tokens = (frames − 2) // 2 + 1 (about 25 per second).
struct audio_clip {
  std::uint32_t enc_frames = 0;  ///< true Whisper encoder length (1,500 when padded)
  std::uint32_t tokens = 0;      ///< Qwen2-Audio LLM tokens
};

/// The accounting of a clip of `seconds` (≥ 0, at most 2^31 / 16000 s); `pad_to_30s` sets the
/// encoder length to 1,500 frames as vanilla Whisper pads every clip to 30 s. O(1).
[[nodiscard]] inline audio_clip audio_item(double seconds, bool pad_to_30s = false) {
  if (!(seconds >= 0) || seconds > 100000) detail::throw_invalid("audio_item: bad duration ", seconds, " s");
  const auto mel = static_cast<std::int64_t>(seconds * 16000.0) / 160;
  const std::int64_t enc = detail::floor_div(mel - 1, 2) + 1;
  const std::int64_t tok = detail::floor_div(enc - 2, 2) + 1;
  return {pad_to_30s ? detail::whisper_padded_frames : static_cast<std::uint32_t>(std::max<std::int64_t>(0, enc)),
          static_cast<std::uint32_t>(std::max<std::int64_t>(0, tok))};
}

/// LLaVA-NeXT anyres: the number of 336 px grid tiles k of the resolution that
/// `select_best_resolution` picks for a w × h image among the grid pinpoints
/// (336×672, 672×336, 672×672, 1008×336, 336×1008): the largest effective resolution, then
/// the least waste. The image then costs 576·(1 + k) LLM tokens (base view + k tiles). O(1).
[[nodiscard]] inline std::uint32_t anyres_grid_tiles(std::uint32_t w, std::uint32_t h) {
  if (w == 0 || h == 0) detail::throw_invalid("anyres_grid_tiles: bad size ", w, "x", h);
  static constexpr std::array<std::pair<std::uint32_t, std::uint32_t>, 5> pins{
      std::pair{336u, 672u}, std::pair{672u, 336u}, std::pair{672u, 672u}, std::pair{1008u, 336u},
      std::pair{336u, 1008u}};
  std::uint64_t best_eff = 0, best_waste = std::numeric_limits<std::uint64_t>::max();
  std::pair<std::uint32_t, std::uint32_t> best{336, 672};
  const double W = w, H = h;
  for (const auto& [pw, ph] : pins) {
    const double scale = std::min(pw / W, ph / H);
    const auto dw = static_cast<std::uint64_t>(W * scale), dh = static_cast<std::uint64_t>(H * scale);
    const std::uint64_t eff = std::min<std::uint64_t>(dw * dh, std::uint64_t{w} * h);
    const std::uint64_t waste = std::uint64_t{pw} * ph - eff;
    if (eff > best_eff || (eff == best_eff && waste < best_waste)) {
      best_eff = eff;
      best_waste = waste;
      best = {pw, ph};
    }
  }
  return (best.first / 336) * (best.second / 336);
}

namespace detail {

/// One medium of a generated sample before it becomes a segment.
struct gen_media {
  std::uint8_t kind = 0;  // 0 image, 1 video, 2 audio
  std::uint32_t tokens = 0;
  std::uint32_t encoder = 0;
};

/// A generated sample: text tokens and media, in order (the reference's dict).
struct gen_sample {
  std::uint32_t text = 0;
  std::vector<gen_media> media;
  void add(std::uint8_t kind, std::uint32_t tokens, std::uint32_t encoder) { media.push_back({kind, tokens, encoder}); }
};

inline constexpr std::uint8_t k_image = 0, k_video = 1, k_audio = 2;

/// All the family samplers, holding the precomputed tables. Every draw goes through `g`.
class family_sampler {
 public:
  family_sampler(const generator_options& o, const length_data& d) : o_(o), d_(d) {
    if (o.internvl_max_num == 0 || o.internvl_max_num > 40)
      throw_invalid("generator: internvl_max_num ", o.internvl_max_num, " outside [1, 40]");
    if (!(o.p_asr >= 0 && o.p_asr <= 1)) throw_invalid("generator: p_asr ", o.p_asr, " outside [0, 1]");
    const std::uint32_t biggest = o.llava == llava_variant::anyres ? 5 * llava_image_tokens : llava_image_tokens;
    llava_max_len_ = o.llava_max_len ? o.llava_max_len : (o.llava == llava_variant::anyres ? 4096 : 2048);
    if (llava_max_len_ < biggest)
      throw_invalid("generator: llava_max_len ", llava_max_len_, " < ", biggest, " (the largest image)");
    if (d.librispeech_train.empty() || d.librispeech_test.empty() || d.omnibal.empty() || d.coco_sizes.empty())
      throw_invalid("generator: length data not loaded (use load_length_data)");
    double acc_w = 0;
    for (std::size_t k = 0; k < o.omni_task_weights.size(); ++k) {
      const double x = o.omni_task_weights[k];
      if (!(x >= 0) || !std::isfinite(x))
        throw_invalid("generator: omni task weight ", k, " = ", x, " is not a finite non-negative number");
      omni_cum_[k] = acc_w += x;
    }
    if (!(acc_w > 0)) throw_invalid("generator: omni task weights are all zero");
    if (!std::isfinite(acc_w))  // 1e308 twice: every draw fell in the first infinite bucket
      throw_invalid("generator: omni task weights sum beyond a double (", acc_w, "); scale them down");
    const std::uint32_t top = std::max<std::uint32_t>(o.internvl_max_num, 12);
    ratios_.resize(top + 1);
    for (std::uint32_t m = 1; m <= top; ++m) ratios_[m] = internvl_ratios(m);
    double acc = 0;
    for (std::uint32_t n = 2; n <= 16; ++n) {
      acc += std::pow(static_cast<double>(n), -1.5);
      multi16_.push_back(acc);
      if (n <= 8) multi8_.push_back(acc);
    }
  }

  [[nodiscard]] image_size coco(rng_engine& g) const { return d_.coco_sizes[choose_cumulative(g, d_.coco_cumulative)]; }
  [[nodiscard]] std::uint32_t tiles(image_size s, std::uint32_t max_num) const {
    return internvl_tiles(s.width, s.height, ratios_[max_num]);
  }

  [[nodiscard]] gen_media audio_media(double seconds) const {
    const audio_clip c = audio_item(seconds, o_.whisper_pad_to_30s);
    return {k_audio, c.tokens, c.enc_frames};
  }

  // Long audio in ≤ 30 s windows, each encoded separately (reference audio_items_chunked).
  void chunked_audio(gen_sample& s, double seconds) const {
    for (double left = seconds; left > 1e-6;) {
      const double w = std::min(30.0, left);
      s.media.push_back(audio_media(w));
      left -= w;
    }
  }
  void add_audio(gen_sample& s, double seconds) const {
    if (o_.audio_long_stress)  // the reference keeps a 32 s LibriSpeech utterance whole otherwise
      chunked_audio(s, seconds);
    else
      s.media.push_back(audio_media(seconds));
  }

  // (a) LLaVA-1.5 665K mixture and its variants.
  gen_sample llava(rng_engine& g) const {
    static constexpr std::array<double, 4> cum{158, 198, 530, 664};
    struct grp {
      bool image;
      double median, sigma;
      std::uint32_t lo, hi;
    };
    static constexpr std::array<grp, 4> groups{grp{true, 220, 0.55, 40, 1400}, grp{false, 900, 0.85, 40, 2048},
                                               grp{true, 120, 0.70, 30, 1200}, grp{true, 300, 0.50, 60, 1500}};
    gen_sample s;
    if (o_.llava == llava_variant::pretrain) {  // LCS-558K: image + short caption
      s.add(k_image, llava_image_tokens, llava_image_patches);
      s.text = std::min(lognormal_int(g, 14, 0.6, 3, 77), llava_max_len_ - llava_image_tokens);
      return s;
    }
    const grp& gr = groups[choose_cumulative(g, cum)];
    s.text = lognormal_int(g, gr.median, gr.sigma, gr.lo, gr.hi);
    std::uint32_t image = 0;
    if (gr.image) {
      std::uint32_t views = 1;  // LLaVA-1.5: the base view only
      if (o_.llava == llava_variant::anyres) {
        const image_size sz = coco(g);
        views += anyres_grid_tiles(sz.width, sz.height);
      }
      image = llava_image_tokens * views;
      s.add(k_image, image, llava_image_patches * views);
    }
    s.text = std::min(s.text, llava_max_len_ - image);  // truncated at model_max_length
    return s;
  }

  // (b) InternVL-like. `task_out` receives the task index (0 doc/chart, 1 natural, 2 multi,
  // 3 video, 4 text) for the internvl backend of (d).
  gen_sample internvl(rng_engine& g, std::uint32_t max_num, int* task_out = nullptr) const {
    static constexpr std::array<double, 5> cum{0.30, 0.65, 0.77, 0.85, 1.00};
    const auto task = static_cast<int>(choose_cumulative(g, cum));
    if (task_out) *task_out = task;
    gen_sample s;
    switch (task) {
      case 0: {  // real OmniBal rows: tiles = vit_num, text = token_num - 256 vit_num
        const auto& rows = d_.omnibal[choose_cumulative(g, d_.omnibal_cumulative)];
        const omnibal_row r = rows[uniform_below(g, rows.size())];
        s.text = r.token_num - internvl_tokens_per_tile * r.vit_num;
        s.add(k_image, internvl_tokens_per_tile * r.vit_num, internvit_patches_per_tile * r.vit_num);
        break;
      }
      case 1: {
        const std::uint32_t t = tiles(coco(g), max_num);
        s.text = lognormal_int(g, 150, 0.8, 20, 2000);
        s.add(k_image, internvl_tokens_per_tile * t, internvit_patches_per_tile * t);
        break;
      }
      case 2: {
        const auto n = static_cast<std::uint32_t>(2 + choose_cumulative(g, multi16_));
        const std::uint32_t per = std::max<std::uint32_t>(1, max_num / n);
        for (std::uint32_t k = 0; k < n; ++k) {
          const std::uint32_t t = tiles(coco(g), per);
          s.add(k_image, internvl_tokens_per_tile * t, internvit_patches_per_tile * t);
        }
        s.text = lognormal_int(g, 300, 0.7, 30, 4000);
        break;
      }
      case 3: {
        static constexpr std::array<std::uint32_t, 3> frames{8, 16, 32};
        const std::uint32_t n = frames[uniform_below(g, 3)];
        s.text = lognormal_int(g, 150, 0.8, 20, 2000);
        s.add(k_video, internvl_tokens_per_tile * n, internvit_patches_per_tile * n);  // 1 tile per frame
        break;
      }
      default:
        s.text = lognormal_int(g, 700, 0.9, 32, 8192);
    }
    return s;
  }

  // (c) LibriSpeech ASR (probability p_asr) or AIR-Bench-like audio QA.
  gen_sample audio(rng_engine& g, double p_asr) const {
    gen_sample s;
    if (uniform01(g) < p_asr) {
      const auto& pool = uniform01(g) < 0.8 ? d_.librispeech_train : d_.librispeech_test;
      const double sec = o_.audio_long_stress ? uniform_real(g, 30.0, 300.0) : pool[uniform_below(g, pool.size())];
      s.text = 20 + static_cast<std::uint32_t>(round_half_even(3.6 * sec));  // prompt + transcript [EST]
      add_audio(s, sec);
      return s;
    }
    static constexpr std::array<double, 4> cum{45, 70, 90, 100};  // speech, sound, music, mixed
    double sec = 0;
    switch (choose_cumulative(g, cum)) {
      case 0:
        sec = std::min(30.0, std::max(1.0, lognormal(g, 6.0, 0.5)));
        break;
      case 1:
        sec = uniform01(g) < 0.5 ? 10.0 : uniform_real(g, 15.0, 30.0);
        break;
      case 2:
        sec = uniform01(g) < 0.7 ? 10.0 : uniform_real(g, 10.0, 30.0);
        break;
      default:
        sec = uniform_real(g, 10.0, 30.0);
    }
    if (uniform01(g) < 0.8)  // single-choice item
      s.text = lognormal_int(g, 45, 0.4, 15, 200) + static_cast<std::uint32_t>(uniform_int(g, 1, 5));
    else  // open-ended chat item
      s.text = lognormal_int(g, 30, 0.5, 8, 200) + lognormal_int(g, 80, 0.8, 5, 800);
    if (o_.audio_long_stress) sec = uniform_real(g, 30.0, 300.0);
    add_audio(s, sec);
    return s;
  }

  // (d) omni mix.
  gen_sample omni(rng_engine& g) const {
    const auto& cum = omni_cum_;
    const bool qwen = o_.omni_vision == vision_backend::qwen2vl;
    const auto img = [&](gen_sample& s) {
      const image_size sz = uniform01(g) < 0.3 ? image_size{1280, 720} : coco(g);
      if (qwen) {
        const std::uint32_t t = qwen2vl_image_tokens(sz.width, sz.height);
        s.add(k_image, t, qwen2vl_patches_per_token * t);
      } else {
        const std::uint32_t t = tiles(sz, 12);
        s.add(k_image, internvl_tokens_per_tile * t, internvit_patches_per_tile * t);
      }
    };
    gen_sample s;
    switch (choose_cumulative(g, cum)) {
      case 0:
        s.text = lognormal_int(g, 700, 0.9, 32, 8192);
        break;
      case 1:
        if (qwen) {
          s.text = lognormal_int(g, 150, 0.8, 20, 2000);
          img(s);
        } else {  // InternVL-style single image: real doc/chart rows or a COCO natural image
          int task = -1;
          do s = internvl(g, 12, &task);
          while (task != 0 && task != 1);
        }
        break;
      case 2:
        if (uniform01(g) < 0.5) {
          const auto n = 2 + choose_cumulative(g, multi8_);
          for (std::size_t k = 0; k < n; ++k) img(s);
          s.text = lognormal_int(g, 300, 0.7, 30, 4000);
        } else {  // LLaVA-Video-178K duration buckets, 1 fps, 4..64 frames of 196 tokens
          static constexpr std::array<double, 4> bucket{0.45, 0.65, 0.83, 1.00};
          static constexpr std::array<double, 5> edge{5, 30, 60, 120, 180};
          const std::size_t b = choose_cumulative(g, bucket);
          const double secs = uniform_real(g, edge[b], edge[b + 1]);
          const auto frames = static_cast<std::uint32_t>(std::min(64.0, std::max(4.0, std::floor(secs))));
          const std::uint32_t tok = video_tokens_per_frame * frames;
          s.add(k_video, tok, qwen ? qwen2vl_patches_per_token * tok : internvit_patches_per_tile * frames);
          s.text = lognormal_int(g, 200, 0.8, 20, 3000);
        }
        break;
      case 3:
        s = audio(g, 1.0);
        break;
      case 4:
        s = audio(g, 0.0);
        break;
      case 5:
        s.text = lognormal_int(g, 400, 0.7, 30, 2000);
        img(s);
        s.media.push_back(audio_media(uniform_real(g, 5.0, 30.0)));
        break;
      default: {  // long audio, 30 s .. 5 min, in 30 s windows
        s.text = lognormal_int(g, 1000, 0.6, 100, 6000);
        chunked_audio(s, uniform_real(g, 30.0, 300.0));
      }
    }
    return s;
  }

 private:
  const generator_options& o_;
  const length_data& d_;
  std::vector<std::vector<std::pair<std::uint32_t, std::uint32_t>>> ratios_;  // [max_num]
  std::vector<double> multi16_, multi8_;  // cumulative n^-1.5 for n = 2..16 and 2..8
  std::array<double, 7> omni_cum_{};      // cumulative omni task weights
  std::uint32_t llava_max_len_ = 2048;
};

/// Appends a generated sample as segments: prefix text, media, rest of the text.
inline void append_sample(workload& w, const gen_sample& g, std::uint64_t index, rank_t ranks,
                          std::uint32_t text_prefix, std::array<modality_id, 3>& ids, bool video_as_image = false) {
  static constexpr std::array<std::string_view, 3> names{"image", "video", "audio"};
  sample s;
  s.id = index;
  s.rank = static_cast<rank_t>(index % ranks);
  bool any_media = false;
  for (const gen_media& m : g.media) any_media = any_media || m.tokens > 0;
  // Without media the text stays one segment (no prefix split).
  const std::uint32_t head = any_media ? std::min(g.text, text_prefix) : g.text;
  if (head) s.segments.push_back({text_modality, head, head});
  for (const gen_media& m : g.media) {
    if (m.tokens == 0) continue;  // e.g. a sub-40 ms audio remainder: nothing reaches the LLM
    const std::uint8_t kind = video_as_image && m.kind == k_video ? k_image : m.kind;
    if (ids[kind] == 0) ids[kind] = w.intern_modality(names[kind]);
    s.segments.push_back({ids[kind], m.tokens, m.encoder});
  }
  if (g.text > head) s.segments.push_back({text_modality, g.text - head, g.text - head});
  w.samples.push_back(std::move(s));
}

inline constexpr std::uint32_t max_multi_images = 256;

/// The multi-image variant (see `multi_image_options`) on a generated workload.
/// O(image segments + samples × max_images × segments per sample).
inline void add_images(workload& w, const multi_image_options& m, rank_t ranks) {
  const auto image = w.find_modality("image");
  if (m.max_images == 0 || !image) return;
  std::vector<segment> pool;
  for (const sample& s : w.samples)
    for (const segment& g : s.segments)
      if (g.modality == *image) pool.push_back(g);
  if (pool.empty()) return;
  rng_engine g = make_rng(m.seed, ranks);
  for (sample& s : w.samples) {
    if (uniform01(g) >= m.fraction) continue;
    const auto want = static_cast<std::size_t>(uniform_int(g, 1, m.max_images));
    const auto have = static_cast<std::size_t>(
        std::count_if(s.segments.begin(), s.segments.end(), [&](const segment& x) { return x.modality == *image; }));
    const std::ptrdiff_t at = !s.segments.empty() && s.segments.front().modality == text_modality ? 1 : 0;
    for (std::size_t k = have; k < want; ++k)
      s.segments.insert(s.segments.begin() + at, pool[uniform_below(g, pool.size())]);
  }
}

}  // namespace detail

/// Generates one long-context pack after another from one seeded stream (family (e)).
///
/// Each pack is a workload whose samples are its documents in sequence order (sample i = the
/// i-th document, id i, rank 0); a document's segments are in sequence order with modality
/// spans named "image", "audio", "video" (encoder length = LLM length: the mask only needs
/// LLM positions). The LLM lengths of a pack sum to exactly `pack_tokens`.
/// - EP: one document; modality spans fill ⌊L·U(0.3, 0.9)⌋ tokens and come first, then text.
/// - EE: the same with each span inserted at a uniformly random text position.
/// - MP: documents from MagiAttention's sampler (documents drawn from the histogram, cut
///   into pieces of ⌊L/4⌋ plus a tail, the pieces shuffled and packed in order; a piece
///   that overflows is cut and its remainder opens the next pack); a document longer than
///   64 tokens is multimodal with probability 1/2, its spans filling ⌊d·U(0.2, 0.9)⌋ tokens
///   in the EE layout.
/// Span sampler: image 0.5 (256 × InternVL tiles of a COCO size, max 12 tiles), audio 0.3
/// (Qwen2-Audio tokens of U(2, 30) s), video 0.2 (196 × U{8..64}); a span is cut to the
/// remaining budget.
/// Cost: O(L / smallest span) per EP/EE pack; MP O(documents) per pack plus
/// O(min(pieces of docs_per_refill documents, 64 · docs_per_refill, 512 · L)) per refill of
/// the piece pool, which serves at least 512 packs when the last cap applies.
/// @see Cornstarch §4.3, Fig. 11; MagiAttention exps/dist_attn/benchmark/utils.py.
class pack_generator {
 public:
  /// Throws `invalid_input` for pack_tokens == 0, a piece size ⌊L · chunk_ratio⌋ of 0 (MP),
  /// fractions outside [0, 1] or lo > hi, or docs_per_refill == 0.
  pack_generator(pack_layout layout, std::uint32_t pack_tokens, std::uint64_t seed, const length_data& data,
                 pack_options options = {})
      : layout_(layout),
        len_(pack_tokens),
        o_(options),
        d_(data),
        g_(make_rng(seed, 5, static_cast<std::uint64_t>(layout))),
        ratios12_(detail::internvl_ratios(12)) {
    if (pack_tokens == 0) detail::throw_invalid("pack generator: pack_tokens = 0");
    const auto frac = [](double x) { return x >= 0 && x <= 1; };
    if (!frac(o_.mm_doc_fraction) || !frac(o_.ep_span_lo) || !frac(o_.ep_span_hi) || !frac(o_.mp_span_lo) ||
        !frac(o_.mp_span_hi) || o_.ep_span_lo > o_.ep_span_hi || o_.mp_span_lo > o_.mp_span_hi)
      detail::throw_invalid("pack generator: span fractions must lie in [0, 1] with lo <= hi");
    if (!(o_.chunk_ratio > 0 && o_.chunk_ratio <= 1))
      detail::throw_invalid("pack generator: chunk_ratio ", o_.chunk_ratio, " outside (0, 1]");
    chunk_ = static_cast<std::uint32_t>(static_cast<double>(pack_tokens) * o_.chunk_ratio);
    if (layout == pack_layout::mp && chunk_ == 0)
      detail::throw_invalid("pack generator: pack_tokens ", pack_tokens, " x chunk_ratio ", o_.chunk_ratio,
                            " gives an empty piece size");
    if (o_.docs_per_refill == 0) detail::throw_invalid("pack generator: docs_per_refill = 0");
    if (data.coco_sizes.empty() || data.magi_bins.empty())
      detail::throw_invalid("pack generator: length data not loaded (use load_length_data)");
  }

  /// Pieces drawn by the last refill of the MP piece pool (0 before the first; diagnostics):
  /// at most min(64 · docs_per_refill, 512 · pack_tokens) plus the last document's pieces.
  [[nodiscard]] std::size_t pool_pieces() const noexcept { return pieces_.size(); }

  /// The next pack.
  [[nodiscard]] workload next() {
    workload w;
    ids_ = {0, 0, 0};
    if (layout_ != pack_layout::mp) {
      const auto budget =
          static_cast<std::uint32_t>(static_cast<double>(len_) * uniform_real(g_, o_.ep_span_lo, o_.ep_span_hi));
      emit_document(w, 0, len_, budget, layout_ == pack_layout::ep);
      return w;
    }
    std::uint64_t doc = 0;
    for (const std::uint32_t d : magi_doc_lengths()) {
      std::uint32_t budget = 0;
      if (uniform01(g_) < o_.mm_doc_fraction && d > 64)
        budget = static_cast<std::uint32_t>(static_cast<double>(d) * uniform_real(g_, o_.mp_span_lo, o_.mp_span_hi));
      emit_document(w, doc++, d, budget, false);
    }
    return w;
  }

 private:
  struct span {
    std::uint8_t kind;
    std::uint32_t tokens;
  };

  span draw_span() {
    const double u = uniform01(g_);
    if (u < 0.5) {
      const image_size s = d_.coco_sizes[choose_cumulative(g_, d_.coco_cumulative)];
      return {detail::k_image, 256 * detail::internvl_tiles(s.width, s.height, ratios12_)};
    }
    if (u < 0.8) return {detail::k_audio, audio_item(uniform_real(g_, 2.0, 30.0)).tokens};
    return {detail::k_video, 196 * static_cast<std::uint32_t>(uniform_int(g_, 8, 64))};
  }

  void push(workload& w, sample& s, std::uint8_t kind, std::uint32_t n, bool text) {
    static constexpr std::array<std::string_view, 3> names{"image", "video", "audio"};
    if (n == 0) return;
    if (text) {
      s.segments.push_back({text_modality, n, n});
      return;
    }
    if (ids_[kind] == 0) ids_[kind] = w.intern_modality(names[kind]);
    s.segments.push_back({ids_[kind], n, n});
  }

  // One document of `len` tokens whose spans fill `budget` tokens, prefixed (EP) or embedded.
  void emit_document(workload& w, std::uint64_t doc, std::uint32_t len, std::uint32_t budget, bool prefixed) {
    parts_.clear();
    for (std::uint32_t left = budget; left > 0;) {
      span p = draw_span();
      p.tokens = std::min(p.tokens, left);
      if (p.tokens == 0) continue;  // cannot happen with the default sampler (≥ 49 tokens)
      parts_.push_back(p);
      left -= p.tokens;
    }
    const std::uint32_t text = len - budget;
    sample s;
    s.id = doc;
    s.rank = 0;
    if (prefixed) {
      for (const span& p : parts_) push(w, s, p.kind, p.tokens, false);
      push(w, s, 0, text, true);
    } else {
      cuts_.clear();
      for (std::size_t k = 0; k < parts_.size(); ++k)
        cuts_.push_back(static_cast<std::uint32_t>(uniform_int(g_, 0, text)));
      std::sort(cuts_.begin(), cuts_.end());
      std::uint32_t prev = 0;
      for (std::size_t k = 0; k < parts_.size(); ++k) {
        push(w, s, 0, cuts_[k] - prev, true);
        push(w, s, parts_[k].kind, parts_[k].tokens, false);
        prev = cuts_[k];
      }
      push(w, s, 0, text - prev, true);
    }
    w.samples.push_back(std::move(s));
  }

  std::uint32_t magi_doc_len() {
    if (o_.doc_lengths == doc_length_source::heavy_tail) {
      static constexpr std::array<double, 12> cum{0.16, 0.21, 0.25, 0.31, 0.39, 0.60,
                                                  1.00, 1.20, 1.25, 1.29, 1.30, 1.31};
      const std::size_t k = choose_cumulative(g_, cum);
      const std::uint32_t lo = k == 0 ? 1 : 2048u << (k - 1), hi = 2048u << k;  // 0–2K, 2–4K, ..., 2–4M
      return static_cast<std::uint32_t>(uniform_int(g_, lo, hi));
    }
    const doc_length_bin& b = d_.magi_bins[choose_cumulative(g_, d_.magi_cumulative)];
    const double x =
        std::exp(uniform_real(g_, std::log(static_cast<double>(b.lo)), std::log(static_cast<double>(b.hi))));
    return static_cast<std::uint32_t>(detail::round_half_even(x));
  }

  std::vector<std::uint32_t> magi_doc_lengths() {
    std::vector<std::uint32_t> out;
    std::uint32_t left = len_;
    if (tail_) {
      const std::uint32_t t = std::min(tail_, left);
      out.push_back(t);
      left -= t;
      tail_ -= t;
    }
    while (left > 0) {
      if (next_piece_ >= pieces_.size()) {
        pieces_.clear();
        // A pool of at most max_pool pieces (plus the last document's): small packs cut long
        // documents into very many pieces (a 2 M-token document is 80,000 pieces of a 99-token
        // pack), which made one refill take minutes and gigabytes (found by fuzz/fuzz_tool).
        // Caps: 64 pieces per document on average, and pool_packs packs' worth (a pack takes at
        // most L pieces, so a refill serves ≥ 512 packs and costs O(L) per pack). Neither binds
        // for realistic packs, which stay unchanged: a refill of 200,000 documents holds ≈ 0.45 M
        // pieces with MagiAttention's lengths at 4 K tokens (cap 2.1 M), ≈ 3.7 M with the heavy
        // tail at 32 K (cap 12.8 M) and ≈ 7.2 M at 16 K (cap 8.4 M); only MagiAttention packs
        // below ≈ 2 K tokens and heavy-tail packs below ≈ 16 K tokens reach a cap.
        const std::size_t max_pool = std::min(std::size_t{64} * o_.docs_per_refill, pool_packs * std::size_t{len_});
        for (std::uint32_t k = 0; k < o_.docs_per_refill && pieces_.size() < max_pool; ++k) {
          const std::uint32_t d = magi_doc_len();
          pieces_.insert(pieces_.end(), d / chunk_, chunk_);
          if (d % chunk_) pieces_.push_back(d % chunk_);
        }
        shuffle(std::span<std::uint32_t>(pieces_), g_);
        next_piece_ = 0;
      }
      const std::uint32_t p = pieces_[next_piece_++];
      if (p <= left) {
        out.push_back(p);
        left -= p;
      } else {
        out.push_back(left);
        tail_ = p - left;
        left = 0;
      }
    }
    return out;
  }

  static constexpr std::size_t pool_packs = 512;  // a refill holds at most this many packs' worth of pieces

  pack_layout layout_;
  std::uint32_t len_;
  pack_options o_;
  const length_data& d_;
  rng_engine g_;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> ratios12_;
  std::uint32_t chunk_ = 0;
  std::vector<std::uint32_t> pieces_;
  std::size_t next_piece_ = 0;
  std::uint32_t tail_ = 0;
  std::vector<span> parts_;
  std::vector<std::uint32_t> cuts_;
  std::array<modality_id, 3> ids_{};
};

/// One long-context pack (the first of `pack_generator(layout, pack_tokens, seed, data)`):
/// documents as samples in order, LLM lengths summing to exactly `pack_tokens`, all on rank 0.
/// @see pack_generator for the layouts and the costs.
[[nodiscard]] inline workload generate_pack(pack_layout layout, std::uint32_t pack_tokens, std::uint64_t seed,
                                            const length_data& data, const pack_options& options = {}) {
  return pack_generator(layout, pack_tokens, seed, data, options).next();
}

/// Generates a workload of family `f` (docs/WORKLOADS.md (a)–(e)): `options.samples`
/// samples, sample i with id i on rank i % options.ranks, segments as described in the file
/// comment. For `family::longctx` it is one pack of `options.layout` and
/// `options.pack_tokens` (`samples` is ignored; document i is dealt to rank i % ranks).
///
/// Families (a)–(d) apply `options.video_as_image` and then the multi-image variant
/// (`options.multi_image`); longctx ignores both.
///
/// Deterministic: the result is a function of (f, options, data) only, on every platform
/// with IEEE doubles and a correctly rounding libm for exp/log/sqrt/cos; and sample i does not
/// depend on `options.samples` (a longer workload extends a shorter one) unless the
/// multi-image variant is on (its copies are drawn from the whole workload).
/// Cost: O(samples × segments per sample); (d) with the internvl backend retries (b) draws.
/// Throws `invalid_input` for ranks == 0, samples > 2^32 − 1 or an option out of range
/// (multi_image: fraction outside [0, 1], max_images > 256, fraction > 0 with max_images 0).
[[nodiscard]] inline workload generate(family f, const generator_options& options, const length_data& data) {
  if (options.ranks == 0) detail::throw_invalid("generate: ranks = 0");
  const multi_image_options& mi = options.multi_image;
  if (!(mi.fraction >= 0 && mi.fraction <= 1))
    detail::throw_invalid("generate: multi_image.fraction = ", mi.fraction, " outside [0, 1]");
  if (mi.max_images > detail::max_multi_images)
    detail::throw_invalid("generate: multi_image.max_images = ", mi.max_images, " exceeds ", detail::max_multi_images);
  if (mi.fraction > 0 && mi.max_images == 0)
    detail::throw_invalid("generate: multi_image.fraction = ", mi.fraction, " needs max_images >= 1");
  if (f == family::longctx) {
    workload w = generate_pack(options.layout, options.pack_tokens, options.seed, data, options.pack);
    for (std::size_t i = 0; i < w.samples.size(); ++i) w.samples[i].rank = static_cast<rank_t>(i % options.ranks);
    return w;
  }
  if (options.samples > std::numeric_limits<std::uint32_t>::max())
    detail::throw_invalid("generate: samples = ", options.samples, " exceeds 2^32 - 1");
  const detail::family_sampler sampler(options, data);
  rng_engine g = make_rng(options.seed, static_cast<std::uint64_t>(f) + 1);
  workload w;
  w.samples.reserve(options.samples);
  std::array<modality_id, 3> ids{0, 0, 0};
  for (std::uint64_t i = 0; i < options.samples; ++i) {
    detail::gen_sample s;
    switch (f) {
      case family::llava:
        s = sampler.llava(g);
        break;
      case family::internvl:
        s = sampler.internvl(g, options.internvl_max_num);
        break;
      case family::audio:
        s = sampler.audio(g, options.p_asr);
        break;
      default:
        s = sampler.omni(g);
        break;
    }
    detail::append_sample(w, s, i, options.ranks, options.text_prefix, ids, options.video_as_image);
  }
  detail::add_images(w, mi, options.ranks);
  return w;
}

}  // namespace mmbal
