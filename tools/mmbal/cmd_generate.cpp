// `mmbal generate`: writes a realistic workload as JSONL (docs/DESIGN.md §6, docs/WORKLOADS.md).
#include "common.hpp"
#include "tool.hpp"

#include <mmbal/workload/generators.hpp>
#include <mmbal/workload/jsonl.hpp>
#include <mmbal/workload/length_data.hpp>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

namespace {

struct generate_state {
  std::string family;
  std::uint64_t samples = 0;
  bool samples_given = false;
  std::uint32_t ranks = 1;
  std::uint64_t seed = 0;
  std::string data_dir;
  std::string layout = "mp";
  std::uint32_t pack_tokens = 65536;
  std::string output;
  std::uint32_t max_num = 12;
  std::string vision = "qwen2vl";
  bool whisper_pad = false;
  std::uint32_t text_prefix = 16;
  std::vector<double> task_weights;
  std::string llava_variant = "v1.5";
  bool long_audio = false;
  std::string doc_lengths = "magi";
  double mm_doc_fraction = 0.5;
  bool video_as_image = false;
  double multi_image_fraction = 0;
  bool multi_image_fraction_given = false;
  std::uint32_t multi_image_max = 0;
  bool multi_image_max_given = false;
};

int run_generate(const generate_state& s) {
  const mmbal::family f = mmbal::parse_family(s.family);
  mmbal::generator_options o;
  o.ranks = s.ranks;
  o.seed = s.seed;
  o.internvl_max_num = s.max_num;
  o.omni_vision = mmbal::parse_vision_backend(s.vision);
  o.whisper_pad_to_30s = s.whisper_pad;
  o.text_prefix = s.text_prefix;
  if (!s.task_weights.empty()) {
    if (s.task_weights.size() != o.omni_task_weights.size())
      mmbal::detail::throw_invalid("--task-weights: expected ", o.omni_task_weights.size(),
                                   " comma-separated weights, got ", s.task_weights.size());
    std::copy(s.task_weights.begin(), s.task_weights.end(), o.omni_task_weights.begin());
  }
  o.layout = mmbal::parse_pack_layout(s.layout);
  o.llava = mmbal::parse_llava_variant(s.llava_variant);
  o.audio_long_stress = s.long_audio;
  if (s.doc_lengths == "magi")
    o.pack.doc_lengths = mmbal::doc_length_source::magiattention;
  else if (s.doc_lengths == "heavy")
    o.pack.doc_lengths = mmbal::doc_length_source::heavy_tail;
  else
    mmbal::detail::throw_invalid("--doc-lengths '", s.doc_lengths, "': expected magi or heavy");
  if (!(s.mm_doc_fraction >= 0 && s.mm_doc_fraction <= 1))
    mmbal::detail::throw_invalid("--mm-doc-fraction ", s.mm_doc_fraction, " outside [0, 1]");
  o.pack.mm_doc_fraction = s.mm_doc_fraction;
  o.video_as_image = s.video_as_image;
  if (!(s.multi_image_fraction >= 0 && s.multi_image_fraction <= 1))
    mmbal::detail::throw_invalid("--multi-image-fraction ", s.multi_image_fraction, " outside [0, 1]");
  if (s.multi_image_max_given && (s.multi_image_max == 0 || s.multi_image_max > mmbal::detail::max_multi_images))
    mmbal::detail::throw_invalid("--multi-image-max ", s.multi_image_max, " outside 1..",
                                 mmbal::detail::max_multi_images);
  if (s.multi_image_fraction_given != s.multi_image_max_given)
    mmbal::detail::throw_invalid(s.multi_image_fraction_given ? "--multi-image-fraction needs --multi-image-max N"
                                                              : "--multi-image-max needs --multi-image-fraction F");
  o.multi_image.fraction = s.multi_image_fraction;
  o.multi_image.max_images = s.multi_image_max;
  o.pack_tokens = s.pack_tokens;
  (void)mmbal::checked_ranks(s.ranks, "--ranks");
  if (f == mmbal::family::longctx) {
    if (s.pack_tokens == 0) mmbal::detail::throw_invalid("--pack-tokens 0: a pack needs at least one token");
  } else {
    if (!s.samples_given) mmbal::detail::throw_invalid("--samples N is required for family '", s.family, "'");
    if (s.samples == 0) mmbal::detail::throw_invalid("--samples 0: a workload needs at least one sample");
    o.samples = s.samples;
  }
  const mmbal::length_data data = mmbal::load_length_data(mmbal::find_data_dir(s.data_dir));
  const mmbal::workload w = mmbal::generate(f, o, data);
  if (s.output.empty() || s.output == "-") {
    mmbal::write_jsonl(std::cout, w);
    std::cout.flush();
    if (!std::cout) mmbal::detail::throw_runtime("generate: writing to stdout failed");
  } else {
    mmbal::tool::write_file("--output", s.output, [&](std::ostream& out) { mmbal::write_jsonl(out, w); });
  }
  return 0;
}

const bool registered = mmbal::tool::register_command(10, [](CLI::App& app) -> std::function<int()> {
  auto state = std::make_shared<generate_state>();
  auto* sub = app.add_subcommand("generate",
                                 "Write a realistic workload as JSONL (one sample per line; families of "
                                 "docs/WORKLOADS.md). Output is a deterministic function of the options.");
  sub->add_option("--family", state->family,
                  "llava: (a) LLaVA-1.5 665K mix; internvl: (b) InternVL dynamic high-res, multi-image, video; "
                  "audio: (c) LibriSpeech ASR + audio QA; omni: (d) text/image/video/audio mix; "
                  "longctx: (e) one long-context pack, one line per document")
      ->required();
  CLI::Option* samples =
      sub->add_option("--samples", state->samples, "number of samples (required except for longctx, which ignores it)");
  sub->add_option("--ranks", state->ranks, "number of DP ranks; sample i is placed on rank i % ranks (default 1)");
  sub->add_option("--seed", state->seed, "random seed (default 0)");
  sub->add_option("--data-dir", state->data_dir,
                  "directory with the real length files (default: $MMBAL_DATA_DIR, else the build's data/)");
  sub->add_option("--layout", state->layout,
                  "longctx only: ep (spans prefixed), ee (spans embedded) or mp (many documents packed) (default mp)");
  sub->add_option("--pack-tokens", state->pack_tokens, "longctx only: tokens in the pack (default 65536)");
  sub->add_option("--max-num", state->max_num,
                  "internvl only: dynamic_preprocess max tiles per image, 1..40 (default 12)");
  sub->add_option("--vision", state->vision,
                  "omni only: image token accounting, qwen2vl or internvl (default qwen2vl)");
  sub->add_flag(
      "--whisper-pad", state->whisper_pad,
      "audio, omni: audio encoder length 1500 frames per clip (Whisper pads to 30 s) instead of the true length");
  sub->add_option("--text-prefix", state->text_prefix,
                  "text tokens placed before the media in each sample; the rest follows them (default 16)");
  sub->add_option("--task-weights", state->task_weights,
                  "omni only: 7 comma-separated task weights text_only,image_text,multi_image_video,asr,audio_qa,"
                  "image_audio,long_audio_text (default 0.15,0.30,0.10,0.15,0.15,0.10,0.05)")
      ->delimiter(',');
  sub->add_option("--llava-variant", state->llava_variant,
                  "llava only: v1.5 (665K mix), anyres (LLaVA-NeXT, 576 x (1 + grid tiles) image tokens) or pretrain "
                  "(image + short caption) (default v1.5)");
  sub->add_flag("--long-audio", state->long_audio,
                "audio only: stress variant, every clip U(30, 300) s cut into 30 s windows");
  sub->add_option("--doc-lengths", state->doc_lengths,
                  "longctx mp only: document lengths from the MagiAttention histogram (magi) or the heavier "
                  "tail of docs/WORKLOADS.md (heavy) (default magi)");
  sub->add_option("--mm-doc-fraction", state->mm_doc_fraction,
                  "longctx mp only: probability that a document is multimodal; 0 gives pure-text causal "
                  "documents (default 0.5)");
  sub->add_flag("--video-as-image", state->video_as_image,
                "llava, internvl, audio, omni: name video segments image (one vision encoder for frames and images, "
                "as in Qwen2-VL: one orchestrator phase)");
  CLI::Option* multi_fraction = sub->add_option(
      "--multi-image-fraction", state->multi_image_fraction,
      "llava, internvl, audio, omni, with --multi-image-max: probability, in [0, 1], that a sample is topped up to "
      "U{1..max} images (existing images count; added ones copy image segments drawn from the workload and follow "
      "the text prefix; docs/WORKLOADS.md Variants)");
  CLI::Option* multi_max = sub->add_option("--multi-image-max", state->multi_image_max,
                                           "with --multi-image-fraction: at most this many images, 1..256, in a "
                                           "topped-up sample");
  sub->add_option("--output,-o", state->output, "write to FILE instead of stdout");
  return [state, samples, multi_fraction, multi_max] {
    state->samples_given = samples->count() > 0;
    state->multi_image_fraction_given = multi_fraction->count() > 0;
    state->multi_image_max_given = multi_max->count() > 0;
    return run_generate(*state);
  };
});

}  // namespace
