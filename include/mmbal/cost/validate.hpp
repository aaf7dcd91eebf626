#pragma once
/// @file
/// Validation of cost parameters.

#include <mmbal/core/error.hpp>

#include <cmath>

namespace mmbal::detail {

/// Throws `invalid_input` unless `value` is finite and >= 0; `cost` and `name` name it.
/// Returns -0 as +0: the same cost, which must print (and fingerprint) the same.
inline double non_negative_parameter(const char* cost, const char* name, double value) {
  if (!std::isfinite(value) || value < 0)
    throw_invalid(cost, ": parameter ", name, " = ", value, " must be finite and >= 0");
  return value == 0 ? 0.0 : value;
}

}  // namespace mmbal::detail
