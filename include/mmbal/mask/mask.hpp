#pragma once
/// @file
/// Umbrella of the bitfield attention mask component (docs/DESIGN.md §5.3).

#include <mmbal/mask/bitfield.hpp>
#include <mmbal/mask/block_mask.hpp>
#include <mmbal/mask/dense.hpp>
#include <mmbal/mask/predicate.hpp>
#include <mmbal/mask/workloads.hpp>
