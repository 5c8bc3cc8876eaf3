// The engine with overlapped steps (EngineCoreConfig::overlap = on; docs/step-overlap.md, stage
// 2): step N + 1 is scheduled over placeholders for step N's samples and launched before step N
// is finished. FakeRunner runs each step inside its launch (ModelRunner's default launch), so its
// KV model sees the ids the placeholders stood for only if the engine named the right rows; every
// bookkeeping path of the overlap (placeholders, one-step-late stops and length ends, dropped rows,
// cancels and failures while a step is in flight, preemption of a sequence with a placeholder)
// runs as it does on the GPU. The CPU backend's golden models check the same against real logits.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <vector>

#include "fake_engine.hpp"
#include "golden_cases.hpp"
#include "support/engine_run.hpp"
#include "support/test_data.hpp"

using namespace photon;
using namespace photon::test;

namespace {

EngineCoreConfig overlapped(EngineCoreConfig c) {
  c.overlap = StepOverlap::on;
  return c;
}

// n requests over a shared prefix, arriving at steps [0, spread]; odd ones seeded at temperature 0.8.
std::vector<Request> make_requests(int32_t n, int32_t shared_len, uint32_t seed, int32_t vocab, int32_t max_new,
                                   std::vector<int32_t>& arrival, int32_t spread) {
  std::mt19937 rng(seed);
  auto uni = [&](int32_t lo, int32_t hi) { return std::uniform_int_distribution<int32_t>(lo, hi)(rng); };
  std::vector<int32_t> shared;
  for (int32_t i = 0; i < shared_len; ++i) shared.push_back(uni(0, vocab - 1));
  std::vector<Request> out(static_cast<size_t>(n));
  arrival.clear();
  for (size_t i = 0; i < out.size(); ++i) {
    Request& r = out[i];
    r.prompt_tokens = shared;
    for (int32_t k = uni(1, 10); k > 0; --k) r.prompt_tokens.push_back(uni(0, vocab - 1));
    r.max_tokens = uni(1, max_new);
    r.sampling.temperature = i % 2 == 0 ? 0.0f : 0.8f;
    if (i % 2 == 1) r.sampling.seed = 300 + i;
    arrival.push_back(uni(0, spread));
  }
  return out;
}

std::vector<int32_t> expected(const Request& r, int32_t vocab, const std::vector<int32_t>& stops) {
  if (r.sampling.temperature == 0.0f) return fake_expected(r.prompt_tokens, r.max_tokens, vocab, stops);
  return fake_expected(r.prompt_tokens, r.max_tokens, vocab, stops, r.sampling.temperature, *r.sampling.seed);
}

}  // namespace

TEST_CASE("engine with overlapped steps: tokens equal the reference under batching, chunking and preemption",
          "[scheduler]") {
  for (const FakeScenario& row : fake_scenarios()) {
    for (int mode = 0; mode < 4; ++mode) {
      const bool eos = mode % 2 == 1;
      // overlap on: every step is launched before the one in flight finishes; auto over a runner
      // whose decode-only steps return early: other steps first finish the one in flight and take
      // its ids on the host.
      const bool every_step = mode < 2;
      DYNAMIC_SECTION(row.num_requests << " requests, " << row.num_blocks << "x" << row.block_size << " KV, "
                                       << row.max_batch_tokens << " tokens/step" << (eos ? ", an EOS" : "")
                                       << (every_step ? ", overlap on" : ", decode steps overlapped")) {
        auto cfg = fake_config(row.num_blocks, row.block_size, row.max_batch_tokens, row.max_seqs);
        std::vector<int32_t> arrival;
        const auto reqs = make_requests(row.num_requests, row.shared_len, 11u + uint32_t(row.num_requests),
                                        cfg.vocab_size, 12, arrival, row.spread);
        // An EOS that the first request's reference produces early: some requests end by stop,
        // one step before the step that already took their last sample.
        std::vector<int32_t> stops;
        if (eos) {
          const auto free_run = fake_expected(reqs[0].prompt_tokens, 40, cfg.vocab_size, {});
          stops = {free_run[2]};
          cfg.eos_token_ids = stops;
        }
        Engine on = every_step ? make_fake_engine(overlapped(cfg)) : make_fake_engine(cfg, nullptr, -1, true);
        Engine off = make_fake_engine(cfg);
        const auto got = run_staggered(on, reqs, arrival);
        const auto ref = run_staggered(off, reqs, arrival);
        int32_t stopped = 0;
        for (size_t i = 0; i < reqs.size(); ++i) {
          INFO("request " << i);
          const auto want = expected(reqs[i], cfg.vocab_size, stops);
          CHECK(got[i].tokens == want);
          CHECK(got[i].finish == ref[i].finish);
          CHECK(ref[i].tokens == want);
          stopped += got[i].finish == FinishReason::stop;
        }
        if (eos) CHECK(stopped > 0);
        const EngineMetrics m = on.metrics();
        CHECK(m.running == 0);
        CHECK(m.waiting == 0);
        CHECK(m.kv_blocks_used == 0);
        CHECK(m.tokens_generated == off.metrics().tokens_generated);
      }
    }
  }
}

TEST_CASE("engine with overlapped steps: a step's tokens arrive with the next step() call", "[scheduler]") {
  const auto cfg = fake_config(32, 4, 64, 4);
  Engine engine = make_fake_engine(overlapped(cfg));
  Request r{.prompt_tokens = {4, 5, 6}, .max_tokens = 3};
  r.sampling.temperature = 0.0f;
  const RequestId id = *engine.submit(r);
  EventCollector events;
  // Call 1 launches the prefill and leaves it in flight; each later call launches the next step
  // and then returns the one before's token. The last token ends the request, whose next step
  // was never taken (the length was known).
  const auto want = fake_expected(r.prompt_tokens, 3, cfg.vocab_size, {});
  std::vector<size_t> seen;
  for (int call = 0; call < 4; ++call) {
    REQUIRE(engine.step().has_value());
    events.drain(engine);
    seen.push_back(events[id].tokens.size());
  }
  CHECK(seen == std::vector<size_t>{0, 1, 2, 3});
  CHECK(events[id].tokens == want);
  CHECK(events[id].finish == FinishReason::length);
  CHECK_FALSE(engine.has_work());
  CHECK(engine.metrics().kv_blocks_used == 0);
}

TEST_CASE("engine with overlapped steps: cancel while the request's step is in flight", "[scheduler]") {
  const auto cfg = fake_config(16, 4, 8, 2);
  Engine engine = make_fake_engine(overlapped(cfg));
  EventCollector events;
  Request r{.prompt_tokens = {1, 2, 3, 4, 5}, .max_tokens = 20};
  r.sampling.temperature = 0.0f;
  const RequestId a = *engine.submit(r), b = *engine.submit(r);
  for (int i = 0; i < 3; ++i) REQUIRE(engine.step().has_value());  // a and b decode, a step in flight
  events.drain(engine);
  const size_t before = events[b].tokens.size();
  CHECK(before >= 1);  // b runs, its next step in flight
  REQUIRE(engine.cancel(b).has_value());
  REQUIRE(engine.step().has_value());  // the step in flight finishes: b's row there is dropped
  events.drain(engine);
  CHECK(events[b].finish == FinishReason::cancelled);
  CHECK(events[b].tokens.size() == before);
  CHECK(events[b].events.back().token == -1);
  while (engine.has_work()) REQUIRE(engine.step().has_value());
  events.drain(engine);
  CHECK(events[a].finish == FinishReason::length);
  CHECK(events[a].tokens == fake_expected(r.prompt_tokens, 20, cfg.vocab_size, {}));
  CHECK(events[b].finishes == 1);
  const auto b_want = fake_expected(r.prompt_tokens, 20, cfg.vocab_size, {});
  CHECK(events[b].tokens == std::vector<int32_t>(b_want.begin(), b_want.begin() + std::ptrdiff_t(before)));
  CHECK(events.violations() == 0);
  CHECK(engine.metrics().kv_blocks_used == 0);
}

TEST_CASE("engine with overlapped steps: a failed step ends its batch and no other request", "[scheduler]") {
  const auto cfg = fake_config(32, 4, 64, 3);
  // execute() calls: 0 the prefill of a and b, 1 and 2 their decodes (2 fails). The step after the
  // failure holds their decode rows and c's prefill. With overlap on it was launched over the
  // failed step's samples: it fails with it and c goes back to the queue. With decode steps
  // overlapped only, it waits for the failed step, takes no ids from it and runs.
  for (bool every_step : {true, false}) {
    DYNAMIC_SECTION((every_step ? "overlap on" : "decode steps overlapped")) {
      Engine engine = every_step ? make_fake_engine(overlapped(cfg), nullptr, /*fail_at_call=*/2)
                                 : make_fake_engine(cfg, nullptr, /*fail_at_call=*/2, /*early_decode=*/true);
      EventCollector events;
      Request r{.prompt_tokens = {1, 2, 3}, .max_tokens = 6};
      r.sampling.temperature = 0.0f;
      const RequestId a = *engine.submit(r), b = *engine.submit(r);
      for (int i = 0; i < 3; ++i) REQUIRE(engine.step().has_value());
      Request rc{.prompt_tokens = {9, 8, 7, 6}, .max_tokens = 5};
      rc.sampling.temperature = 0.0f;
      const RequestId c = *engine.submit(rc);
      auto failed = engine.step();
      REQUIRE_FALSE(failed.has_value());
      CHECK(failed.error().code == Errc::out_of_memory);
      int errors = 0;
      while (engine.has_work()) errors += engine.step().has_value() ? 0 : 1;
      CHECK(errors == 0);  // one error, for the step that failed
      events.drain(engine);
      CHECK(events[a].finish == FinishReason::error);
      CHECK(events[a].events.back().error.find("injected") != std::string::npos);
      CHECK(events[b].finish == FinishReason::error);
      CHECK(events[c].finish == FinishReason::length);
      CHECK(events[c].tokens == fake_expected(rc.prompt_tokens, 5, cfg.vocab_size, {}));
      CHECK(engine.metrics().preemptions == (every_step ? 1u : 0u));  // c's rerun
      CHECK(events.violations() == 0);
      CHECK(engine.metrics().kv_blocks_used == 0);
    }
  }
}

TEST_CASE("engine with overlapped steps on the CPU backend: golden greedy and seeded runs are unchanged",
          "[scheduler]") {
  const auto cases = load_golden_cases("llama3-tiny");
  // Greedy: the golden ids, batched and chunked under a KV budget that preempts.
  for (const BatchScenario& row : batch_scenarios()) {
    DYNAMIC_SECTION(row.concurrency << " requests, " << row.kv_blocks << "x" << row.block_size << " KV, "
                                    << row.max_batch_tokens << " tokens/step") {
      EngineOptions o = golden_engine_options("llama3-tiny", "cpu", row.kv_blocks, row.block_size,
                                              row.max_batch_tokens, row.max_seqs);
      o.step_overlap = "on";
      auto engine = Engine::open(o);
      REQUIRE(engine.has_value());
      std::vector<Request> reqs;
      std::vector<int32_t> arrival;
      for (int32_t i = 0; i < row.concurrency; ++i) {
        const GoldenCase& c = cases[size_t(i) % cases.size()];
        reqs.push_back(greedy_request(c.prompt, int32_t(c.greedy.size())));
        arrival.push_back(i % 3);
      }
      const auto got = tokens_of_length_runs(run_staggered(*engine, reqs, arrival));
      for (size_t i = 0; i < reqs.size(); ++i) {
        INFO("request " << i);
        CHECK(got[i] == cases[i % cases.size()].greedy);
      }
    }
  }
  // Seeded draws: the tokens of the engine without overlap.
  std::vector<Request> reqs;
  for (int32_t i = 0; i < 6; ++i) {
    Request r = greedy_request(cases[size_t(i) % cases.size()].prompt, 16);
    r.sampling.temperature = 0.9f;
    r.sampling.seed = 40 + uint64_t(i);
    reqs.push_back(std::move(r));
  }
  const std::vector<int32_t> arrival = {0, 0, 1, 2, 2, 5};
  std::vector<std::vector<int32_t>> tokens[2];
  for (int on = 0; on < 2; ++on) {
    EngineOptions o = golden_engine_options("llama3-tiny", "cpu", 64, 16, 32, 8);
    o.step_overlap = on ? "on" : "off";
    auto engine = Engine::open(o);
    REQUIRE(engine.has_value());
    tokens[on] = tokens_of_length_runs(run_staggered(*engine, reqs, arrival));
  }
  for (size_t i = 0; i < reqs.size(); ++i) {
    INFO("request " << i);
    CHECK(tokens[1][i].size() == 16);
    CHECK(tokens[1][i] == tokens[0][i]);
  }
  EngineOptions bad = golden_engine_options("llama3-tiny", "cpu", 64, 16, 32, 8);
  bad.step_overlap = "sometimes";
  auto refused = Engine::open(bad);
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.error().code == Errc::invalid_argument);
  CHECK(refused.error().message.find("step_overlap") != std::string::npos);
}
