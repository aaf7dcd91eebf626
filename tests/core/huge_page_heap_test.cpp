// reserve_huge_page_heap and populate_huge_page_heap: the process-wide setting runs in a child (this binary started
// anew), so this test process keeps its own allocator settings; the child reports the first failed check as its exit
// status.
#include <mmbal/core/huge_page_heap.hpp>

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#if defined(__linux__) && defined(__GLIBC__)
#include <sys/resource.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

namespace {

/// The line of the /proc/self/smaps mapping that contains `p` that starts with `field` ("" if
/// none does), e.g. "VmFlags:" or "Rss:".
std::string smaps_line(const void* p, const std::string& field) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::ifstream smaps("/proc/self/smaps");
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    std::uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = a >= lo && a < hi;
    } else if (inside && line.rfind(field, 0) == 0) {
      return line;
    }
  }
  return "";
}

/// The resident KiB of the mapping that contains `p`.
std::size_t rss_kib_of(const void* p) {
  std::istringstream line(smaps_line(p, "Rss:").substr(4));
  std::size_t kib = 0;
  line >> kib;
  return kib;
}

/// Whether the running kernel is at least `major`.`minor`.
bool kernel_at_least(int major, int minor) {
#if defined(__linux__) && defined(__GLIBC__)
  utsname u{};
  if (uname(&u) != 0) return false;
  int ma = 0, mi = 0;
  if (std::sscanf(u.release, "%d.%d", &ma, &mi) != 2) return false;
  return ma > major || (ma == major && mi >= minor);
#else
  (void)major;
  (void)minor;
  return false;
#endif
}

/// The checks, in the child: 0 when all hold, else the number of the first that failed.
int child_checks() {
  const mmbal::huge_page_heap heap = mmbal::reserve_huge_page_heap(std::size_t{256} << 20);
  if constexpr (mmbal::detail::sanitized_build()) return heap.advised() ? 1 : 0;
  if (!heap.advised()) return 2;
  if (heap.begin % (std::uintptr_t{2} << 20) != 0 || heap.end % (std::uintptr_t{2} << 20) != 0) return 3;
  if (heap.end - heap.begin < (std::uintptr_t{250} << 20)) return 4;  // the pad, less the alignment
  // A block of 8 MiB (glibc would map it on its own by default) comes from the advised heap
  // (its first bytes may precede the first 2 MiB boundary of the grown heap).
  const auto big = std::make_unique<char[]>(std::size_t{8} << 20);
  const char* middle = big.get() + (std::size_t{4} << 20);
  if (!heap.contains(middle)) return 5;
  if (smaps_line(middle, "VmFlags:").find(" hg") == std::string::npos) return 6;
  // Another thread allocates from the same heap (one arena), after the block above.
  std::unique_ptr<char[]> other;
  std::thread([&] { other = std::make_unique<char[]>(std::size_t{1} << 20); }).join();
  if (!heap.contains(other.get())) return 7;
  // A block beyond the reserved range is mapped on its own (not touched here).
  void* beyond = std::malloc(std::size_t{300} << 20);
  const bool outside = beyond && !heap.contains(beyond);
  std::free(beyond);
  if (!outside) return 8;
  // Memory is usable and freed memory stays in the heap for the next block.
  std::vector<std::uint64_t> v(1 << 20, 7);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] += i;
  if (v[12345] != 12352) return 9;
  // Populating backs the range ahead of use while another thread writes to a block inside it,
  // and leaves that block's bytes as they are (MADV_POPULATE_WRITE: Linux 5.14).
  if (!heap.contains(v.data())) return 10;
  const std::size_t populate = std::size_t{64} << 20;
  std::thread writer([&] {
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = 3 * i + 1;
  });
  const std::size_t populated = mmbal::populate_huge_page_heap(heap, populate);
  writer.join();
  if (!kernel_at_least(5, 14)) return populated == 0 ? 0 : 11;
  if (populated != populate) return 12;
  for (std::size_t i = 0; i < v.size(); ++i)
    if (v[i] != 3 * i + 1) return 13;
  if (rss_kib_of(reinterpret_cast<const void*>(heap.begin)) < (populate >> 10)) return 14;
  // Beyond the range, only the range is populated; an empty range populates nothing.
  if (mmbal::populate_huge_page_heap(heap, heap.end - heap.begin + 1) != heap.end - heap.begin) return 15;
  if (mmbal::populate_huge_page_heap(mmbal::huge_page_heap{}, populate) != 0) return 16;
  return 0;
}

#if defined(__linux__) && defined(__GLIBC__)
/// The checks of a child under an address-space limit below the pad (`ulimit -v`): the
/// reservation fails, and the process can still grow its heap. Until the pad was restored after
/// the probe, every later growth asked for the whole pad again, so the `mmbal` tool could not
/// even print its help under `ulimit -v 1048576`.
int limited_child_checks() {
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0;
  if (!(statm >> pages)) return 21;
  const rlimit limit{pages * static_cast<std::size_t>(sysconf(_SC_PAGESIZE)) + (std::size_t{256} << 20), RLIM_INFINITY};
  if (setrlimit(RLIMIT_AS, &limit) != 0) return 22;
  const mmbal::huge_page_heap heap = mmbal::reserve_huge_page_heap(std::size_t{1} << 30);
  if (heap.advised()) return 23;
  // 16 MiB: below glibc's mmap threshold as set (32 MiB), so the heap itself must grow.
  std::vector<char> block(std::size_t{16} << 20, 1);  // std::bad_alloc before the fix
  return block[12345] == 1 ? 0 : 24;
}
#endif

}  // namespace

#if defined(__linux__) && defined(__GLIBC__)
TEST_CASE("reserve_huge_page_heap under an address-space limit, in a fresh process", "[.][heap_limited_child]") {
  std::_Exit(limited_child_checks());
}

// The child: this test binary started anew (so no thread and no second malloc arena exists
// yet, as `reserve_huge_page_heap` requires) and told to run only this hidden case.
TEST_CASE("reserve_huge_page_heap, in a fresh process", "[.][heap_child]") { std::_Exit(child_checks()); }
#endif

#if defined(__linux__) && defined(__GLIBC__)
/// Runs this test binary anew on the hidden case `tag` and returns its exit status: 0 when its
/// checks hold, else the number of the first that failed (127: no exec; 1: Catch caught an
/// exception).
int child_exit_status(const char* tag) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    execl("/proc/self/exe", "test_core", tag, static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  return WEXITSTATUS(status);
}
#endif

TEST_CASE("reserve_huge_page_heap advises the main heap and serves large blocks and every thread from it",
          "[core][heap]") {
#if defined(__linux__) && defined(__GLIBC__)
  CHECK(child_exit_status("[heap_child]") == 0);
#else
  CHECK_FALSE(mmbal::reserve_huge_page_heap().advised());
#endif
}

TEST_CASE("reserve_huge_page_heap under an address-space limit below its pad leaves the heap growable",
          "[core][heap]") {
#if defined(__linux__) && defined(__GLIBC__)
  CHECK(child_exit_status("[heap_limited_child]") == 0);
#endif
}
