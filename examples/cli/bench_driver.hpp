// LockstepDriver: a model on a backend driven step by step for `photon bench`,
// without the engine's scheduler: B sequences are prefilled (chunked under a
// token budget, several sequences per step) and then decode together, one
// token each per step, every step ending with the backend's sampler (the
// only device-to-host transfer). Steps go through Backend::run_step, so
// decode steps replay CUDA graphs as they do in the engine. Like the engine's
// plans, a step's block tables hold the blocks its contexts occupy (graphs are
// keyed by that width), not the whole reservation.
// Thread-compatibility: one thread at a time.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "core/backend.hpp"
#include "core/sampling.hpp"
#include "model/model.hpp"
#include "photon/result.hpp"

namespace photon::cli {

class LockstepDriver {
 public:
  // The model's KV cache must hold at least max_seqs * blocks_per_seq blocks of block_size.
  LockstepDriver(Backend& backend, Model& model, int32_t block_size, int32_t blocks_per_seq,
                 const SamplingParams& sampling, uint64_t seed);

  // Replaces the batch with `num_seqs` sequences of random prompts of prompt_len tokens.
  void start(int32_t num_seqs, int32_t prompt_len);
  // Runs prefill steps of at most max_batch_tokens tokens until every prompt
  // is in the cache; each sequence samples its first token. Returns the steps run.
  Result<int32_t> prefill(int32_t max_batch_tokens);
  // One decode step: every sequence feeds its last token and samples the next.
  Result<void> decode_step();
  // `steps` decode steps. With overlap on and a backend that overlaps steps, step i + 1 is launched
  // before step i's tokens are read and takes them on the device (Backend::launch_step_sampled), as
  // the engine's overlapped steps do; otherwise decode_step() `steps` times.
  Result<void> decode(int32_t steps);
  void set_overlap(bool on) noexcept { overlap_ = on; }

  int32_t num_seqs() const noexcept { return int32_t(seqs_.size()); }
  // Context length of sequence 0 (tokens in the cache after the last step).
  int32_t context_len() const noexcept { return seqs_.empty() ? 0 : seqs_[0].cached; }

 private:
  struct Seq {
    std::vector<int32_t> tokens;  // prompt, then sampled tokens
    int32_t cached = 0;           // tokens whose K/V are in the cache
    int32_t first_block = 0;      // its blocks are first_block .. first_block + blocks_per_seq - 1
    uint64_t sampled = 0;         // tokens sampled so far (the Philox step)
  };
  // Blocks that `tokens` cached tokens occupy.
  int32_t blocks_for(int32_t tokens) const noexcept { return (tokens + block_size_ - 1) / block_size_; }
  // Runs `plan` and samples one token for each of `rows` (sequence indices, in logits-row order).
  Result<void> run(const BatchPlan& plan, const std::vector<int32_t>& rows);
  // The decode plan of every sequence's next token: its id from `ids` (row s: sequence s), or,
  // with ids null, the one the step before samples (prev_rows_[s] = s); advances cached and sampled.
  Result<void> decode_plan(BatchPlan& plan, const int32_t* const* ids);

  Backend& backend_;
  Model& model_;
  int32_t block_size_, blocks_per_seq_;
  SamplingParams sampling_;
  std::mt19937_64 rng_;
  std::vector<Seq> seqs_;
  std::vector<int32_t> table_;  // scratch block table
  std::vector<SamplingParams> params_;
  std::vector<uint64_t> steps_;
  std::vector<int32_t> ids_;
  std::vector<float> logprobs_;
  bool overlap_ = true;
  std::vector<int32_t> prev_rows_;                // overlapped decode: token s takes row s
  std::vector<int32_t> slot_ids_[2];              // overlapped decode: two steps' outputs
  std::vector<float> slot_logprobs_[2];
};

}  // namespace photon::cli
