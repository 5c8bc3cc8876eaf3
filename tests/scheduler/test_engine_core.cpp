// The engine core through the public photon::Engine API, with FakeRunner in
// place of a model: batching, preemption, stop conditions, seeded rows,
// cancellation, rejection at submit, failure handling, metrics.
#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include "fake_engine.hpp"

using namespace photon;
using namespace photon::test;

namespace {

struct Arrival {
  Request request;
  int32_t step = 0;
};

std::vector<Arrival> make_arrivals(int32_t n, int32_t shared_len, int32_t spread, uint32_t seed, int32_t vocab,
                                   int32_t max_new = 12) {
  std::mt19937 rng(seed);
  auto uni = [&](int32_t lo, int32_t hi) { return std::uniform_int_distribution<int32_t>(lo, hi)(rng); };
  std::vector<int32_t> shared;
  for (int32_t i = 0; i < shared_len; ++i) shared.push_back(uni(0, vocab - 1));
  std::vector<Arrival> out(static_cast<size_t>(n));
  for (auto& a : out) {
    a.request.prompt_tokens = shared;
    for (int32_t i = uni(1, 10); i > 0; --i) a.request.prompt_tokens.push_back(uni(0, vocab - 1));
    a.request.max_tokens = uni(1, max_new);
    a.request.sampling.temperature = 0.0f;
    a.step = uni(0, spread);
  }
  return out;
}

// Submits each arrival at its step, steps until all finish, returns per-arrival tokens.
std::vector<Collected> run_all(Engine& engine, const std::vector<Arrival>& arrivals) {
  EventCollector events;
  std::vector<RequestId> ids(arrivals.size(), 0);
  size_t submitted = 0;
  for (int32_t t = 0; submitted < arrivals.size() || engine.has_work(); ++t) {
    REQUIRE(t < 100000);
    for (size_t i = 0; i < arrivals.size(); ++i) {
      if (arrivals[i].step == t) {
        auto id = engine.submit(arrivals[i].request);
        REQUIRE(id.has_value());
        ids[i] = *id;
        ++submitted;
      }
    }
    auto st = engine.step();
    REQUIRE(st.has_value());
    events.drain(engine);
  }
  std::vector<Collected> out;
  for (RequestId id : ids) out.push_back(events[id]);
  return out;
}

}  // namespace

TEST_CASE("engine: batched greedy equals single-request greedy under preemption and chunking", "[scheduler]") {
  for (const FakeScenario& row : fake_scenarios()) {
    DYNAMIC_SECTION(row.num_requests << " requests, " << row.num_blocks << "x" << row.block_size << " KV, "
                                     << row.max_batch_tokens << " tokens/step") {
      const auto cfg = fake_config(row.num_blocks, row.block_size, row.max_batch_tokens, row.max_seqs);
      const auto arrivals = make_arrivals(row.num_requests, row.shared_len, row.spread, 7u + uint32_t(row.num_requests),
                                          cfg.vocab_size);
      Engine batched = make_fake_engine(cfg);
      const auto got = run_all(batched, arrivals);
      for (size_t i = 0; i < arrivals.size(); ++i) {
        INFO("request " << i);
        const auto& r = arrivals[i].request;
        const auto want = fake_expected(r.prompt_tokens, r.max_tokens, cfg.vocab_size, {});
        CHECK(got[i].tokens == want);
        CHECK(got[i].finish == FinishReason::length);
        CHECK(got[i].finishes == 1);
        // The same request alone in a fresh engine.
        Engine alone = make_fake_engine(cfg);
        auto single = alone.generate(r);
        REQUIRE(single.has_value());
        CHECK(single->tokens == want);
      }
      const EngineMetrics m = batched.metrics();
      CHECK(m.running == 0);
      CHECK(m.waiting == 0);
      CHECK(m.kv_blocks_used == 0);
      CHECK(m.tokens_generated > 0);
      CHECK(m.tokens_per_step > 0.0);
    }
  }
}

TEST_CASE("engine: stop tokens end a request with reason stop", "[scheduler]") {
  auto cfg = fake_config(64, 4, 32, 8);
  // Pick a stop token that the reference continuation of this prompt produces.
  const std::vector<int32_t> prompt{5, 6, 7};
  const auto free_run = fake_expected(prompt, 40, cfg.vocab_size, {});
  const int32_t stop_tok = free_run[5];
  const auto first = size_t(std::find(free_run.begin(), free_run.end(), stop_tok) - free_run.begin());
  SECTION("a request stop token") {
    Engine engine = make_fake_engine(cfg);
    Request r{.prompt_tokens = prompt, .max_tokens = 40, .stop_token_ids = {stop_tok}};
    r.sampling.temperature = 0.0f;
    auto c = engine.generate(r);
    REQUIRE(c.has_value());
    CHECK(c->finish == FinishReason::stop);
    CHECK(c->tokens == std::vector<int32_t>(free_run.begin(), free_run.begin() + std::ptrdiff_t(first) + 1));
  }
  SECTION("the model EOS, unless ignore_eos") {
    cfg.eos_token_ids = {stop_tok};
    Engine engine = make_fake_engine(cfg);
    Request r{.prompt_tokens = prompt, .max_tokens = 40};
    r.sampling.temperature = 0.0f;
    auto c = engine.generate(r);
    REQUIRE(c.has_value());
    CHECK(c->finish == FinishReason::stop);
    CHECK(c->tokens.size() == first + 1);
    r.ignore_eos = true;
    auto d = engine.generate(r);
    REQUIRE(d.has_value());
    CHECK(d->finish == FinishReason::length);
    CHECK(d->tokens == free_run);
  }
}

TEST_CASE("engine: seeded rows do not depend on the batch or on preemption", "[scheduler]") {
  const auto cfg = fake_config(10, 4, 8, 16);  // tight: forces preemption
  auto arrivals = make_arrivals(16, 6, 5, 99, cfg.vocab_size, 10);
  for (size_t i = 0; i < arrivals.size(); ++i) {
    arrivals[i].request.sampling.temperature = 0.8f;
    if (i % 2 == 0) arrivals[i].request.sampling.seed = 1000 + i;
  }
  Engine engine = make_fake_engine(cfg);
  const auto got = run_all(engine, arrivals);
  CHECK(engine.metrics().preemptions > 0);
  for (size_t i = 0; i < arrivals.size(); i += 2) {
    INFO("request " << i);
    const auto& r = arrivals[i].request;
    CHECK(got[i].tokens == fake_expected(r.prompt_tokens, r.max_tokens, cfg.vocab_size, {}, 0.8f, *r.sampling.seed));
  }
  // Unseeded requests get distinct engine-chosen seeds.
  Engine other = make_fake_engine(cfg);
  Request r = arrivals[1].request;
  r.max_tokens = 8;
  auto a = other.generate(r);
  auto b = other.generate(r);
  REQUIRE((a && b));
  CHECK(a->tokens != b->tokens);
}

TEST_CASE("engine: logprobs and penalty history reach the sampler and the events", "[scheduler]") {
  const auto cfg = fake_config(32, 4, 32, 8);
  FakeRunnerLog log;
  Engine engine = make_fake_engine(cfg, &log);
  Request r;
  r.prompt_tokens = {3, 4, 3};
  r.max_tokens = 3;
  r.logprobs = 4;
  r.sampling.temperature = 0.0f;
  r.sampling.frequency_penalty = 0.5f;
  auto c = engine.generate(r);
  REQUIRE(c.has_value());
  REQUIRE(c->tokens.size() == 3);
  REQUIRE(c->top_logprobs.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(c->logprobs[i] == fake_logprob(c->tokens[i]));
    REQUIRE(c->top_logprobs[i].size() == 4);
    CHECK(c->top_logprobs[i][0].token == c->tokens[i]);
    CHECK(c->top_logprobs[i][3].logprob == fake_logprob(c->tokens[i]) - 3.0f);
  }
  // At the last sample: distinct tokens of prompt + the 2 generated so far,
  // with their counts among generated tokens only.
  std::vector<int32_t> ctx = {3, 4, 3, c->tokens[0], c->tokens[1]};
  std::vector<int32_t> distinct, counts;
  for (size_t i = 0; i < ctx.size(); ++i) {
    auto it = std::find(distinct.begin(), distinct.end(), ctx[i]);
    if (it == distinct.end()) {
      distinct.push_back(ctx[i]);
      counts.push_back(0);
      it = distinct.end() - 1;
    }
    if (i >= 3) ++counts[size_t(it - distinct.begin())];
  }
  std::lock_guard lk(log.mutex);
  CHECK(log.history_tokens == distinct);
  CHECK(log.history_counts == counts);
}

TEST_CASE("engine: requests that can never fit are rejected at submit", "[scheduler]") {
  auto cfg = fake_config(8, 4, 32, 8);  // 32 KV tokens
  cfg.max_model_len = 24;
  Engine engine = make_fake_engine(cfg);
  Request ok{.prompt_tokens = {1, 2, 3}, .max_tokens = 4};
  CHECK(engine.submit(ok).has_value());
  auto code = [&](Request r) {
    auto id = engine.submit(std::move(r));
    return id ? Errc::ok : id.error().code;
  };
  Request r = ok;
  r.max_tokens = 22;  // 3 + 22 > max_position_embeddings 24
  CHECK(code(r) == Errc::capacity_exceeded);
  cfg.max_model_len = 4096;
  Engine big_ctx = make_fake_engine(cfg);
  r.max_tokens = 30;  // 33 tokens > 32 KV slots
  auto rej = big_ctx.submit(r);
  REQUIRE_FALSE(rej.has_value());
  CHECK(rej.error().code == Errc::capacity_exceeded);
  CHECK(rej.error().message.find("KV cache") != std::string::npos);
  r.max_tokens = 0;  // as many as fit: 29
  auto fit = big_ctx.generate(r);
  REQUIRE(fit.has_value());
  CHECK(fit->tokens.size() == 29);
  CHECK(fit->finish == FinishReason::length);

  r = ok;
  r.prompt_tokens.clear();
  CHECK(code(r) == Errc::invalid_argument);
  r = ok;
  r.prompt_tokens[1] = 997;
  CHECK(code(r) == Errc::out_of_range);
  r = ok;
  r.prompt_tokens[1] = -1;
  CHECK(code(r) == Errc::out_of_range);
  r = ok;
  r.stop_token_ids = {5000};
  CHECK(code(r) == Errc::out_of_range);
  r = ok;
  r.max_tokens = -1;
  CHECK(code(r) == Errc::invalid_argument);
  r = ok;
  r.logprobs = 21;
  CHECK(code(r) == Errc::invalid_argument);
  r = ok;
  r.sampling.temperature = -0.5f;
  CHECK(code(r) == Errc::invalid_argument);
  r = ok;
  r.sampling.top_p = 0.0f;
  CHECK(code(r) == Errc::invalid_argument);
  r = ok;
  r.sampling.min_p = 1.5f;
  CHECK(code(r) == Errc::invalid_argument);
  r = ok;
  r.sampling.top_k = -3;
  CHECK(code(r) == Errc::invalid_argument);
  r = ok;
  r.sampling.repetition_penalty = 0.0f;
  CHECK(code(r) == Errc::invalid_argument);
  r = ok;
  r.sampling.presence_penalty = 3.0f;
  CHECK(code(r) == Errc::invalid_argument);
  r = ok;
  r.sampling.frequency_penalty = -2.5f;
  auto e = engine.submit(r);
  REQUIRE_FALSE(e.has_value());
  CHECK(e.error().message.find("frequency_penalty") != std::string::npos);
  // generate() submits nothing when one request is malformed.
  std::vector<Request> batch{ok, r};
  auto g = engine.generate(batch);
  REQUIRE_FALSE(g.has_value());
  CHECK(g.error().message.find("requests[1]") != std::string::npos);
}

TEST_CASE("engine: cancel ends waiting and running requests and frees their blocks", "[scheduler]") {
  const auto cfg = fake_config(16, 4, 8, 2);
  Engine engine = make_fake_engine(cfg);
  EventCollector events;
  Request r{.prompt_tokens = {1, 2, 3, 4, 5}, .max_tokens = 20};
  r.sampling.temperature = 0.0f;
  const RequestId a = *engine.submit(r), b = *engine.submit(r), c = *engine.submit(r);
  REQUIRE(engine.step().has_value());  // a, b running (max_seqs 2); c waiting
  CHECK(engine.metrics().running == 2);
  CHECK(engine.metrics().waiting == 1);
  REQUIRE(engine.cancel(b).has_value());
  REQUIRE(engine.cancel(c).has_value());
  REQUIRE(engine.step().has_value());
  events.drain(engine);
  CHECK(events[b].finish == FinishReason::cancelled);
  CHECK(events[b].events.back().token == -1);
  CHECK(events[c].finish == FinishReason::cancelled);
  CHECK(events[c].tokens.empty());
  CHECK(engine.metrics().running == 1);
  CHECK(engine.metrics().waiting == 0);
  while (engine.has_work()) REQUIRE(engine.step().has_value());
  events.drain(engine);
  CHECK(events[a].finish == FinishReason::length);
  CHECK(events[a].tokens.size() == 20);
  CHECK(engine.metrics().kv_blocks_used == 0);
  // Cancelling a finished request is a no-op; an id never issued is an error.
  CHECK(engine.cancel(a).has_value());
  REQUIRE(engine.step().has_value());
  events.drain(engine);
  CHECK(events[a].finishes == 1);
  CHECK(engine.cancel(0).error().code == Errc::unknown_request);
  CHECK(engine.cancel(c + 100).error().code == Errc::unknown_request);
}

TEST_CASE("engine: a failed step ends its batch with error events and the engine goes on", "[scheduler]") {
  const auto cfg = fake_config(32, 4, 64, 2);
  Engine engine = make_fake_engine(cfg, nullptr, /*fail_at_call=*/2);
  EventCollector events;
  Request r{.prompt_tokens = {1, 2, 3}, .max_tokens = 5};
  r.sampling.temperature = 0.0f;
  const RequestId a = *engine.submit(r), b = *engine.submit(r), c = *engine.submit(r);
  REQUIRE(engine.step().has_value());
  REQUIRE(engine.step().has_value());
  auto failed = engine.step();  // third execute() fails: a and b are in it, c waits (max_seqs 2)
  REQUIRE_FALSE(failed.has_value());
  CHECK(failed.error().code == Errc::out_of_memory);
  while (engine.has_work()) REQUIRE(engine.step().has_value());
  events.drain(engine);
  CHECK(events[a].finish == FinishReason::error);
  CHECK(events[a].events.back().error.find("injected") != std::string::npos);
  CHECK(events[b].finish == FinishReason::error);
  CHECK(events[c].finish == FinishReason::length);
  CHECK(events[c].tokens == fake_expected(r.prompt_tokens, 5, cfg.vocab_size, {}));
  CHECK(engine.metrics().kv_blocks_used == 0);
}

TEST_CASE("engine core rejects bad options", "[scheduler]") {
  auto bad = [](EngineCoreConfig c) {
    auto core = EngineCore::create(c, std::make_unique<FakeRunner>(4, 4, 10));
    return core ? Errc::ok : core.error().code;
  };
  auto c = fake_config(16, 4, 32, 8);
  CHECK(bad(c) == Errc::ok);
  auto c1 = c;
  c1.num_blocks = 0;
  CHECK(bad(c1) == Errc::invalid_argument);
  auto c2 = c;
  c2.block_size = 0;
  CHECK(bad(c2) == Errc::invalid_argument);
  auto c3 = c;
  c3.max_batch_tokens = 0;
  CHECK(bad(c3) == Errc::invalid_argument);
  auto c4 = c;
  c4.max_seqs = 0;
  CHECK(bad(c4) == Errc::invalid_argument);
  CHECK(EngineCore::create(c, nullptr).error().code == Errc::invalid_argument);
}
