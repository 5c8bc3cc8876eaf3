// BatchPlan: one engine step's schedule flattened into arrays (host side).
//
// The scheduler fills it; a backend stages it into its own memory once per
// step (Backend::stage_plan) and every op of the forward pass reads the
// staged copy (StepPlanView). T = scheduled tokens, S = sequences,
// R = rows that need logits. Prefill chunks and decode tokens share it.
// Thread-compatibility: a plain value, filled and read by the stepping thread.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "photon/result.hpp"

namespace photon {

struct BatchPlan {
  std::vector<int32_t> input_ids;     // [T] token ids, sequence after sequence
  std::vector<int32_t> positions;     // [T] absolute position of each token in its sequence
  std::vector<int32_t> query_start;   // [S+1] sequence s owns tokens [query_start[s], query_start[s+1])
  std::vector<int32_t> context_lens;  // [S] tokens in the KV cache after this step (cached + new)
  std::vector<int32_t> block_tables;  // [S * max_blocks_per_seq] KV block ids, row-major, -1 padded
  std::vector<int32_t> slot_mapping;  // [T] cache slot of each new token: block * block_size + offset
  std::vector<int32_t> logits_rows;   // [R] token rows (in 0..T-1) whose logits are wanted
  int32_t max_blocks_per_seq = 0;

  int32_t num_tokens() const noexcept { return int32_t(input_ids.size()); }
  int32_t num_seqs() const noexcept { return query_start.empty() ? 0 : int32_t(query_start.size()) - 1; }
  int32_t num_logits() const noexcept { return int32_t(logits_rows.size()); }

  void clear() noexcept;
  // Optional, after clear() and before the first add_sequence: no sequence
  // of this plan has more than `width` blocks, so add_sequence writes its
  // table row straight into block_tables ([S][width], -1 padded) instead of
  // keeping it for finalize() to lay out (one copy less per step).
  void set_block_table_width(int32_t width) noexcept { direct_width_ = width; }
  // Appends one sequence's new tokens [first_pos, first_pos + ids.size()) with
  // its block table; `want_logits` asks for the logits of its last new token.
  void add_sequence(const int32_t* ids, int32_t n, int32_t first_pos, const int32_t* blocks,
                    int32_t num_blocks, int32_t block_size, bool want_logits);
  // Lays out block_tables as [S][max_blocks_per_seq]; called by add_sequence
  // callers once all sequences are in (pads with -1).
  void finalize();

  // Checks every invariant a backend relies on (positions inside context,
  // slots inside the pool, block ids inside [0, num_blocks)). Used by tests
  // and by Backend implementations in debug builds.
  Result<void> validate(int32_t block_size, int32_t num_blocks) const;

  // Overlapped steps (Backend::launch_step_sampled): token t with prev_rows[t] = r >= 0 takes
  // prev_ids[r], the id row r of the previous step sampled, as its input id. prev_rows is empty
  // (nothing to take) or has num_tokens() entries. Errors (invalid_argument): a size mismatch, a
  // row outside prev_ids.
  Result<void> take_previous_ids(std::span<const int32_t> prev_rows, std::span<const int32_t> prev_ids);

 private:
  std::vector<int32_t> pending_blocks_;  // ragged block tables before finalize()
  std::vector<int32_t> pending_block_counts_;
  int32_t direct_width_ = 0;  // > 0: rows go straight into block_tables (set_block_table_width)
};

// A staged plan: the same arrays, in the backend's memory (device pointers
// for CUDA). Valid until the next stage_plan call on that backend.
struct StepPlanView {
  int32_t num_tokens = 0;          // T
  int32_t num_seqs = 0;            // S
  int32_t num_logits = 0;          // R
  int32_t max_blocks_per_seq = 0;
  int32_t max_query_len = 0;       // longest run of new tokens of one sequence
  int32_t max_context_len = 0;     // longest context_lens entry
  const int32_t* input_ids = nullptr;
  const int32_t* positions = nullptr;
  const int32_t* query_start = nullptr;
  const int32_t* context_lens = nullptr;
  const int32_t* block_tables = nullptr;
  const int32_t* slot_mapping = nullptr;
  const int32_t* logits_rows = nullptr;
  // Host-side: logits_rows[r] == r for every row and R == T (decode-only steps), so the LM head
  // can read the normed rows in place (no gather).
  bool logits_of_every_token = false;
};

// Whether `plan` wants the logits of every token, in token order (StepPlanView::logits_of_every_token).
inline bool logits_of_every_token(const BatchPlan& plan) {
  if (plan.num_logits() != plan.num_tokens()) return false;
  for (int32_t r = 0; r < plan.num_logits(); ++r)
    if (plan.logits_rows[size_t(r)] != r) return false;
  return true;
}

}  // namespace photon
