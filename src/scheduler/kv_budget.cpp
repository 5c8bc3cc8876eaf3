#include "scheduler/kv_budget.hpp"

#include <algorithm>
#include <limits>
#include <string>

namespace photon {

Result<int32_t> kv_cache_blocks(const EngineOptions& o, const KvBudgetInputs& in) {
  const int set = int(o.kv_blocks != 0) + int(o.kv_bytes != 0) + int(o.kv_memory_fraction != 0.0);
  if (set > 1)
    return fail(Errc::invalid_argument, "engine options: give at most one of kv_blocks, kv_bytes, kv_memory_fraction");
  if (o.kv_blocks < 0) return fail(Errc::invalid_argument, "engine option kv_blocks = " + std::to_string(o.kv_blocks) + " is negative");
  if (set == 1 && o.kv_memory_fraction != 0.0 && !(o.kv_memory_fraction > 0.0 && o.kv_memory_fraction <= 1.0))
    return fail(Errc::invalid_argument,
                "engine option kv_memory_fraction = " + std::to_string(o.kv_memory_fraction) + " is outside (0, 1]");
  if (in.bytes_per_block == 0) return fail(Errc::internal, "kv_cache_blocks: zero bytes per block");

  const auto blocks_of = [&](double bytes) { return int64_t(bytes / double(in.bytes_per_block)); };
  int64_t blocks = 0;
  std::string budget;
  if (o.kv_blocks > 0) {
    blocks = o.kv_blocks;
    budget = std::to_string(o.kv_blocks) + " blocks";
  } else if (o.kv_bytes > 0) {
    blocks = blocks_of(double(o.kv_bytes));
    budget = std::to_string(o.kv_bytes) + " bytes";
  } else if (o.kv_memory_fraction > 0.0) {
    blocks = blocks_of(o.kv_memory_fraction * double(in.free_memory));
    budget = std::to_string(o.kv_memory_fraction) + " of " + std::to_string(in.free_memory) + " free bytes";
  } else {
    const double bytes = in.device_memory ? 0.9 * double(in.free_memory)
                                          : std::min(double(size_t(1) << 30), 0.25 * double(in.free_memory));
    blocks = blocks_of(bytes);
    const int64_t per_seq = (int64_t(in.max_model_len) + o.block_size - 1) / o.block_size;
    blocks = std::min<int64_t>(blocks, per_seq * o.max_seqs);
    budget = "the default budget (" + std::to_string(int64_t(bytes)) + " bytes)";
  }
  const double need = double(blocks) * double(in.bytes_per_block);
  if (need > double(in.free_memory))
    return fail(Errc::out_of_memory, "KV cache of " + budget + " needs " + std::to_string(int64_t(need)) +
                                         " bytes, more than the " + std::to_string(in.free_memory) + " bytes free");
  if (blocks < 1)
    return fail(Errc::out_of_memory, "KV cache of " + budget + " holds no block of " +
                                         std::to_string(in.bytes_per_block) + " bytes");
  return int32_t(std::min<int64_t>(blocks, std::numeric_limits<int32_t>::max()));
}

}  // namespace photon
