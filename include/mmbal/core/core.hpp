#pragma once
/// @file
/// Umbrella of `core/` (docs/DESIGN.md §3, §4): vocabulary types, errors, concepts, the deterministic RNG, the
/// fork-join helper and the opt-in huge-page heap of one-shot planners.

#include <mmbal/core/concepts.hpp>
#include <mmbal/core/error.hpp>
#include <mmbal/core/huge_page_heap.hpp>
#include <mmbal/core/parallel.hpp>
#include <mmbal/core/rng.hpp>
#include <mmbal/core/types.hpp>
