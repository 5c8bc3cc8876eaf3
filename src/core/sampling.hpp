// Sampling contract shared by the engine and every backend's sampler.
//
// Each logits row is sampled with its own parameters; the random draw of a
// row depends only on (seed, step) of its sequence, never on the batch, so a
// seeded request gives the same tokens whatever else runs beside it and across
// preemption. The exact algorithm every backend implements (penalties, greedy,
// temperature, top-k, top-p, min-p, the Philox draw, logprobs) is written in
// docs/sampling.md. Thread-compatibility: plain values.
#pragma once

#include <cstdint>

namespace photon {

struct SamplingParams {
  float temperature = 1.0f;         // 0 => greedy (argmax, ties to the lowest id)
  int32_t top_k = 0;                // 0 => off
  float top_p = 1.0f;               // 1 => off
  float min_p = 0.0f;               // 0 => off
  float repetition_penalty = 1.0f;  // 1 => off (HF/vLLM semantics: divide positive logits, multiply negative)
  float presence_penalty = 0.0f;    // OpenAI semantics, over generated tokens
  float frequency_penalty = 0.0f;   // OpenAI semantics, over generated tokens
  uint64_t seed = 0;
  int32_t num_logprobs = 0;         // top-n logprobs to report besides the chosen token's
};

// Inputs of one sampling call, R rows, all host pointers.
struct SampleBatch {
  int32_t num_rows = 0;                     // R
  const SamplingParams* params = nullptr;   // [R]
  const uint64_t* steps = nullptr;          // [R] tokens this sequence has sampled before (Philox counter)
  // Penalty history, ragged: row r's distinct tokens (prompt and output) are
  // history_tokens[history_offsets[r] .. history_offsets[r+1]) with their
  // occurrence counts among generated tokens in history_output_counts (same
  // indices). Every listed token gets repetition_penalty; those with a count
  // > 0 also get presence/frequency penalties. history_offsets may be null
  // (no history for any row).
  const int32_t* history_offsets = nullptr;  // [R+1]
  const int32_t* history_tokens = nullptr;
  const int32_t* history_output_counts = nullptr;  // occurrences among generated tokens (0 => prompt only)
  int32_t max_logprobs = 0;                  // max over rows of num_logprobs (output stride)
};

// Outputs, host memory owned by the caller.
struct SampleOutput {
  int32_t* token_ids = nullptr;     // [R]
  // Logprobs are log-softmax of the raw logits (before penalties and
  // temperature, vLLM's default), for the chosen token and the top-n.
  float* logprobs = nullptr;        // [R] of the chosen token; may be null
  int32_t* top_ids = nullptr;       // [R * max_logprobs] top-n by raw logit (ties: lower id), -1 padded;
                                    // may be null when max_logprobs == 0
  float* top_logprobs = nullptr;    // [R * max_logprobs] their logprobs, -inf padded
};

}  // namespace photon
