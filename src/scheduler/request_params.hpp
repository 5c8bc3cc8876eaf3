// Request validation: turns a public photon::Request into the scheduler's
// SequenceParams, or explains what is wrong with it.
// Thread-compatibility: pure functions.
#pragma once

#include <cstdint>
#include <span>

#include "photon/engine.hpp"
#include "photon/result.hpp"
#include "scheduler/sequence.hpp"

namespace photon {

// What every request of one engine must respect (fixed at open).
struct RequestLimits {
  int32_t vocab_size = 0;
  int32_t max_model_len = 0;       // max_position_embeddings
  int64_t kv_capacity_tokens = 0;  // num_blocks * block_size
  std::span<const int32_t> eos_token_ids;
  int32_t max_logprobs = 20;
};

// Checks `request` (whose prompt ids are `prompt`) and resolves its defaults: the seed (`default_seed` when
// the request has none), max_tokens 0 (as many as fit), the stop set (the
// request's stop_token_ids plus the EOS ids unless ignore_eos).
// Errors: invalid_argument / out_of_range naming the field,
// capacity_exceeded when prompt + max_tokens cannot fit the context or cache.
Result<SequenceParams> resolve_request(const Request& request, std::span<const int32_t> prompt,
                                       const RequestLimits& limits, uint64_t default_seed);

}  // namespace photon
