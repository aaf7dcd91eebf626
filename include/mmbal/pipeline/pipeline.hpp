#pragma once
/// @file
/// Umbrella header of mmbal::pipeline: schedule simulators and the lower bound
/// (schedule.hpp), micro-batch orders (orders.hpp) and the pipeline model that turns samples
/// into stage times (model.hpp). @see docs/DESIGN.md §5.7.

#include <mmbal/pipeline/model.hpp>
#include <mmbal/pipeline/orders.hpp>
#include <mmbal/pipeline/schedule.hpp>
