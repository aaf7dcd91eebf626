#pragma once
// The orchestrator benchmarks' workload (bench/RESULTS.md's "2,560 ranks × 60 samples" and the
// scaling curve), defined once for bench_orchestrate, bench_refine and bench_scaling.
#include <mmbal/core/types.hpp>
#include <mmbal/workload/generators.hpp>
#include <mmbal/workload/length_data.hpp>
#include <mmbal/workload/sample.hpp>

#include <cstdint>

namespace mmbal::bench {

/// One omni step of `ranks` × `samples_per_rank` samples, seed 1, video in the image phase (the
/// same ViT in Qwen2-VL), so three phases: image, audio, llm. `image_heavy`: 65 % of the samples
/// are topped up to U{1..10} images (3.8 images per sample), the image-heavy mix.
inline workload omni_step(rank_t ranks, std::uint64_t samples_per_rank = 60, bool image_heavy = false) {
  generator_options o;
  o.samples = samples_per_rank * ranks;
  o.ranks = ranks;
  o.seed = 1;
  o.video_as_image = true;
  if (image_heavy) o.multi_image = {.fraction = 0.65, .max_images = 10, .seed = 2026};
  return generate(family::omni, o, default_length_data());
}

}  // namespace mmbal::bench
