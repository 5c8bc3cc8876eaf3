// KV cache sizing: how many blocks the host's budget (EngineOptions) buys.
// Pure function; thread-compatible.
#pragma once

#include <cstddef>
#include <cstdint>

#include "photon/engine.hpp"
#include "photon/result.hpp"

namespace photon {

struct KvBudgetInputs {
  size_t bytes_per_block = 0;  // Model::kv_bytes_per_block(block_size)
  size_t free_memory = 0;      // Backend::free_memory() after the weights are loaded
  bool device_memory = false;  // true for a GPU backend (changes the default only)
  int32_t max_model_len = 0;   // max_position_embeddings
};

// Blocks for options.kv_blocks, kv_bytes or kv_memory_fraction (at most one
// set). None set: 90% of free device memory, or min(1 GiB, 25% of free RAM),
// capped at what max_seqs sequences of max_model_len tokens can use.
// Errors: invalid_argument (several set, a fraction outside (0, 1], a
// negative count), out_of_memory (the budget buys no block, or a byte budget
// beyond free memory).
Result<int32_t> kv_cache_blocks(const EngineOptions& options, const KvBudgetInputs& in);

}  // namespace photon
