// ThreadPool: a fixed set of worker threads owned by one engine/backend (no
// global pool: several engines may live in one process, each with its own).
//
// parallel_for(begin, end, fn) splits [begin, end) into chunks and calls
// fn(chunk_begin, chunk_end) for every chunk, on the pool's workers and on
// the calling thread together, and returns when all chunks are done. With
// num_threads == 0 there are no workers and everything runs on the caller.
// Chunks never overlap and cover the range exactly once; which thread runs
// which chunk is unspecified, so results must not depend on it.
//
// fn must not throw (an exception escaping a worker terminates the process).
// A parallel_for issued from inside fn runs serially on that thread, with
// that thread's worker index.
//
// Thread-safety: parallel_for may be called from any thread; concurrent
// calls on one pool take turns (one job at a time). The workers only run
// chunks of the current call.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "photon/result.hpp"

namespace photon {

class ThreadPool {
 public:
  // Starts num_threads workers (0 = none: the caller runs every chunk).
  // Fails with invalid_argument for a negative count and out_of_memory when
  // the system refuses a thread.
  static Result<std::unique_ptr<ThreadPool>> create(int32_t num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int32_t num_threads() const noexcept { return int32_t(workers_.size()); }
  // Threads that may run chunks of one call at once: workers + the caller.
  // Worker indices passed to parallel_for_indexed lie in [0, max_concurrency()).
  int32_t max_concurrency() const noexcept { return num_threads() + 1; }

  // grain == 0: about one equal contiguous chunk per thread (balanced work);
  // grain > 0: chunks of `grain` items handed out dynamically (uneven work).
  template <class F>
  void parallel_for(int64_t begin, int64_t end, F&& fn, int64_t grain = 0) {
    parallel_for_indexed(
        begin, end, [&fn](int32_t, int64_t b, int64_t e) { fn(b, e); }, grain);
  }
  // As parallel_for, with fn(worker, chunk_begin, chunk_end): `worker` is the
  // index of the running thread, for per-thread scratch; two chunks running
  // at the same time never share an index.
  template <class F>
  void parallel_for_indexed(int64_t begin, int64_t end, F&& fn, int64_t grain = 0) {
    using Fn = std::remove_reference_t<F>;
    run(begin, end, grain,
        Task{&fn, [](void* ctx, int32_t w, int64_t b, int64_t e) { (*static_cast<Fn*>(ctx))(w, b, e); }});
  }

 private:
  struct Task {
    void* ctx;
    void (*call)(void* ctx, int32_t worker, int64_t chunk_begin, int64_t chunk_end);
  };
  struct Job {
    Task task;
    int64_t begin = 0;
    int64_t end = 0;
    int64_t chunk = 1;
    int64_t num_chunks = 0;
    std::atomic<int64_t> next{0};
    std::atomic<int64_t> done{0};
  };

  ThreadPool() = default;
  void run(int64_t begin, int64_t end, int64_t grain, Task task);
  void worker_loop(int32_t index);
  // Runs chunks of `job` until none is left; returns how many this thread ran.
  static int64_t drain(Job& job, int32_t worker);

  std::vector<std::thread> workers_;
  std::mutex call_mutex_;  // held by the caller for a whole parallel job
  std::mutex mutex_;
  std::condition_variable wake_;      // workers: a new job or shutdown
  std::condition_variable finished_;  // caller: all chunks done, no worker inside the job
  Job* job_ = nullptr;                // guarded by mutex_
  uint64_t generation_ = 0;           // guarded by mutex_; bumped per job
  int32_t inside_ = 0;                // guarded by mutex_; workers currently in job_
  bool stop_ = false;                 // guarded by mutex_
};

}  // namespace photon
