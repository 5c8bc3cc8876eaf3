#include "core/thread_pool.hpp"

#include <algorithm>
#include <string>
#include <system_error>

namespace photon {
namespace {

// The pool whose chunk this thread is running, and its worker index there
// (per thread, so nested calls of several engines never mix).
thread_local const ThreadPool* tl_pool = nullptr;
thread_local int32_t tl_worker = 0;

struct ScopedWorker {
  const ThreadPool* saved_pool;
  int32_t saved_worker;
  ScopedWorker(const ThreadPool* pool, int32_t worker) : saved_pool(tl_pool), saved_worker(tl_worker) {
    tl_pool = pool;
    tl_worker = worker;
  }
  ~ScopedWorker() {
    tl_pool = saved_pool;
    tl_worker = saved_worker;
  }
};

}  // namespace

Result<std::unique_ptr<ThreadPool>> ThreadPool::create(int32_t num_threads) {
  if (num_threads < 0)
    return fail(Errc::invalid_argument, "thread pool: num_threads must be >= 0, got " + std::to_string(num_threads));
  std::unique_ptr<ThreadPool> pool(new ThreadPool());
  try {
    pool->workers_.reserve(size_t(num_threads));
    for (int32_t i = 0; i < num_threads; ++i)
      pool->workers_.emplace_back([p = pool.get(), i] { p->worker_loop(i + 1); });
  } catch (const std::system_error& e) {
    return fail(Errc::out_of_memory, std::string("thread pool: cannot start a worker thread: ") + e.what());
  } catch (const std::bad_alloc&) {
    return fail(Errc::out_of_memory, "thread pool: out of memory starting workers");
  }
  return pool;
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

int64_t ThreadPool::drain(Job& job, int32_t worker) {
  int64_t ran = 0;
  for (;;) {
    const int64_t c = job.next.fetch_add(1, std::memory_order_relaxed);
    if (c >= job.num_chunks) break;
    const int64_t b = job.begin + c * job.chunk;
    const int64_t e = std::min(job.end, b + job.chunk);
    job.task.call(job.task.ctx, worker, b, e);
    ++ran;
  }
  return ran;
}

void ThreadPool::run(int64_t begin, int64_t end, int64_t grain, Task task) {
  if (end <= begin) return;
  const int64_t n = end - begin;
  if (tl_pool == this || workers_.empty() || n == 1) {
    // Nested call, no workers, or nothing to split: this thread runs it all.
    task.call(task.ctx, tl_pool == this ? tl_worker : 0, begin, end);
    return;
  }
  std::lock_guard<std::mutex> one_job_at_a_time(call_mutex_);
  Job job;
  job.task = task;
  job.begin = begin;
  job.end = end;
  const int64_t threads = max_concurrency();
  job.chunk = grain > 0 ? grain : (n + threads - 1) / threads;
  job.num_chunks = (n + job.chunk - 1) / job.chunk;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &job;
    ++generation_;
  }
  wake_.notify_all();
  int64_t ran;
  {
    ScopedWorker scope(this, 0);
    ran = drain(job, 0);
  }
  job.done.fetch_add(ran, std::memory_order_acq_rel);
  std::unique_lock<std::mutex> lock(mutex_);
  finished_.wait(lock, [&] { return job.done.load(std::memory_order_acquire) == job.num_chunks && inside_ == 0; });
  job_ = nullptr;
}

void ThreadPool::worker_loop(int32_t index) {
  ScopedWorker scope(this, index);
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || (job_ != nullptr && generation_ != seen); });
    if (stop_) return;
    seen = generation_;
    Job* job = job_;
    ++inside_;
    lock.unlock();
    const int64_t ran = drain(*job, index);
    job->done.fetch_add(ran, std::memory_order_acq_rel);
    lock.lock();
    --inside_;
    if (inside_ == 0) finished_.notify_one();
  }
}

}  // namespace photon
