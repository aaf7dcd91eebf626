#pragma once
/// @file
/// Planning overlapped with training: a data loader's prefetch thread that gathers step
/// k+1's metadata and plans it with the orchestrator while step k's exchange and compute run
/// (docs/DESIGN.md §5.5 "Prefetching"). @see OrchMLLM §6 (the orchestrator hides its latency
/// in the data loader's prefetch).

#include <mmbal/core/error.hpp>
#include <mmbal/orchestrate/orchestrator.hpp>
#include <mmbal/workload/sample.hpp>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

namespace mmbal::orchestrate {

/// One step handed out by `prefetching_planner::next`: the gathered global batch and its plan.
struct prefetched_step {
  std::uint64_t index = 0;  ///< step number: 0, 1, 2, ... in the order the source produced them
  workload batch;           ///< the source's result for this step
  orchestration plan;       ///< `orchestrator::plan(batch)` (bit-identical to planning inline)
};

/// Plans steps ahead on one background thread.
///
/// The producer thread calls `source(k)` for k = 0, 1, 2, ... (the data loader's metadata
/// gather: on MPI ranks an all-gather on a communicator of its own), plans the returned batch
/// with `orchestrator::plan(batch, out, workspace)` (the thread's own `plan_workspace`) into a
/// recycled orchestration when the consumer has handed one back (`recycle`, the training
/// loop's steady state), and queues the step. At most `depth` (1 or 2, default 1) planned
/// steps wait in the queue; the producer then blocks, so with depth 1 step k+1 is gathered
/// and planned while the consumer runs step k. `source` returning `std::nullopt` ends the
/// stream.
///
/// Thread-safety contract:
/// - one consumer: `next`, `recycle`, `stop` and the destructor are called from one thread
///   (or externally serialized); `stop_requested` may be called from any thread;
/// - one producer: `source` runs only on the planner's own thread, sequentially, in step
///   order, never concurrently with itself; it may block (a collective) and may call
///   `stop_requested` to end early;
/// - the orchestrator is copied in; its `plan` is const and safe to call while the consumer
///   uses other copies; the producer owns its `plan_workspace`;
/// - the steps handed out are owned by the consumer; nothing else touches them.
/// Guarantees: steps arrive in order with consecutive indices and each plan equals
/// `orchestrator::plan(batch)`; an exception thrown by `source` or by planning step k is
/// re-thrown by the `next` call that would have returned step k (after steps 0..k-1), after
/// which the stream is over (`next` returns `std::nullopt`); `stop` (and the destructor)
/// wakes a producer blocked on a full queue, waits for a running `source` / `plan` call to
/// return (it cannot interrupt one: long sources should poll `stop_requested`), joins the
/// thread and drops queued steps. A step that has room (the consumer has taken step
/// k - depth) is still gathered and planned after `stop`: on MPI ranks another rank's
/// producer may already be inside that step's collective source, which needs this rank. So
/// the producer calls `source` exactly for steps 0 .. taken + depth - 1 (or until the source
/// ends), the same on every rank that took the same number of steps, whenever each stops.
/// A source that fails on one rank only must still take part in that step's collective, or
/// the other ranks wait in it: `transport::gather_workload` does (a rank whose samples cannot
/// be serialized sends a failure block, and every rank throws); for other failures, abort the
/// job (`MPI_Abort`, as examples/dataloader does).
/// Memory: a step is gathered and planned only while fewer than `depth` wait, so at most
/// `depth` steps are queued or being planned, besides those the consumer holds and one spare
/// orchestration.
/// @see OrchMLLM §6.
class prefetching_planner {
 public:
  /// `source(step)`: the global batch of step `step`, or `std::nullopt` at the end of data.
  using batch_source = std::function<std::optional<workload>(std::uint64_t step)>;

  /// Starts the producer thread. Throws `invalid_input` for depth outside [1, 2] or an empty
  /// source.
  prefetching_planner(orchestrator planner, batch_source source, std::size_t depth = 1)
      : planner_(std::move(planner)), source_(std::move(source)), depth_(depth) {
    if (depth_ < 1 || depth_ > 2)
      mmbal::detail::throw_invalid("prefetching_planner: depth ", depth_, " (must be 1 or 2)");
    if (!source_) mmbal::detail::throw_invalid("prefetching_planner: empty batch source");
    thread_ = std::thread([this] { produce(); });
  }

  prefetching_planner(const prefetching_planner&) = delete;
  prefetching_planner& operator=(const prefetching_planner&) = delete;
  prefetching_planner(prefetching_planner&&) = delete;
  prefetching_planner& operator=(prefetching_planner&&) = delete;

  /// Stops and joins the producer (see `stop`).
  ~prefetching_planner() { stop(); }

  /// The next planned step, blocking until it is ready; `std::nullopt` once the source has
  /// ended, after `stop`, or after an error was re-thrown. Re-throws the producer's exception
  /// (see the class comment). Consumer thread only.
  [[nodiscard]] std::optional<prefetched_step> next() {
    std::unique_lock lock(mutex_);
    ready_cv_.wait(lock, [&] { return !ready_.empty() || finished_ || stopping_; });
    if (stopping_) return std::nullopt;
    if (!ready_.empty()) {
      prefetched_step s = std::move(ready_.front());
      ready_.pop_front();
      lock.unlock();
      space_cv_.notify_one();
      return s;
    }
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
    return std::nullopt;
  }

  /// Hands a consumed step back so that a later step is planned into its buffers (no fresh
  /// pages for items, sizes and rearrangements). Optional; keeps at most one spare.
  /// Consumer thread only.
  void recycle(prefetched_step&& done) {
    std::lock_guard lock(mutex_);
    if (spare_.empty()) spare_.push_back(std::move(done.plan));
  }

  /// Ends the stream: wakes the producer, waits for its current `source` / `plan` call,
  /// joins it and drops the queued steps. Idempotent; consumer thread only (called by
  /// `source` on the producer, it only requests the stop: a thread cannot join itself).
  void stop() noexcept {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
      stop_flag_.store(true, std::memory_order_relaxed);
    }
    space_cv_.notify_all();
    ready_cv_.notify_all();
    if (std::this_thread::get_id() == producer_id_.load()) return;
    if (thread_.joinable()) thread_.join();
    std::lock_guard lock(mutex_);
    ready_.clear();
  }

  /// Whether `stop` was called (any thread; a long-running source may poll it and return
  /// `std::nullopt`).
  [[nodiscard]] bool stop_requested() const noexcept { return stop_flag_.load(std::memory_order_relaxed); }

  [[nodiscard]] std::size_t depth() const noexcept { return depth_; }

 private:
  void produce() noexcept {
    producer_id_.store(std::this_thread::get_id());  // before any source call (thread_ may still be assigned)
    for (std::uint64_t k = 0;; ++k) {
      orchestration out;
      {
        std::unique_lock lock(mutex_);
        space_cv_.wait(lock, [&] { return stopping_ || ready_.size() < depth_; });
        if (ready_.size() >= depth_) break;  // stopping; a step with room is still planned (see the class comment)
        if (!spare_.empty()) {
          out = std::move(spare_.back());
          spare_.pop_back();
        }
      }
      try {
        std::optional<workload> batch = source_(k);
        if (!batch) break;
        planner_.plan(*batch, out, workspace_);
        std::unique_lock lock(mutex_);
        // Queued even when stopping (`stop` drops it): the next step may still have room.
        ready_.push_back(prefetched_step{k, std::move(*batch), std::move(out)});
        lock.unlock();
        ready_cv_.notify_one();
      } catch (...) {
        std::lock_guard lock(mutex_);
        error_ = std::current_exception();
        break;
      }
    }
    {
      std::lock_guard lock(mutex_);
      finished_ = true;
    }
    ready_cv_.notify_all();
  }

  orchestrator planner_;
  plan_workspace workspace_;  ///< used by the producer thread only
  batch_source source_;
  std::size_t depth_;
  std::mutex mutex_;
  std::condition_variable ready_cv_;  ///< a step was queued or the producer finished
  std::condition_variable space_cv_;  ///< the queue has room or stop was requested
  std::deque<prefetched_step> ready_;
  std::vector<orchestration> spare_;
  std::exception_ptr error_;
  bool finished_ = false;  ///< the producer has exited (end of data, error or stop)
  bool stopping_ = false;
  std::atomic<bool> stop_flag_{false};
  std::atomic<std::thread::id> producer_id_{};
  std::thread thread_;  // last: started once every other member exists
};

}  // namespace mmbal::orchestrate
