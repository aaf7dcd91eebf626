// Plans must not depend on whether the compiler fuses a * b + c into one FMA instruction
// (docs/DESIGN.md §3 "Determinism"): with FMA, α·l + β·l² rounds once instead of twice, and
// near-ties between bin loads then flip placements, so ranks built with and without
// -march=native would plan differently. mmbal::mmbal carries -ffp-contract=off to every
// consumer. This probe prints a hash of item costs, batch costs and LPT placements under the
// floating-point costs; built twice at -O2 (tests/fp_contract/CMakeLists.txt), without and
// with -mfma, the two hashes must be equal. `probe OTHER` runs OTHER and compares.
#include <mmbal/balance/lpt.hpp>
#include <mmbal/cost/functions.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

struct fnv {
  std::uint64_t h = 1469598103934665603ull;
  void add(std::uint64_t v) {
    h ^= v;
    h *= 1099511628211ull;
  }
  void add(double v) {
    std::uint64_t u = 0;
    std::memcpy(&u, &v, sizeof u);
    add(u);
  }
};

std::string probe_hash() {
  std::mt19937_64 rng(42);
  fnv h;
  const double betas[] = {1.54e-5, 1e-4, 3.3e-5, 0.1, 1.0 / 3};
  for (int t = 0; t < 4000; ++t) {
    const std::size_t n = 4 + rng() % 40;
    const mmbal::rank_t d = static_cast<mmbal::rank_t>(2 + rng() % 6);
    const mmbal::length_t scale = static_cast<mmbal::length_t>(1 + rng() % 1000);
    std::vector<mmbal::length_t> w(n);
    for (auto& x : w) x = static_cast<mmbal::length_t>((1 + rng() % 12) * scale);
    const double beta = betas[rng() % 5];
    const mmbal::cost::attention attention{0.7, beta};
    const mmbal::cost::fitted fitted{beta, 1.0, 0.25};
    const mmbal::cost::padded_attention padded{0.7, beta};
    const mmbal::cost::conv_attention conv{beta};
    for (const mmbal::assignment& a :
         {mmbal::balance::lpt{}(w, d, attention, {}), mmbal::balance::lpt{}(w, d, fitted, {})})
      for (const mmbal::location& l : a.where) h.add(std::uint64_t{l.rank} << 32 | l.slot);
    mmbal::batch_stats s = attention.empty();
    for (const mmbal::length_t x : w) {
      h.add(attention.item(x));
      h.add(fitted.item(x));
      s = attention.add(s, x);
    }
    h.add(attention.value(s));
    h.add(fitted.value(s));
    h.add(padded.value(s));
    h.add(conv.value(s));
  }
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h.h));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
#ifdef MMBAL_PROBE_USES_FMA
  if (!__builtin_cpu_supports("fma")) {
    std::puts("this CPU has no FMA: skipped");
    return 77;
  }
#endif
  const std::string mine = probe_hash();
  if (argc < 2) {
    std::puts(mine.c_str());
    return 0;
  }
  std::FILE* other = popen(argv[1], "r");
  char buffer[64] = {};
  const bool read = other && std::fgets(buffer, sizeof buffer, other);
  if (other) pclose(other);
  const std::string theirs = read ? std::string(buffer, std::strcspn(buffer, "\n")) : "(no output)";
  std::printf("with FMA instructions: %s, without: %s\n", mine.c_str(), theirs.c_str());
  return mine == theirs ? 0 : 1;
}
