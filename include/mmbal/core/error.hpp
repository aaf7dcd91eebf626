#pragma once
/// @file
/// The library's error types. Every precondition violation that depends on data or
/// parameters (not on programming errors inside mmbal) is reported by throwing one of them,
/// with a message that names the offending value.

#include <cstdint>
#include <limits>
#include <locale>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace mmbal {

/// Common base of every exception mmbal throws, so callers can `catch (const mmbal::error&)`.
/// It is not derived from `std::exception` itself; the concrete types below derive from both
/// this tag and the fitting standard exception, so `catch (const std::exception&)` works too.
class error {
 public:
  virtual ~error() = default;
  /// The message, identical to `what()` of the standard base.
  [[nodiscard]] virtual const char* message() const noexcept = 0;
};

/// Bad input: a parameter out of range, malformed metadata, an infeasible constraint.
class invalid_input : public std::invalid_argument, public error {
 public:
  explicit invalid_input(const std::string& what) : std::invalid_argument(what) {}
  [[nodiscard]] const char* message() const noexcept override { return what(); }
};

/// A failure at run time that no single argument explains: ranks that disagree on a plan,
/// a transport error reported by MPI or NCCL.
class runtime_failure : public std::runtime_error, public error {
 public:
  explicit runtime_failure(const std::string& what) : std::runtime_error(what) {}
  [[nodiscard]] const char* message() const noexcept override { return what(); }
};

namespace detail {

/// Streams every argument into one string (g++ 12 has no `<format>`), in the classic locale:
/// cost names built here feed plan fingerprints and are parsed back, so a caller's global
/// locale (a decimal comma, digit grouping) must not change them.
template <class... Args>
[[nodiscard]] std::string concat(Args&&... args) {
  std::ostringstream out;
  out.imbue(std::locale::classic());
  out.precision(17);
  (out << ... << std::forward<Args>(args));
  return out.str();
}

/// Throws `invalid_input` with the concatenation of `args`.
template <class... Args>
[[noreturn]] void throw_invalid(Args&&... args) {
  throw invalid_input(concat(std::forward<Args>(args)...));
}

/// Throws `runtime_failure` with the concatenation of `args`.
template <class... Args>
[[noreturn]] void throw_runtime(Args&&... args) {
  throw runtime_failure(concat(std::forward<Args>(args)...));
}

/// a + b, throwing `invalid_input` "<what> exceeds 2^64 - 1" when the sum leaves 64 bits
/// (byte and row totals of absurd inputs).
[[nodiscard]] inline std::uint64_t checked_add(std::uint64_t a, std::uint64_t b, const char* what) {
  if (b > std::numeric_limits<std::uint64_t>::max() - a) throw_invalid(what, " exceeds 2^64 - 1");
  return a + b;
}

}  // namespace detail
}  // namespace mmbal
