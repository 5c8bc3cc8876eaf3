// The serving half of `photon bench --engine`: B requests submitted at once
// to an EngineCore (the engine behind photon::Engine: scheduler, block
// manager, chunked prefill mixed with decodes, events), stepped until every
// request has its G tokens. Unlike the lockstep runs it includes everything
// a host pays per step: scheduling, the plan, staging, sampling outputs,
// token bookkeeping and events.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "core/backend.hpp"
#include "model/model.hpp"

namespace photon::cli {

struct EngineBenchArgs {
  std::vector<int32_t> batches;                      // concurrent requests per run
  std::vector<std::pair<int32_t, int32_t>> shapes;  // prompt x generated tokens
  int32_t max_batch_tokens = 2048;
  float temperature = 1.0f;
  uint64_t seed = 1;
  bool overlap_steps = true;  // EngineCoreConfig::overlap automatic (true) or off
};

// Takes the backend and the model (its KV cache already initialized with
// num_blocks blocks of block_size, enough for max(batches) requests of the
// longest shape). Returns one JSON object per (shape, batch) run:
// batch, prompt, generated, output_tok_s (B*G / submit-to-last-token time),
// decode_tok_s and ms_per_decode_step over the full-batch window (every
// request decoding, none finished yet: B tokens per step; wall time between
// steps included), ms_in_step_per_decode_step (the part inside step()),
// decode_window_steps, ttft_ms_p50 / _max, steps, total_s.
nlohmann::json run_engine_bench(std::unique_ptr<Backend> backend, std::unique_ptr<Model> model, int32_t num_blocks,
                                int32_t block_size, const EngineBenchArgs& args);

}  // namespace photon::cli
