#pragma once
/// @file
/// Umbrella of `core/` (docs/DESIGN.md §3, §4): vocabulary types, errors, concepts, the deterministic RNG and the
/// fork-join helper.

#include <mmbal/core/concepts.hpp>
#include <mmbal/core/error.hpp>
#include <mmbal/core/parallel.hpp>
#include <mmbal/core/rng.hpp>
#include <mmbal/core/types.hpp>
