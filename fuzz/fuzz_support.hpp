#pragma once
// Helpers shared by the libFuzzer targets (fuzz/fuzz_*.cpp; see fuzz/README.md).
//
// The contract every target checks: on any input the code under test either succeeds (and
// then its documented invariants hold) or throws `mmbal::invalid_input`. Any other exception
// escapes LLVMFuzzerTestOneInput and libFuzzer reports it as a crash; `require` aborts on a
// broken invariant; ASan/UBSan/LeakSanitizer report the rest.

#include <mmbal/core/error.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <istream>
#include <sstream>
#include <string>
#include <string_view>

namespace mmbal::fuzz {

/// Aborts (a crash libFuzzer records with the input) when an invariant does not hold.
inline void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz invariant violated: %s\n", what);
    std::abort();
  }
}

/// Runs `f()`; an `invalid_input` is the accepted way to reject an input. Returns whether
/// `f` completed.
template <class F>
bool accepts(F&& f) {
  try {
    f();
    return true;
  } catch (const invalid_input& e) {
    require(std::string_view(e.what()).size() > 0, "invalid_input without a message");
    return false;
  }
}

/// Consumes a fuzz input front to back: bytes, small integers, newline-terminated lines.
class input {
 public:
  input(const std::uint8_t* data, std::size_t size) : text_(reinterpret_cast<const char*>(data), size) {}

  [[nodiscard]] bool empty() const noexcept { return text_.empty(); }
  [[nodiscard]] std::size_t size() const noexcept { return text_.size(); }

  /// The next byte (0 when exhausted).
  std::uint8_t byte() {
    if (text_.empty()) return 0;
    const auto b = static_cast<std::uint8_t>(text_.front());
    text_.remove_prefix(1);
    return b;
  }
  /// The next two bytes, little-endian (0 when exhausted).
  std::uint16_t u16() {
    const std::uint16_t lo = byte();
    return static_cast<std::uint16_t>(lo | (std::uint16_t{byte()} << 8));
  }
  /// Text up to the next '\n' (consumed, not returned), or the rest.
  std::string_view line() {
    const auto nl = text_.find('\n');
    const std::string_view out = text_.substr(0, nl);
    text_.remove_prefix(nl == std::string_view::npos ? text_.size() : nl + 1);
    return out;
  }
  /// Everything not consumed yet.
  std::string_view rest() {
    const std::string_view out = text_;
    text_ = {};
    return out;
  }

 private:
  std::string_view text_;
};

/// The whole target for a text reader `read(std::istream&, std::string_view source)`: the
/// input is the file's content; the reader must return or throw `invalid_input`. Adding a
/// reader's target is one call in a new fuzz/fuzz_<name>.cpp:
///
///     extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
///       return mmbal::fuzz::reader_target(data, size, [](std::istream& in, std::string_view source) {
///         (void)mmbal::pipeline::read_times(in, source);
///       });
///     }
template <class Read>
int reader_target(const std::uint8_t* data, std::size_t size, Read&& read) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  accepts([&] { read(in, std::string_view("fuzz.txt")); });
  return 0;
}

}  // namespace mmbal::fuzz
