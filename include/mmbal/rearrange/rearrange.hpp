#pragma once
/// @file
/// Umbrella of `rearrange/` (docs/DESIGN.md §5.5): rearrangements and their composition, per-rank
/// all-to-all plans with fingerprints, the pack/unpack reference executors, encoder→LLM
/// subsequence assembly, and node-wise relabeling.
/// @see OrchMLLM §5.2 (All-to-All Batch Communicator, Alg. 3), §6 (composition).

#include <mmbal/rearrange/alltoall_plan.hpp>
#include <mmbal/rearrange/composition.hpp>
#include <mmbal/rearrange/pack.hpp>
#include <mmbal/rearrange/rearrangement.hpp>
#include <mmbal/rearrange/relabel.hpp>
