#pragma once
// Heap accounting for benchmarks: replaces the global operator new / delete with versions that
// count live bytes and their peak (`bench_heap::live`, `bench_heap::peak`). Include it in
// exactly one translation unit of a benchmark executable (it defines the replacement
// operators). `peak_extra_bytes(f)` runs f and returns the peak growth of live heap bytes above
// the level before the call. Thread-safe (atomics); allocations of every thread count.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace bench_heap {

inline std::atomic<std::int64_t> live{0};
inline std::atomic<std::int64_t> peak{0};

inline void note_alloc(std::size_t n) {
  const std::int64_t now = live.fetch_add(static_cast<std::int64_t>(n)) + static_cast<std::int64_t>(n);
  std::int64_t p = peak.load();
  while (now > p && !peak.compare_exchange_weak(p, now)) {}
}
// Every block carries its size in a 16-byte header so delete can account for it. Both are
// kept out of line: inlined into the standard library's nothrow allocations (std::stable_sort's
// temporary buffer), g++ 12 at -O3 sees `free(p - 16)` on a pointer from `operator new` and
// reports -Wmismatched-new-delete, which -Werror turns into a build failure.
[[gnu::noinline]] inline void* counted_alloc(std::size_t n) {
  void* p = std::malloc(n + 16);
  if (!p) throw std::bad_alloc();
  *static_cast<std::size_t*>(p) = n;
  note_alloc(n);
  return static_cast<char*>(p) + 16;
}
[[gnu::noinline]] inline void counted_free(void* p) noexcept {
  if (!p) return;
  char* base = static_cast<char*>(p) - 16;
  live.fetch_sub(static_cast<std::int64_t>(*reinterpret_cast<std::size_t*>(base)));
  std::free(base);
}

/// Runs `f()` and returns the peak of live heap bytes above the level before it.
template <class F>
std::int64_t peak_extra_bytes(F&& f) {
  const std::int64_t before = live.load();
  peak.store(before);
  f();
  return peak.load() - before;
}

}  // namespace bench_heap

void* operator new(std::size_t n) { return bench_heap::counted_alloc(n); }
void* operator new[](std::size_t n) { return bench_heap::counted_alloc(n); }
void operator delete(void* p) noexcept { bench_heap::counted_free(p); }
void operator delete[](void* p) noexcept { bench_heap::counted_free(p); }
void operator delete(void* p, std::size_t) noexcept { bench_heap::counted_free(p); }
void operator delete[](void* p, std::size_t) noexcept { bench_heap::counted_free(p); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return bench_heap::counted_alloc(n);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return bench_heap::counted_alloc(n);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void operator delete(void* p, const std::nothrow_t&) noexcept { bench_heap::counted_free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { bench_heap::counted_free(p); }
