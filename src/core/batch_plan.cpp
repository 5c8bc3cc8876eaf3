#include "core/batch_plan.hpp"

#include <algorithm>
#include <string>

namespace photon {

void BatchPlan::clear() noexcept {
  input_ids.clear();
  positions.clear();
  query_start.clear();
  context_lens.clear();
  block_tables.clear();
  slot_mapping.clear();
  logits_rows.clear();
  max_blocks_per_seq = 0;
  pending_blocks_.clear();
  pending_block_counts_.clear();
  direct_width_ = 0;
}

void BatchPlan::add_sequence(const int32_t* ids, int32_t n, int32_t first_pos, const int32_t* blocks,
                             int32_t num_blocks, int32_t block_size, bool want_logits) {
  if (query_start.empty()) query_start.push_back(0);
  for (int32_t i = 0; i < n; ++i) {
    const int32_t pos = first_pos + i;
    input_ids.push_back(ids[i]);
    positions.push_back(pos);
    slot_mapping.push_back(blocks[pos / block_size] * block_size + pos % block_size);
  }
  query_start.push_back(int32_t(input_ids.size()));
  context_lens.push_back(first_pos + n);
  if (direct_width_ > 0) {
    const int32_t row = std::min(num_blocks, direct_width_);
    block_tables.insert(block_tables.end(), blocks, blocks + row);
    block_tables.insert(block_tables.end(), size_t(direct_width_ - row), -1);
  } else {
    pending_blocks_.insert(pending_blocks_.end(), blocks, blocks + num_blocks);
    pending_block_counts_.push_back(num_blocks);
  }
  if (want_logits && n > 0) logits_rows.push_back(int32_t(input_ids.size()) - 1);
}

void BatchPlan::finalize() {
  if (direct_width_ > 0) {
    max_blocks_per_seq = direct_width_;
    return;
  }
  int32_t widest = 0;
  for (int32_t c : pending_block_counts_) widest = std::max(widest, c);
  max_blocks_per_seq = widest;
  block_tables.assign(pending_block_counts_.size() * size_t(widest), -1);
  size_t src = 0;
  for (size_t s = 0; s < pending_block_counts_.size(); ++s) {
    std::copy_n(pending_blocks_.begin() + std::ptrdiff_t(src), pending_block_counts_[s],
                block_tables.begin() + std::ptrdiff_t(s * size_t(widest)));
    src += size_t(pending_block_counts_[s]);
  }
  pending_blocks_.clear();
  pending_block_counts_.clear();
}

Result<void> BatchPlan::take_previous_ids(std::span<const int32_t> prev_rows, std::span<const int32_t> prev_ids) {
  if (prev_rows.empty()) return {};
  if (prev_rows.size() != input_ids.size())
    return fail(Errc::invalid_argument, "batch plan: " + std::to_string(prev_rows.size()) +
                                            " previous-row entries for " + std::to_string(input_ids.size()) + " tokens");
  for (size_t t = 0; t < prev_rows.size(); ++t) {
    const int32_t r = prev_rows[t];
    if (r < 0) continue;
    if (size_t(r) >= prev_ids.size())
      return fail(Errc::invalid_argument, "batch plan: token " + std::to_string(t) + " takes row " + std::to_string(r) +
                                              " of a previous step that sampled " + std::to_string(prev_ids.size()));
    input_ids[t] = prev_ids[size_t(r)];
  }
  return {};
}

Result<void> BatchPlan::validate(int32_t block_size, int32_t num_blocks) const {
  const int32_t T = num_tokens();
  const int32_t S = num_seqs();
  auto bad = [](std::string what) { return fail(Errc::internal, "invalid batch plan: " + what); };
  if (positions.size() != size_t(T) || slot_mapping.size() != size_t(T)) return bad("array sizes differ from T");
  if (context_lens.size() != size_t(S)) return bad("context_lens size differs from S");
  if (block_tables.size() != size_t(S) * size_t(max_blocks_per_seq)) return bad("block_tables size");
  if (S > 0 && (query_start.front() != 0 || query_start.back() != T)) return bad("query_start ends");
  for (int32_t s = 0; s < S; ++s) {
    const int32_t q0 = query_start[size_t(s)], q1 = query_start[size_t(s) + 1];
    if (q1 < q0) return bad("query_start not monotone");
    const int32_t ctx = context_lens[size_t(s)];
    if (ctx > max_blocks_per_seq * block_size) return bad("context beyond block table");
    for (int32_t b = 0; b * block_size < ctx; ++b) {
      const int32_t id = block_tables[size_t(s) * size_t(max_blocks_per_seq) + size_t(b)];
      if (id < 0 || id >= num_blocks) return bad("block id out of range");
    }
    for (int32_t t = q0; t < q1; ++t) {
      const int32_t pos = positions[size_t(t)];
      if (pos < 0 || pos >= ctx) return bad("position outside context");
      const int32_t block = block_tables[size_t(s) * size_t(max_blocks_per_seq) + size_t(pos / block_size)];
      if (slot_mapping[size_t(t)] != block * block_size + pos % block_size) return bad("slot mapping");
    }
  }
  for (int32_t r : logits_rows)
    if (r < 0 || r >= T) return bad("logits row out of range");
  return {};
}

}  // namespace photon
