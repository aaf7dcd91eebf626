#pragma once
// The definition of `mmbal::spec::make_balancer` (declared in mmbal/spec/algorithm.hpp), which
// instantiates every built-in partitioner with every built-in cost. Included by algorithm.hpp
// (inline, header-only) or, under `MMBAL_SEPARATE_COMPILATION`, only by
// mmbal/spec/separate_compilation.hpp (out of line, in one translation unit).

#include <mmbal/spec/algorithm.hpp>

#include <utility>

namespace mmbal::spec {

MMBAL_SPEC_DECL orchestrate::phase_balancer make_balancer(const algorithm_spec& spec, const any_cost& cost) {
  return with_partitioner(spec, cost, [&](auto partitioner, const auto& c) {
    return orchestrate::phase_balancer(std::move(partitioner), c, {spec.refine, to_spec(spec), {}});
  });
}

}  // namespace mmbal::spec
