#include <catch2/catch.hpp>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "core/thread_pool.hpp"

using namespace photon;

TEST_CASE("ThreadPool runs every index exactly once", "[core]") {
  for (int32_t threads : {0, 1, 3}) {
    auto pool = ThreadPool::create(threads);
    REQUIRE(pool.has_value());
    CHECK((*pool)->num_threads() == threads);
    for (int64_t n : {0, 1, 2, 7, 1000, 4097}) {
      for (int64_t grain : {0, 1, 5, 64}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        std::atomic<bool> empty_chunk{false};  // Catch's CHECK is not thread-safe: record, check after
        (*pool)->parallel_for(3, 3 + n, [&](int64_t b, int64_t e) {
          if (b >= e) empty_chunk = true;
          for (int64_t i = b; i < e; ++i) hits[size_t(i - 3)]++;
        }, grain);
        CHECK_FALSE(empty_chunk.load());
        for (int64_t i = 0; i < n; ++i) CHECK(hits[size_t(i)].load() == 1);
      }
    }
  }
}

TEST_CASE("ThreadPool worker indices are in range and never shared at once", "[core]") {
  auto pool = ThreadPool::create(3);
  REQUIRE(pool.has_value());
  ThreadPool& p = **pool;
  std::vector<std::atomic<int>> in_use(size_t(p.max_concurrency()));
  std::atomic<bool> ok{true};
  std::mutex m;
  std::set<int32_t> seen;
  for (int rep = 0; rep < 50; ++rep) {
    p.parallel_for_indexed(0, 256, [&](int32_t w, int64_t, int64_t) {
      if (w < 0 || w >= p.max_concurrency()) {
        ok = false;
        return;
      }
      if (in_use[size_t(w)].fetch_add(1) != 0) ok = false;
      volatile double sink = 0;
      for (int i = 0; i < 2000; ++i) sink = sink + i;
      in_use[size_t(w)].fetch_sub(1);
      std::lock_guard<std::mutex> lock(m);
      seen.insert(w);
    }, 1);
  }
  CHECK(ok.load());
  CHECK_FALSE(seen.empty());
}

TEST_CASE("ThreadPool nested parallel_for runs serially on the calling worker", "[core]") {
  auto pool = ThreadPool::create(2);
  REQUIRE(pool.has_value());
  ThreadPool& p = **pool;
  std::vector<std::atomic<int>> hits(100);
  std::atomic<bool> same_worker{true};
  p.parallel_for_indexed(0, 10, [&](int32_t outer, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      p.parallel_for_indexed(0, 10, [&](int32_t inner, int64_t ib, int64_t ie) {
        if (inner != outer) same_worker = false;
        for (int64_t j = ib; j < ie; ++j) hits[size_t(i * 10 + j)]++;
      });
  }, 1);
  for (auto& h : hits) CHECK(h.load() == 1);
  CHECK(same_worker.load());
}

TEST_CASE("ThreadPool rejects a negative thread count", "[core]") {
  auto pool = ThreadPool::create(-1);
  REQUIRE_FALSE(pool.has_value());
  CHECK(pool.error().code == Errc::invalid_argument);
}

TEST_CASE("Pools of two engines run side by side, and callers of one pool take turns", "[core]") {
  auto a = ThreadPool::create(2);
  auto b = ThreadPool::create(1);
  REQUIRE((a.has_value() && b.has_value()));
  auto sum_on = [](ThreadPool& p, int64_t n) {
    std::atomic<int64_t> sum{0};
    for (int rep = 0; rep < 20; ++rep)
      p.parallel_for(0, n, [&](int64_t b0, int64_t e0) {
        for (int64_t i = b0; i < e0; ++i) sum += i;
      }, 3);
    return sum.load();
  };
  int64_t s1 = 0, s2 = 0, s3 = 0;
  std::thread t1([&] { s1 = sum_on(**a, 1000); });
  std::thread t2([&] { s2 = sum_on(**b, 500); });
  std::thread t3([&] { s3 = sum_on(**b, 300); });
  t1.join();
  t2.join();
  t3.join();
  CHECK(s1 == 20 * 499500);
  CHECK(s2 == 20 * 124750);
  CHECK(s3 == 20 * 44850);
}
