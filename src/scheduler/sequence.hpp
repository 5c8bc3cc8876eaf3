// Sequence: one request as the scheduler sees it.
//
// tokens = prompt followed by every generated token. The KV cache holds the
// first num_computed_tokens of them (positions 0 .. num_computed_tokens-1),
// in the blocks of block_table (block b holds positions b*B .. b*B+B-1).
// A step computes tokens [num_computed_tokens, num_computed_tokens + n);
// when that reaches the end of `tokens` the step samples the next token.
// Decode is the case n == 1; a chunked or resumed prefill is the same rule,
// so a preempted sequence (num_computed_tokens reset to 0, generated tokens
// kept) resumes exactly where it stopped.
//
// Ownership: the engine owns Sequence objects; the Scheduler and the
// BlockManager hold pointers/references while the sequence is queued.
// Thread-compatibility: touched only by the engine's stepping thread.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/sampling.hpp"

namespace photon {

enum class SeqStatus : uint8_t {
  waiting,    // submitted, never scheduled
  running,    // holds KV blocks, scheduled every step it fits the budget
  preempted,  // blocks taken back; queued at the front of waiting to recompute
  finished,   // done (stop, length, cancel or error); holds no blocks
};

const char* seq_status_name(SeqStatus s) noexcept;

// Token counts that the repetition / presence / frequency penalties read:
// every distinct token of the sequence with its number of occurrences among
// the generated tokens (0 for a token seen only in the prompt).
// Kept only when a penalty is active (enabled at construction).
class PenaltyCounts {
 public:
  void add(int32_t token, bool generated);
  std::span<const int32_t> tokens() const noexcept { return tokens_; }
  std::span<const int32_t> output_counts() const noexcept { return output_counts_; }

 private:
  std::vector<int32_t> tokens_;         // distinct tokens, first-seen order
  std::vector<int32_t> output_counts_;  // [tokens_.size()] occurrences among generated tokens
  std::unordered_map<int32_t, int32_t> index_;  // token -> index in tokens_
};

// What a request asks of its generation (validated by the engine at submit).
struct SequenceParams {
  SamplingParams sampling;                // seed already resolved
  int32_t max_tokens = 16;                // generated tokens at most (>= 1)
  std::vector<int32_t> stop_token_ids;    // any of these ends the sequence (reason stop)
};

class Sequence {
 public:
  Sequence(uint64_t id, std::vector<int32_t> prompt, SequenceParams params);

  uint64_t id() const noexcept { return id_; }
  SeqStatus status = SeqStatus::waiting;

  std::span<const int32_t> tokens() const noexcept { return tokens_; }
  int32_t num_tokens() const noexcept { return int32_t(tokens_.size()); }
  int32_t prompt_len() const noexcept { return prompt_len_; }
  int32_t num_generated() const noexcept { return num_tokens() - prompt_len_; }
  int32_t last_token() const noexcept { return tokens_.back(); }
  // Tokens still to run through the model before the next sample.
  int32_t num_uncomputed() const noexcept { return num_tokens() - num_computed_tokens; }

  // Appends a sampled token (its KV is computed by the next step).
  void append_token(int32_t token);
  // Overlapped steps: the place of a token sampled by a step still running, taken so that the next
  // step can be scheduled over it (its input id then comes from that step's sample, on the device).
  // The place holds kPlaceholder until fill_placeholder puts the id there (and counts it for the
  // penalties, as append_token does). At most one at a time, always the last token.
  static constexpr int32_t kPlaceholder = -1;
  void append_placeholder();
  void fill_placeholder(int32_t token);
  bool has_placeholder() const noexcept { return placeholder_; }

  const SequenceParams& params() const noexcept { return params_; }
  // The Philox counter of the next sample: tokens sampled so far. Survives
  // preemption unchanged, so a resumed seeded sequence draws the same numbers.
  uint64_t sample_step() const noexcept { return uint64_t(num_generated()); }
  bool tracks_penalties() const noexcept { return tracks_penalties_; }
  const PenaltyCounts& penalty_counts() const noexcept { return penalties_; }

  // ---- owned by the Scheduler / BlockManager ----
  int32_t num_computed_tokens = 0;
  // Leading computed tokens that came from the prefix cache at the last admission.
  int32_t num_cached_tokens = 0;
  std::vector<int32_t> block_table;  // KV block ids, covers >= num_computed_tokens positions
  // Leading blocks of block_table already known to the prefix cache (taken from it or
  // registered in it); the BlockManager registers the rest once full and computed.
  int32_t num_cached_blocks = 0;
  // Chained hashes of the full blocks of tokens(), filled lazily by the BlockManager
  // (tokens only grow, so a full block's hash never changes).
  std::vector<uint64_t> block_hashes;

 private:
  uint64_t id_;
  std::vector<int32_t> tokens_;
  int32_t prompt_len_;
  SequenceParams params_;
  bool tracks_penalties_;
  bool placeholder_ = false;  // tokens_.back() is kPlaceholder
  PenaltyCounts penalties_;
};

}  // namespace photon
