#pragma once
/// @file
/// Token distributors by name, as the `mmbal` tool (`--distribute`) and the Python module
/// (`distribute_tokens(..., distributor=)`) take them (docs/DESIGN.md §5.4, §6). The library's
/// `distribute_tokens` takes any `token_distributor` object; this closed set of the built-in
/// ones exists for callers that choose by name at run time.

#include <mmbal/context/distribute.hpp>
#include <mmbal/core/error.hpp>

#include <cstdint>
#include <span>
#include <string_view>
#include <variant>

namespace mmbal::spec {

/// A built-in distributor chosen at run time.
using any_distributor = std::variant<lpt_distributor, zigzag_distributor, contiguous_distributor, random_distributor>;

/// The distributor named `name` (`lpt`, `zigzag`, `contiguous`, `random`); `seed` is used by
/// `random`. @throws invalid_input for any other name, naming it.
[[nodiscard]] inline any_distributor parse_distributor(std::string_view name, std::uint64_t seed = 0) {
  if (name == "lpt") return lpt_distributor{};
  if (name == "zigzag") return zigzag_distributor{};
  if (name == "contiguous") return contiguous_distributor{};
  if (name == "random") return random_distributor{seed};
  mmbal::detail::throw_invalid("unknown token distribution '", name, "' (expected lpt, zigzag, contiguous or random)");
}

/// The name of a distributor (inverse of `parse_distributor`).
[[nodiscard]] inline std::string_view distributor_name(const any_distributor& d) {
  constexpr std::string_view names[] = {"lpt", "zigzag", "contiguous", "random"};
  return names[d.index()];
}

/// `distribute_tokens` with a distributor chosen by name.
[[nodiscard]] inline token_distribution distribute_tokens(std::span<const std::uint64_t> block_workloads,
                                                          std::uint64_t tokens, std::uint32_t block, rank_t ranks,
                                                          const any_distributor& d) {
  return std::visit([&](const auto& x) { return mmbal::distribute_tokens(block_workloads, tokens, block, ranks, x); },
                    d);
}

}  // namespace mmbal::spec
