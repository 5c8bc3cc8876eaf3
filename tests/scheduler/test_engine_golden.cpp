// End to end on the CPU backend with the golden tiny models: batched greedy
// equals single-request greedy equals the Hugging Face greedy_ids, whatever
// the concurrency, arrival pattern, chunk size, KV budget (preemption) and
// prefix sharing; seeded sampling does not depend on the batch.
#include <catch2/catch.hpp>

#include <vector>

#include "golden_cases.hpp"
#include "photon/engine.hpp"
#include "support/engine_run.hpp"
#include "support/test_data.hpp"

using namespace photon;
using namespace photon::test;

namespace {

EngineOptions cpu_options(const std::string& model, int32_t kv_blocks, int32_t block_size, int32_t max_batch_tokens,
                          int32_t max_seqs, bool prefix_caching = true) {
  return golden_engine_options(model, "cpu", kv_blocks, block_size, max_batch_tokens, max_seqs, prefix_caching);
}

Request greedy(std::vector<int32_t> prompt, int32_t max_tokens) { return greedy_request(std::move(prompt), max_tokens); }

// The generated tokens of each request (CHECKs a length finish).
std::vector<std::vector<int32_t>> staggered_tokens(Engine& engine, const std::vector<Request>& reqs,
                                                   const std::vector<int32_t>& arrival) {
  return tokens_of_length_runs(run_staggered(engine, reqs, arrival));
}

}  // namespace

TEST_CASE("engine on the CPU backend: single requests reproduce the golden greedy_ids", "[scheduler]") {
  for (const char* model : {"llama3-tiny", "qwen3-tiny"}) {
    DYNAMIC_SECTION(model) {
      auto engine = Engine::open(cpu_options(model, 64, 16, 2048, 8));
      REQUIRE(engine.has_value());
      CHECK(engine->backend_name() == "cpu");
      for (const GoldenCase& c : load_golden_cases(model)) {
        INFO("prompt length " << c.prompt.size());
        auto done = engine->generate(greedy(c.prompt, int32_t(c.greedy.size())));
        REQUIRE(done.has_value());
        CHECK(done->tokens == c.greedy);
        CHECK(done->finish == FinishReason::length);
      }
    }
  }
}

TEST_CASE("engine on the CPU backend: batched greedy equals golden greedy", "[scheduler]") {
  const char* models[] = {"llama3-tiny", "qwen3-tiny"};
  for (const char* model : models) {
    const auto cases = load_golden_cases(model);
    for (const BatchScenario& row : batch_scenarios()) {
      DYNAMIC_SECTION(model << ": " << row.concurrency << " requests, " << row.kv_blocks << "x" << row.block_size
                            << " KV, " << row.max_batch_tokens << " tokens/step") {
        auto engine = Engine::open(cpu_options(model, row.kv_blocks, row.block_size, row.max_batch_tokens, row.max_seqs));
        REQUIRE(engine.has_value());
        std::vector<Request> reqs;
        for (int32_t i = 0; i < row.concurrency; ++i) {
          const GoldenCase& c = cases[size_t(i) % cases.size()];
          reqs.push_back(greedy(c.prompt, int32_t(c.greedy.size())));
        }
        const auto got = staggered_tokens(*engine, reqs, random_arrivals(row.concurrency));
        for (int32_t i = 0; i < row.concurrency; ++i) {
          INFO("request " << i << ", prompt length " << reqs[size_t(i)].prompt_tokens.size());
          CHECK(got[size_t(i)] == cases[size_t(i) % cases.size()].greedy);
        }
        const EngineMetrics m = engine->metrics();
        CHECK(m.kv_blocks_used == 0);
        if (row.kv_blocks < 30) CHECK(m.preemptions > 0);
        if (row.concurrency > int32_t(cases.size())) CHECK(m.prefix_hit_rate > 0.0);  // repeated prompts
      }
    }
  }
}

TEST_CASE("engine on the CPU backend: shared prefixes change nothing", "[scheduler]") {
  const auto cases = load_golden_cases("llama3-tiny");
  std::vector<Request> reqs;
  for (auto& p : shared_prefix_prompts(cases.back().prompt)) reqs.push_back(greedy(std::move(p), 12));  // of 300 tokens
  // Reference: each request alone, no prefix cache.
  auto lone = Engine::open(cpu_options("llama3-tiny", 64, 16, 512, 1, false));
  REQUIRE(lone.has_value());
  std::vector<std::vector<int32_t>> want;
  for (const Request& r : reqs) {
    auto c = lone->generate(r);
    REQUIRE(c.has_value());
    want.push_back(c->tokens);
  }
  for (int32_t block_size : {16, 5}) {
    DYNAMIC_SECTION("block size " << block_size) {
      auto shared = Engine::open(cpu_options("llama3-tiny", 2000 / block_size, block_size, 128, 16));
      REQUIRE(shared.has_value());
      std::vector<int32_t> arrival;
      for (size_t i = 0; i < reqs.size(); ++i) arrival.push_back(int32_t(i) * 2);
      const auto got = staggered_tokens(*shared, reqs, arrival);
      for (size_t i = 0; i < reqs.size(); ++i) {
        INFO("request " << i);
        CHECK(got[i] == want[i]);
      }
      CHECK(shared->metrics().prefix_hit_rate > 0.5);
    }
  }
}

TEST_CASE("engine on the CPU backend: seeded sampling gives the same tokens whatever the batch", "[scheduler]") {
  const auto cases = load_golden_cases("qwen3-tiny");
  auto sampled = [](std::vector<int32_t> prompt, uint64_t seed) {
    Request r;
    r.prompt_tokens = std::move(prompt);
    r.max_tokens = 24;
    r.ignore_eos = true;
    r.logprobs = 3;
    r.sampling.temperature = 0.9f;
    r.sampling.top_k = 40;
    r.sampling.top_p = 0.95f;
    r.sampling.min_p = 0.01f;
    r.sampling.repetition_penalty = 1.1f;
    r.sampling.presence_penalty = 0.2f;
    r.sampling.frequency_penalty = 0.1f;
    r.sampling.seed = seed;
    return r;
  };
  std::vector<Request> reqs;
  for (int32_t i = 0; i < 20; ++i) reqs.push_back(sampled(cases[size_t(i) % cases.size()].prompt, 1000 + uint64_t((i / 5) % 2)));
  std::vector<Completion> alone;
  {
    auto engine = Engine::open(cpu_options("qwen3-tiny", 64, 16, 2048, 1));
    REQUIRE(engine.has_value());
    for (const Request& r : reqs) {
      auto c = engine->generate(r);
      REQUIRE(c.has_value());
      alone.push_back(*c);
    }
  }
  // Batched, preempting, chunked.
  auto engine = Engine::open(cpu_options("qwen3-tiny", 30, 16, 64, 20));
  REQUIRE(engine.has_value());
  std::vector<int32_t> arrival;
  for (size_t i = 0; i < reqs.size(); ++i) arrival.push_back(int32_t(i % 5));
  const auto got = staggered_tokens(*engine, reqs, arrival);
  CHECK(engine->metrics().preemptions > 0);
  for (size_t i = 0; i < reqs.size(); ++i) {
    INFO("request " << i);
    CHECK(got[i] == alone[i].tokens);
  }
  // Equal seed and prompt: equal tokens; the logprobs are reported.
  CHECK(alone[0].tokens == alone[10].tokens);  // case 0, seed 1000 both
  CHECK(alone[0].tokens != alone[5].tokens);   // case 0, seed 1001
  REQUIRE(alone[0].top_logprobs.size() == alone[0].tokens.size());
  for (const auto& top : alone[0].top_logprobs) {
    REQUIRE(top.size() == 3);
    CHECK(top[0].logprob >= top[1].logprob);
    CHECK(top[1].logprob >= top[2].logprob);
  }
}

TEST_CASE("Engine::open reports bad options and folders", "[scheduler]") {
  auto code = [](EngineOptions o) {
    auto e = Engine::open(o);
    return e ? Errc::ok : e.error().code;
  };
  EngineOptions ok = cpu_options("llama3-tiny", 16, 16, 64, 4);
  CHECK(code(ok) == Errc::ok);
  EngineOptions o = ok;
  o.model_dir = "";
  CHECK(code(o) == Errc::invalid_argument);
  o = ok;
  o.model_dir = data_dir() + "/no-such-model";
  CHECK(code(o) == Errc::file_not_found);
  o = ok;
  o.backend = "tpu";
  CHECK(code(o) == Errc::invalid_argument);
  o = ok;
  o.kv_bytes = 1 << 20;  // two budgets
  CHECK(code(o) == Errc::invalid_argument);
  o = ok;
  o.kv_blocks = 0;
  o.kv_bytes = 10;  // less than a block
  CHECK(code(o) == Errc::out_of_memory);
  o = ok;
  o.block_size = 0;
  CHECK(code(o) == Errc::invalid_argument);
  o = ok;
  o.max_seqs = 0;
  CHECK(code(o) == Errc::invalid_argument);
#ifndef PHOTON_HAVE_CUDA
  o = ok;
  o.backend = "cuda";
  CHECK(code(o) == Errc::unsupported);
  o.backend = "auto";  // falls back to the CPU
  auto e = Engine::open(o);
  REQUIRE(e.has_value());
  CHECK(e->backend_name() == "cpu");
#endif
}
