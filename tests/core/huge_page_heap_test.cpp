// reserve_huge_page_heap: the process-wide setting runs in a child (this binary started anew),
// so this test process keeps its own allocator settings; the child reports the first failed
// check as its exit status.
#include <mmbal/core/huge_page_heap.hpp>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#if defined(__linux__) && defined(__GLIBC__)
#include <sys/wait.h>
#include <unistd.h>
#endif

namespace {

/// The VmFlags of the /proc/self/smaps mapping that contains `p` ("" if none does).
std::string vm_flags_of(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::ifstream smaps("/proc/self/smaps");
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    std::uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = a >= lo && a < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
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
  if (vm_flags_of(middle).find(" hg") == std::string::npos) return 6;
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
  return 0;
}

}  // namespace

#if defined(__linux__) && defined(__GLIBC__)
// The child: this test binary started anew (so no thread and no second malloc arena exists
// yet, as `reserve_huge_page_heap` requires) and told to run only this hidden case.
TEST_CASE("reserve_huge_page_heap, in a fresh process", "[.][heap_child]") { std::_Exit(child_checks()); }
#endif

TEST_CASE("reserve_huge_page_heap advises the main heap and serves large blocks and every thread from it",
          "[core][heap]") {
#if defined(__linux__) && defined(__GLIBC__)
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    execl("/proc/self/exe", "test_core", "[heap_child]", static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);  // else the number of the first failed check (127: no exec)
#else
  CHECK_FALSE(mmbal::reserve_huge_page_heap().advised());
#endif
}
