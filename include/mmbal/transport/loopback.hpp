#pragma once
/// @file
/// The loopback transport (docs/DESIGN.md §5.6): d simulated ranks in one process.
///
/// Two ways to use it:
/// - `run_rearrangement(r, item_bytes, inputs)`: single-threaded; executes a whole
///   rearrangement on every rank's byte buffer at once (plans + pack/unpack); for
///   simulation, the tool and tests.
/// - `loopback_world`: d threads, one `loopback_transport` each, which models the
///   `transport` and `reducing_transport` concepts exactly like MPI does, so code written
///   against the concepts (metadata gather, fingerprint check, `execute`) runs unchanged.
///   If one rank throws, the world is broken: ranks waiting in a collective are woken with
///   `runtime_failure` instead of hanging, and `run` rethrows the first failure.
/// @see OrchMLLM §6

#include <mmbal/core/error.hpp>
#include <mmbal/core/types.hpp>
#include <mmbal/rearrange/alltoall_plan.hpp>
#include <mmbal/rearrange/pack.hpp>
#include <mmbal/rearrange/rearrangement.hpp>
#include <mmbal/transport/concepts.hpp>
#include <mmbal/transport/plan_copies.hpp>

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

namespace mmbal::transport {

/// Executes rearrangement `r` on all ranks in one process: `inputs[p]` holds rank p's items in
/// source slot order; the result holds every rank's items in destination slot order. Item i
/// has `item_bytes[i]` bytes (zero allowed). Throws `invalid_input` when `r` is malformed, the
/// sizes do not match the items, or an input buffer has the wrong size (naming the rank).
/// Memory: all ranks' send and receive buffers at once. O(n · ranks + bytes).
[[nodiscard]] inline std::vector<std::vector<std::byte>> run_rearrangement(
    const rearrangement& r, std::span<const std::uint64_t> item_bytes, std::span<const std::vector<std::byte>> inputs) {
  if (inputs.size() != r.ranks)
    mmbal::detail::throw_invalid("run_rearrangement: ", inputs.size(), " input buffers for ", r.ranks, " ranks");
  const std::vector<alltoall_plan> plans = make_alltoall_plans(r, item_bytes);
  for (rank_t p = 0; p < r.ranks; ++p)
    if (inputs[p].size() != plans[p].input_bytes)
      mmbal::detail::throw_invalid("run_rearrangement: rank ", p, " has ", inputs[p].size(),
                                   " input bytes, its items need ", plans[p].input_bytes);
  return exchange_in_process<std::byte>(plans, inputs);
}

class loopback_transport;

/// A group of `ranks` simulated ranks that run concurrently on threads (see the file doc).
class loopback_world {
 public:
  /// `ranks` ≥ 1; throws `invalid_input` otherwise.
  explicit loopback_world(rank_t ranks) : ranks_(ranks), slots_(ranks) {
    if (ranks == 0) mmbal::detail::throw_invalid("loopback_world: ranks must be positive");
  }

  [[nodiscard]] rank_t size() const noexcept { return ranks_; }

  /// Runs `body(transport)` on `size()` threads, one per rank, and joins them. If any rank
  /// threw, rethrows (after all have finished) the exception of the rank that failed first,
  /// not the secondary "another rank failed" errors it caused.
  /// Not reentrant: one `run` at a time per world.
  void run(const std::function<void(loopback_transport&)>& body);

 private:
  friend class loopback_transport;

  /// What one rank publishes for the collective in progress.
  struct slot {
    std::span<const std::uint32_t> words;
    std::span<std::uint64_t> values;
    const alltoall_plan* plan = nullptr;
    const std::byte* send = nullptr;
    bool ok = true;
  };

  /// A reusable barrier that can be broken: once a rank has failed, every wait throws.
  void arrive_and_wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (broken_) mmbal::detail::throw_runtime("loopback: another rank failed");
    const std::uint64_t gen = generation_;
    if (++arrived_ == ranks_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return generation_ != gen || broken_; });
    if (generation_ == gen) mmbal::detail::throw_runtime("loopback: another rank failed");
  }
  void break_barrier(rank_t failed) {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (!broken_) first_failure_ = failed;
    broken_ = true;
    cv_.notify_all();
  }

  rank_t ranks_;
  std::vector<slot> slots_;
  std::mutex mutex_;
  std::condition_variable cv_;
  rank_t arrived_ = 0;
  std::uint64_t generation_ = 0;
  bool broken_ = false;
  rank_t first_failure_ = 0;
};

/// One rank's endpoint of a `loopback_world`; models `reducing_transport`.
class loopback_transport {
 public:
  loopback_transport(loopback_world& world, rank_t rank) : world_(&world), rank_(rank) {}

  [[nodiscard]] rank_t rank() const noexcept { return rank_; }
  [[nodiscard]] rank_t size() const noexcept { return world_->ranks_; }

  /// Variable-size all-gather. Collective. O(total words).
  [[nodiscard]] gathered_words all_gather(std::span<const std::uint32_t> local) {
    world_->slots_[rank_].words = local;
    world_->arrive_and_wait();
    gathered_words out;
    out.offsets.assign(std::size_t{size()} + 1, 0);
    for (rank_t r = 0; r < size(); ++r) out.offsets[r + 1] = out.offsets[r] + world_->slots_[r].words.size();
    out.words.reserve(out.offsets.back());
    for (rank_t r = 0; r < size(); ++r)
      out.words.insert(out.words.end(), world_->slots_[r].words.begin(), world_->slots_[r].words.end());
    world_->arrive_and_wait();  // nobody reuses its slot before everyone has read it
    return out;
  }

  /// Element-wise max all-reduce in place. Collective; all ranks must pass the same length
  /// (else every rank throws `invalid_input`).
  void all_reduce_max(std::span<std::uint64_t> values) {
    world_->slots_[rank_].values = values;
    world_->arrive_and_wait();
    std::vector<std::uint64_t> out(values.begin(), values.end());
    bool same_length = true;
    for (rank_t r = 0; r < size(); ++r) {
      const auto v = world_->slots_[r].values;
      if (v.size() != values.size()) {
        same_length = false;
        continue;
      }
      for (std::size_t k = 0; k < v.size(); ++k) out[k] = v[k] > out[k] ? v[k] : out[k];
    }
    world_->arrive_and_wait();
    if (!same_length) mmbal::detail::throw_invalid("loopback all_reduce_max: ranks passed different lengths");
    std::copy(out.begin(), out.end(), values.begin());
  }

  /// Executes this rank's plan: pack, read every peer's packed part directly from its send
  /// buffer, unpack. Collective. Before copying, every rank checks every pair of plans
  /// (p's send count to q equals q's receive count from p) and its buffer sizes; any
  /// failure throws on every rank. O(ranks² + bytes).
  void all_to_all(const alltoall_plan& plan, std::span<const std::byte> send, std::span<std::byte> recv) {
    bool ok = plan.rank == rank_ && plan.ranks == size() && send.size() == plan.input_bytes &&
              recv.size() == plan.output_bytes;
    if (ok) {
      try {
        validate_peer_layout(plan);
      } catch (const invalid_input&) {
        ok = false;
      }
    }
    if (ok) {
      send_.resize(plan.send_bytes);
      pack(plan, send, std::span<std::byte>(send_));
    }
    auto& me = world_->slots_[rank_];
    me.plan = &plan;
    me.send = send_.data();
    me.ok = ok;
    world_->arrive_and_wait();
    std::uint32_t bad_rank = size();
    for (rank_t p = 0; p < size() && bad_rank == size(); ++p)
      if (!world_->slots_[p].ok) bad_rank = p;
    for (rank_t p = 0; p < size() && bad_rank == size(); ++p)
      for (rank_t q = 0; q < size(); ++q)
        if (world_->slots_[p].plan->send_counts[q] != world_->slots_[q].plan->recv_counts[p]) {
          bad_rank = p;
          break;
        }
    if (bad_rank == size()) {
      recv_.resize(plan.recv_bytes);
      for (rank_t p = 0; p < size(); ++p) {
        const alltoall_plan& peer = *world_->slots_[p].plan;
        const std::uint64_t n = peer.send_counts[rank_];
        if (n != 0)
          std::memcpy(recv_.data() + plan.recv_displs[p], world_->slots_[p].send + peer.send_displs[rank_], n);
      }
    }
    world_->arrive_and_wait();  // peers' send buffers stay alive until everyone has copied
    if (bad_rank != size())
      mmbal::detail::throw_invalid("loopback all_to_all: the plan or buffers of rank ", bad_rank,
                                   " do not match (checked on rank ", rank_, ")");
    unpack(plan, std::span<const std::byte>(recv_), recv);
  }

 private:
  loopback_world* world_;
  rank_t rank_;
  std::vector<std::byte> send_, recv_;
};

inline void loopback_world::run(const std::function<void(loopback_transport&)>& body) {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    broken_ = false;
    arrived_ = 0;
  }
  std::vector<std::exception_ptr> errors(ranks_);
  std::vector<std::thread> threads;
  threads.reserve(ranks_);
  for (rank_t r = 0; r < ranks_; ++r)
    threads.emplace_back([this, r, &body, &errors] {
      try {
        loopback_transport t(*this, r);
        body(t);
      } catch (...) {
        errors[r] = std::current_exception();
        break_barrier(r);
      }
    });
  for (std::thread& th : threads) th.join();
  if (broken_) std::rethrow_exception(errors[first_failure_]);
}

static_assert(reducing_transport<loopback_transport>);

}  // namespace mmbal::transport
