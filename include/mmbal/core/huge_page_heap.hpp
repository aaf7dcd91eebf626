#pragma once
/// @file
/// An opt-in, process-wide heap setting for applications that plan in a fresh process (the
/// `mmbal` tool, a one-shot planning job): glibc's main heap reserved up front and advised for
/// transparent huge pages, so that first touches fault once per 2 MiB instead of once per 4 KiB.
/// The library never calls it itself (docs/DESIGN.md §5.5 "Fresh memory").

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#if defined(__linux__) && defined(__GLIBC__)
#if __GLIBC_PREREQ(2, 33)  // mallinfo2
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>
#ifdef MADV_HUGEPAGE
#define MMBAL_DETAIL_HUGE_PAGE_HEAP 1
#endif
#endif
#endif

namespace mmbal {

namespace detail {
/// Whether this build runs under a sanitizer, whose allocator the setting must not disturb.
constexpr bool sanitized_build() noexcept {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
  return true;
#else
  return false;
#endif
#else
  return false;
#endif
}
}  // namespace detail

/// Where `reserve_huge_page_heap` advised the heap: [begin, end), empty when nothing changed.
struct huge_page_heap {
  std::uintptr_t begin = 0;
  std::uintptr_t end = 0;

  [[nodiscard]] bool advised() const noexcept { return end > begin; }
  /// Whether `p` lies in the advised range.
  [[nodiscard]] bool contains(const void* p) const noexcept {
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    return a >= begin && a < end;
  }
};

/// Makes every thread allocate from glibc's main heap (`M_ARENA_MAX` 1), grows that heap once
/// by `bytes` (at most 1 GiB) of address space (`M_TOP_PAD`, then back to glibc's 128 KiB),
/// keeps freed memory in it (`M_TRIM_THRESHOLD` −1: never trimmed), serves every block it can
/// hold from it (`M_MMAP_THRESHOLD` at glibc's largest, 32 MiB: only a larger block that does
/// not fit is mapped on its own), and advises the grown range `MADV_HUGEPAGE`. Call it first in
/// `main`, before any thread starts; growth beyond `bytes` is not advised.
///
/// Why: a fresh plan writes tens of MB that are new to the process, and on some machines a
/// first touch of a 4 KiB page costs 10 µs or more (bench/RESULTS.md "Session 16 — a huge-page
/// heap for one-shot planning": the image-heavy 2,560-rank plan pays more in faults than in
/// planning). With transparent huge pages in `madvise` or `always` mode those touches fault
/// once per 2 MiB. Memory that is never touched costs only address space; touched memory is
/// rounded to 2 MiB pages and kept until exit, so this is for short-lived processes and
/// dedicated planners, not for a process that shares the heap with a training framework.
/// - Guarantee: changes only allocator settings (every plan is bit-identical with or without
///   it); idempotent in effect; returns the advised range, or an empty one and changes nothing
///   off glibc/Linux or under a sanitizer. If the kernel refuses the advice the settings stay
///   and the range is empty.
/// - Complexity: one `malloc` just above the heap's free memory, one `madvise`; touches no memory.
[[nodiscard]] inline huge_page_heap reserve_huge_page_heap(std::size_t bytes = std::size_t{1} << 30) {
  huge_page_heap out;
#ifdef MMBAL_DETAIL_HUGE_PAGE_HEAP
  if constexpr (detail::sanitized_build()) return out;
  constexpr std::uintptr_t huge = std::uintptr_t{2} << 20;
  constexpr int largest_heap_block = 32 << 20;  // glibc refuses a larger M_MMAP_THRESHOLD
  const int pad = static_cast<int>(std::min<std::size_t>(bytes, std::size_t{1} << 30));
  if (mallopt(M_ARENA_MAX, 1) == 0 || mallopt(M_MMAP_THRESHOLD, largest_heap_block) == 0 ||
      mallopt(M_TRIM_THRESHOLD, -1) == 0 || mallopt(M_TOP_PAD, pad) == 0)
    return out;
  // A block larger than all free memory of the heap (`fordblks`) makes glibc grow the heap by
  // the block plus the pad, in one piece that the advice then covers.
  void* probe = std::malloc(mallinfo2().fordblks + (std::size_t{1} << 20));
  // The pad has done its work (or could not: an address-space limit below it). Kept, every
  // later growth of the heap would ask for `bytes` more, so that a process under `ulimit -v`
  // could not allocate at all: back to glibc's default, 128 KiB.
  mallopt(M_TOP_PAD, 128 << 10);
  if (!probe) return out;
  const std::uintptr_t begin = (reinterpret_cast<std::uintptr_t>(probe) + huge - 1) & ~(huge - 1);
  const std::uintptr_t end = reinterpret_cast<std::uintptr_t>(sbrk(0)) & ~(huge - 1);
  if (end > begin && madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE) == 0) {
    out.begin = begin;
    out.end = end;
  }
  std::free(probe);  // stays in the heap: trimming is off (-1)
#else
  (void)bytes;
#endif
  return out;
}

/// Backs the first `bytes` of `heap`'s range with memory before it is used
/// (`MADV_POPULATE_WRITE`, Linux ≥ 5.14), so that what is allocated there next (an input being
/// parsed, then a plan) finds its pages already faulted in and backed by the host. Meant for a
/// second thread while the first reads the input: the kernel maps zeroed pages only where
/// nothing is mapped yet and writes nothing to pages already in use, so it is safe while other
/// threads allocate from and write to the same memory.
/// - Why: memory new to a process can cost more than its faults (on the benchmarks' VM the host
///   backs guest memory lazily: 128 MiB first touched 12–258 ms, bench/RESULTS.md "Session 16 —
///   a huge-page heap for one-shot planning"); done while the input is read, that cost leaves the
///   plan's critical path ("Session 21 — backing the heap while the input is read").
/// - Returns the bytes populated: `bytes` clipped to the range, 0 when the range is empty, the
///   kernel lacks the advice, or it fails (nothing else changes then).
/// - Complexity: one `madvise`; time proportional to the bytes not yet backed.
inline std::size_t populate_huge_page_heap(const huge_page_heap& heap, std::size_t bytes) noexcept {
#if defined(MMBAL_DETAIL_HUGE_PAGE_HEAP) && defined(MADV_POPULATE_WRITE)
  const std::size_t length = std::min<std::size_t>(bytes, heap.end - heap.begin);
  if (!heap.advised() || length == 0) return 0;
  return madvise(reinterpret_cast<void*>(heap.begin), length, MADV_POPULATE_WRITE) == 0 ? length : 0;
#else
  (void)heap;
  (void)bytes;
  return 0;
#endif
}

}  // namespace mmbal
