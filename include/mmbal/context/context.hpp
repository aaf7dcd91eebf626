#pragma once
/// @file
/// Umbrella of `context/` (docs/DESIGN.md §5.4): token distribution for context parallelism.

#include <mmbal/context/distribute.hpp>
