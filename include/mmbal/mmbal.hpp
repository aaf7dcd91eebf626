#pragma once
/// @file
/// Umbrella header: every host-only public header of mmbal (no MPI, CUDA or NCCL), except the
/// by-name dispatch of `spec/` (every algorithm with every cost: include `<mmbal/spec/spec.hpp>`
/// where it is needed, or compile it once, docs/DESIGN.md §2).

#include <mmbal/balance/constraints.hpp>
#include <mmbal/balance/conv_lpt.hpp>
#include <mmbal/balance/greedy_ascending.hpp>
#include <mmbal/balance/karmarkar_karp.hpp>
#include <mmbal/balance/lpt.hpp>
#include <mmbal/balance/micro_batches.hpp>
#include <mmbal/balance/migrate.hpp>
#include <mmbal/balance/padded_binary_search.hpp>
#include <mmbal/balance/refine.hpp>
#include <mmbal/balance/tolerance_lpt.hpp>
#include <mmbal/context/distribute.hpp>
#include <mmbal/core/concepts.hpp>
#include <mmbal/core/error.hpp>
#include <mmbal/core/huge_page_heap.hpp>
#include <mmbal/core/parallel.hpp>
#include <mmbal/core/rng.hpp>
#include <mmbal/core/types.hpp>
#include <mmbal/cost/fit.hpp>
#include <mmbal/cost/functions.hpp>
#include <mmbal/cost/metrics.hpp>
#include <mmbal/mask/mask.hpp>
#include <mmbal/orchestrate/orchestrator.hpp>
#include <mmbal/orchestrate/policy.hpp>
#include <mmbal/orchestrate/prefetch.hpp>
#include <mmbal/pipeline/pipeline.hpp>
#include <mmbal/rearrange/rearrange.hpp>
#include <mmbal/sampling/grouping.hpp>
#include <mmbal/sampling/isf.hpp>
#include <mmbal/transport/loopback.hpp>
#include <mmbal/workload/generators.hpp>
#include <mmbal/workload/jsonl.hpp>
#include <mmbal/workload/length_data.hpp>
#include <mmbal/workload/sample.hpp>
