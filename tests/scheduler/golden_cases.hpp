// The golden greedy continuations of tests/data/golden/<model>/reference.json,
// and the engine scenarios the CPU (tests/scheduler) and CUDA (tests/cuda)
// engine tests both run over them.
#pragma once

#include <cstdint>
#include <fstream>
#include <random>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "photon/engine.hpp"
#include "support/test_data.hpp"

namespace photon::test {

struct GoldenCase {
  std::vector<int32_t> prompt;
  std::vector<int32_t> greedy;  // argmax continuation, no stop token
};

inline std::vector<GoldenCase> load_golden_cases(const std::string& model) {
  std::ifstream in(golden_dir(model) + "/reference.json");
  const auto j = nlohmann::json::parse(in);
  std::vector<GoldenCase> out;
  for (const auto& c : j.at("cases"))
    out.push_back({c.at("prompt_ids").get<std::vector<int32_t>>(), c.at("greedy_ids").get<std::vector<int32_t>>()});
  return out;
}

// An engine on golden model `model` and `backend` with this KV cache and step budget.
inline EngineOptions golden_engine_options(const std::string& model, const std::string& backend, int32_t kv_blocks,
                                           int32_t block_size, int32_t max_batch_tokens, int32_t max_seqs,
                                           bool prefix_caching = true) {
  EngineOptions o;
  o.model_dir = golden_dir(model);
  o.backend = backend;
  o.threads = 2;  // the CPU backend's; CUDA ignores it
  o.kv_blocks = kv_blocks;
  o.block_size = block_size;
  o.max_batch_tokens = max_batch_tokens;
  o.max_seqs = max_seqs;
  o.prefix_caching = prefix_caching;
  return o;
}

// A greedy request of max_tokens tokens that ignores EOS, reporting `logprobs` top tokens per step.
inline Request greedy_request(std::vector<int32_t> prompt, int32_t max_tokens, int32_t logprobs = 0) {
  Request r;
  r.prompt_tokens = std::move(prompt);
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  r.logprobs = logprobs;
  r.sampling.temperature = 0.0f;
  return r;
}

// One batching scenario: `concurrency` requests (the golden cases, repeated)
// arriving at random steps, on an engine of this KV cache and step budget.
struct BatchScenario {
  int32_t concurrency, kv_blocks, block_size, max_batch_tokens, max_seqs;
};

// Each request needs at most 300 + 32 tokens: 21 blocks of 16, 42 of 8.
inline std::vector<BatchScenario> batch_scenarios() {
  return {
      {5, 128, 16, 2048, 8},   // all cases at once
      {10, 128, 16, 7, 16},    // prefill in chunks of 7 tokens
      {12, 512, 4, 1, 12},     // one token per step
      {24, 23, 16, 96, 24},    // barely one long request's blocks: constant preemption
      {64, 100, 8, 160, 64},   // 64 concurrent, staggered, preempting
      {40, 400, 16, 512, 40},  // 40 at once: a decode batch above 32
  };
}

// Arrival step of each of n requests, uniform in [0, 3n] (seeded by n).
inline std::vector<int32_t> random_arrivals(int32_t n) {
  std::mt19937 rng(static_cast<uint32_t>(n));
  std::vector<int32_t> arrival;
  for (int32_t i = 0; i < n; ++i) arrival.push_back(std::uniform_int_distribution<int32_t>(0, 3 * n)(rng));
  return arrival;
}

// 16 prompts sharing long prefixes of `base` (cut at block boundaries and
// inside blocks), each with a private suffix of 1..5 random ids below 1024.
inline std::vector<std::vector<int32_t>> shared_prefix_prompts(const std::vector<int32_t>& base) {
  std::vector<std::vector<int32_t>> prompts;
  std::mt19937 rng(5);
  for (int32_t i = 0; i < 16; ++i) {
    const int32_t keep = 40 + 17 * i;
    std::vector<int32_t> p(base.begin(), base.begin() + keep);
    for (int32_t k = 0; k < 1 + i % 5; ++k) p.push_back(std::uniform_int_distribution<int32_t>(0, 1023)(rng));
    prompts.push_back(std::move(p));
  }
  return prompts;
}

}  // namespace photon::test
