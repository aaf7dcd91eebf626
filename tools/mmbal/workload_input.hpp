#pragma once
// Reading a subcommand's workload file while the memory its plan will write is backed.

#include <mmbal/core/huge_page_heap.hpp>
#include <mmbal/workload/jsonl.hpp>

#include <filesystem>
#include <string>
#include <system_error>
#include <thread>

namespace mmbal::tool {

/// The heap `main` reserved with `reserve_huge_page_heap` (empty until then, under a sanitizer,
/// off glibc, and in programs that link the subcommands without the tool's `main`).
inline huge_page_heap& reserved_heap() {
  static huge_page_heap heap;
  return heap;
}

/// Bytes of heap a one-shot plan writes per byte of its JSONL input, rounded up: the tool
/// reading and orchestrating the 2,560-rank omni and image-heavy steps peaks at 3.9 and 4.3 ×
/// the file's size (bench/RESULTS.md "Session 21 — backing the heap while the input is read").
inline constexpr std::size_t heap_bytes_per_input_byte = 5;

/// Reads the workload JSONL file at `path` (`read_jsonl_file`). Meanwhile, when the tool
/// reserved its heap, a second thread backs the first `heap_bytes_per_input_byte` × the file's
/// size of it (`populate_huge_page_heap`; the parse and then the plan allocate from its start
/// on): parsing a large step takes a few hundred ms (0.2–0.3 s for the image-heavy 26 MB), about
/// as long as backing its memory on a VM that backs it lazily, so the plan that follows finds
/// its pages faulted in instead of paying the first touches in its `elapsed_us`. Same result
/// and errors as `read_jsonl_file`; both threads are done when it returns or throws.
inline workload read_workload(const std::string& path, rank_t ranks) {
  std::jthread backing;
  if (const huge_page_heap& heap = reserved_heap(); heap.advised()) {
    std::error_code unknown_size;
    const std::uintmax_t input_bytes = std::filesystem::file_size(path, unknown_size);
    if (!unknown_size)
      backing = std::jthread([heap, input_bytes] {
        (void)populate_huge_page_heap(heap, static_cast<std::size_t>(input_bytes) * heap_bytes_per_input_byte);
      });
  }
  return read_jsonl_file(path, ranks);
}

}  // namespace mmbal::tool
