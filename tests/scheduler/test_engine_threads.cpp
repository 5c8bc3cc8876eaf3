// Thread safety of the engine API: submit / cancel / poll / generate from
// several threads while one thread (or the engine's loop) steps. Built and
// run under ThreadSanitizer by scripts/test.sh (tag [thread]).
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "fake_engine.hpp"

using namespace photon;
using namespace photon::test;

namespace {

Request random_request(std::mt19937& rng, int32_t vocab) {
  auto uni = [&](int32_t lo, int32_t hi) { return std::uniform_int_distribution<int32_t>(lo, hi)(rng); };
  Request r;
  for (int32_t i = uni(1, 12); i > 0; --i) r.prompt_tokens.push_back(uni(0, vocab - 1));
  r.max_tokens = uni(1, 10);
  r.sampling.temperature = 0.0f;
  return r;
}

}  // namespace

TEST_CASE("engine: threads submit, cancel and poll while one thread steps", "[scheduler][thread]") {
  const auto cfg = fake_config(24, 4, 16, 8);  // small: preemption happens
  Engine engine = make_fake_engine(cfg);
  constexpr int kSubmitters = 4, kPerThread = 25;
  std::mutex mu;
  std::map<RequestId, Request> accepted;  // guarded by mu
  std::vector<RequestId> cancel_targets;  // guarded by mu
  std::atomic<int> submitters_done{0};
  std::atomic<bool> stop_polling{false};
  std::atomic<int> cancel_failures{0};  // Catch2 assertions stay on this thread

  std::vector<std::thread> threads;
  for (int t = 0; t < kSubmitters; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(uint32_t(100 + t));
      for (int i = 0; i < kPerThread; ++i) {
        Request r = random_request(rng, cfg.vocab_size);
        auto id = engine.submit(r);
        if (!id) continue;
        std::lock_guard lk(mu);
        accepted.emplace(*id, std::move(r));
        if (i % 4 == t % 4) cancel_targets.push_back(*id);
      }
      submitters_done.fetch_add(1);
    });
  }
  threads.emplace_back([&] {  // canceller
    size_t next = 0;
    while (submitters_done.load() < kSubmitters || next < cancel_targets.size()) {
      RequestId id = 0;
      {
        std::lock_guard lk(mu);
        if (next < cancel_targets.size()) id = cancel_targets[next++];
      }
      if (id != 0) {
        if (!engine.cancel(id)) cancel_failures.fetch_add(1);
      } else {
        std::this_thread::yield();
      }
    }
  });
  EventCollector events;  // touched only by the poller until it is joined
  threads.emplace_back([&] {  // poller
    while (!stop_polling.load()) {
      events.drain(engine);
      std::this_thread::yield();
    }
    events.drain(engine);
  });
  // This thread steps.
  bool step_failed = false;
  while (!step_failed && (submitters_done.load() < kSubmitters || engine.has_work())) step_failed = !engine.step();
  stop_polling.store(true);
  for (auto& th : threads) th.join();
  REQUIRE_FALSE(step_failed);

  CHECK(cancel_failures.load() == 0);
  CHECK(events.violations() == 0);
  REQUIRE(accepted.size() == size_t(kSubmitters * kPerThread));
  REQUIRE(events.size() == accepted.size());
  int cancelled = 0;
  for (auto& [id, r] : accepted) {
    INFO("request " << id);
    Collected& c = events[id];
    CHECK(c.finishes == 1);
    const auto want = fake_expected(r.prompt_tokens, r.max_tokens, cfg.vocab_size, {});
    if (c.finish == FinishReason::cancelled) {
      ++cancelled;
      CHECK(std::equal(c.tokens.begin(), c.tokens.end(), want.begin()));
    } else {
      CHECK(c.finish == FinishReason::length);
      CHECK(c.tokens == want);
    }
  }
  CHECK(engine.metrics().kv_blocks_used == 0);
  CHECK(engine.metrics().running == 0);
}

TEST_CASE("engine: generate from several threads with the engine-owned loop", "[scheduler][thread]") {
  const auto cfg = fake_config(32, 4, 24, 16);
  Engine engine = make_fake_engine(cfg);
  REQUIRE(engine.start_loop().has_value());
  CHECK(engine.start_loop().error().code == Errc::invalid_state);
  constexpr int kThreads = 4;
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0}, failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(uint32_t(7 + t));
      for (int i = 0; i < 6; ++i) {
        std::vector<Request> batch;
        for (int k = 0; k < 3; ++k) batch.push_back(random_request(rng, cfg.vocab_size));
        auto done = engine.generate(batch);
        if (!done) {
          failures.fetch_add(1);
          continue;
        }
        for (size_t k = 0; k < batch.size(); ++k)
          if ((*done)[k].tokens != fake_expected(batch[k].prompt_tokens, batch[k].max_tokens, cfg.vocab_size, {}))
            mismatches.fetch_add(1);
      }
    });
  }
  // Meanwhile plain submissions, observed through poll().
  std::mt19937 rng(1);
  std::map<RequestId, Request> mine;
  for (int i = 0; i < 10; ++i) {
    Request r = random_request(rng, cfg.vocab_size);
    mine.emplace(*engine.submit(r), r);
  }
  EventCollector events;
  while (true) {
    events.drain(engine);
    bool all = true;
    for (auto& [id, r] : mine) all = all && events[id].finishes == 1;
    if (all) break;
    std::this_thread::yield();
  }
  for (auto& th : threads) th.join();
  engine.stop_loop();
  engine.stop_loop();  // a second stop is a no-op
  CHECK(failures.load() == 0);
  CHECK(mismatches.load() == 0);
  for (auto& [id, r] : mine) CHECK(events[id].tokens == fake_expected(r.prompt_tokens, r.max_tokens, cfg.vocab_size, {}));
  events.drain(engine);
  CHECK(events.size() == mine.size());  // generate()'s events never reach poll()
  CHECK(events.violations() == 0);
  // Stepping by hand works again after the loop stopped.
  auto c = engine.generate(random_request(rng, cfg.vocab_size));
  CHECK(c.has_value());
}

TEST_CASE("engine: poll with a timeout sleeps until the loop thread publishes events", "[scheduler][thread]") {
  const auto cfg = fake_config(32, 4, 24, 16);
  Engine engine = make_fake_engine(cfg);
  std::vector<Event> out;
  // Nothing submitted: the wait ends at the timeout with no event.
  CHECK(engine.poll(out, std::chrono::milliseconds(5)) == 0);
  CHECK(out.empty());

  REQUIRE(engine.start_loop().has_value());
  std::mt19937 rng(3);
  const Request r = random_request(rng, cfg.vocab_size);
  const RequestId id = *engine.submit(r);
  EventCollector events;
  // Each wait returns as soon as a step published something; bounded so a
  // lost wake-up fails the test instead of hanging it.
  for (int i = 0; i < 1000 && events[id].finishes == 0; ++i) {
    out.clear();
    engine.poll(out, std::chrono::milliseconds(100));
    events.add(out);
  }
  engine.stop_loop();
  CHECK(events[id].finishes == 1);
  CHECK(events[id].tokens == fake_expected(r.prompt_tokens, r.max_tokens, cfg.vocab_size, {}));
  CHECK(events.violations() == 0);
}
