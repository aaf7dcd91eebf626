// refine's extended partner search (refine_options::extended_work): on omni with 8 samples per
// rank and equal counts, the 256 lightest bins hold no improving swap for the heaviest bin while
// farther ones do. The extended search must escape that optimum (and then match or beat `kk`);
// without it the search stops where it started.
#include "conformance.hpp"

#include <mmbal/workload/generators.hpp>
#include <mmbal/workload/length_data.hpp>
#include <mmbal/workload/sample.hpp>

using namespace mmbal;

TEST_CASE("refine: the extended partner search escapes the local optimum of the 256-partner window",
          "[balance][refine]") {
  const rank_t d = 512;
  for (const std::uint64_t seed : {2, 2026}) {
    INFO("seed " << seed);
    generator_options o;
    o.samples = 8 * d;
    o.ranks = d;
    o.seed = seed;
    const std::vector<length_t> w = phase_items_of(generate(family::omni, o, default_length_data()), "llm").weights;
    balance::constraints equal;
    equal.counts.kind = balance::count_cap::mode::equal;
    const cost::tokens c;
    const assignment start = balance::lpt{}(w, d, c, equal);
    const double start_max = test::check_run(start, w, d, c, equal);
    balance::refine_options window_only;
    window_only.extended_work = 0;
    const double window_max = test::check_run(balance::refine(w, start, c, equal, window_only), w, d, c, equal);
    const assignment extended = balance::refine(w, start, c, equal);
    CHECK(extended == balance::refine(w, start, c, equal));  // deterministic
    const double extended_max = test::check_run(extended, w, d, c, equal);
    const double kk_max = test::check_run(balance::karmarkar_karp{}(w, d, c, equal), w, d, c, equal);
    CHECK(window_max == start_max);  // the window alone is stuck at the start
    CHECK(extended_max < start_max);
    CHECK(extended_max <= kk_max);
  }
}
