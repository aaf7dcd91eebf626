#pragma once
/// @file
/// Umbrella of `sampling/` (docs/DESIGN.md §5.2): ISF (OmniBal) and grouping metrics.

#include <mmbal/sampling/grouping.hpp>
#include <mmbal/sampling/isf.hpp>
