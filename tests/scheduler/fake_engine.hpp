// A photon::Engine over FakeRunner, and an event collector, for engine tests.
#pragma once

#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <vector>

#include "api/engine_impl.hpp"
#include "fake_runner.hpp"
#include "photon/engine.hpp"
#include "scheduler/engine_core.hpp"

namespace photon::test {

inline EngineCoreConfig fake_config(int32_t num_blocks, int32_t block_size, int32_t max_batch_tokens,
                                    int32_t max_seqs, bool prefix_caching = true) {
  EngineCoreConfig c;
  c.num_blocks = num_blocks;
  c.block_size = block_size;
  c.max_batch_tokens = max_batch_tokens;
  c.max_seqs = max_seqs;
  c.prefix_caching = prefix_caching;
  c.vocab_size = 997;
  c.max_model_len = 4096;
  c.eos_token_ids = {};
  c.seed_salt = 12345;
  return c;
}

// Batching scenarios of the engine tests over FakeRunner: request count, KV pool, step budget,
// running limit, shared prompt prefix, and the spread of arrival steps (preemption, chunking and
// prefix sharing in various mixes).
struct FakeScenario {
  int32_t num_requests, num_blocks, block_size, max_batch_tokens, max_seqs, shared_len, spread;
};
inline std::vector<FakeScenario> fake_scenarios() {
  return {{1, 16, 4, 64, 8, 0, 0},     {8, 64, 4, 1, 8, 5, 6},      {16, 12, 4, 9, 16, 0, 3},
          {32, 18, 2, 16, 32, 11, 10}, {64, 40, 4, 64, 64, 20, 20}, {64, 30, 3, 7, 12, 16, 30}};
}

inline Engine make_fake_engine(const EngineCoreConfig& cfg, FakeRunnerLog* log = nullptr, int32_t fail_at_call = -1,
                               bool early_decode = false) {
  auto runner =
      std::make_unique<FakeRunner>(cfg.num_blocks, cfg.block_size, cfg.vocab_size, log, fail_at_call, early_decode);
  auto core = EngineCore::create(cfg, std::move(runner));
  REQUIRE(core.has_value());
  return EngineImplAccess::make(std::make_unique<Engine::Impl>(std::move(*core), "fake"));
}

// Events gathered per request, checking the stream's shape as they come
// (nothing after a finish event). Uses no Catch assertion, so a helper thread
// may own it (Catch2 is not thread-safe); read violations() on the test thread.
struct Collected {
  std::vector<int32_t> tokens;
  std::vector<Event> events;
  FinishReason finish = FinishReason::none;
  int32_t finishes = 0;
};

class EventCollector {
 public:
  void add(std::vector<Event>& events) {
    for (Event& e : events) {
      Collected& c = by_id_[e.request];
      if (c.finishes != 0) ++violations_;  // an event after the finish event
      if (e.token >= 0) c.tokens.push_back(e.token);
      if (e.finish != FinishReason::none) {
        c.finish = e.finish;
        ++c.finishes;
      }
      c.events.push_back(std::move(e));
    }
    events.clear();
  }
  void drain(Engine& engine) {
    std::vector<Event> ev;
    engine.poll(ev);
    add(ev);
  }
  Collected& operator[](RequestId id) { return by_id_[id]; }
  size_t size() const { return by_id_.size(); }
  int violations() const { return violations_; }

 private:
  int violations_ = 0;
  std::map<RequestId, Collected> by_id_;
};

}  // namespace photon::test
