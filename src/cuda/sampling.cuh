// GPU sampling, one thread-block cluster (or block) per logits row, exactly
// as docs/sampling.md specifies: raw-logit logprobs (max, log-sum-exp, top-n), penalties in
// place, greedy argmax, or temperature -> top-k -> top-p -> min-p -> one
// Philox draw. Sums of probability mass use 2^-40 fixed-point integers, so
// results do not depend on thread scheduling.
// The draw: without a top-k cut or top-p (the common case) it walks ids in
// order: one pass of per-block kept masses (fused with the max's log-sum-exp
// at temperature 1), a scan of the block sums across the cluster, then a
// descent inside the one block that holds u * S. With top-k / top-p it walks
// the sorted order pi, which is never materialized: each prefix rule is found
// by a radix descent over the 32-bit order key of z (four 8-bit digits,
// shared-memory histograms), ties broken by a radix select over ids.
// Bandwidth model: reads the row (V*4 bytes) once on the cluster path (the
// passes then run over registers; the id-order descent re-reads about 1/16
// of it from L2); the block path re-reads it per pass: 3 passes for greedy
// with a logprob or for id-order draws (+1 at temperature != 1 with logprobs),
// ~20 with top-k and top-p. Writes R*(3 + 2*max_logprobs)*4 bytes.
// Launched with programmatic dependent launch (launch.cuh): every block
// waits for the previous kernel (the LM head) before reading the logits.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/cuda_status.hpp"

namespace photon::cuda {

// One row's parameters as the kernel reads them (validated on the host).
struct SampleRowParams {
  float temperature = 1.f;
  float top_p = 1.f;
  float min_p = 0.f;
  float repetition_penalty = 1.f;
  float presence_penalty = 0.f;
  float frequency_penalty = 0.f;
  int32_t top_k = 0;
  int32_t num_logprobs = 0;
  uint64_t seed = 0;
  uint64_t step = 0;
  int32_t hist_begin = 0;  // this row's history: hist_tokens[hist_begin .. hist_end)
  int32_t hist_end = 0;
};

// Per-row outcome codes written to out_status.
enum SampleStatus : int32_t {
  kSampleOk = 0,
  kSampleBadLogit = 1,       // a NaN or +inf logit
  kSampleAllMasked = 2,      // every logit is -inf
  kSampleTempOverflow = 3,   // logits / temperature overflow fp32
};

// Rows whose parameters may travel inside the kernel's arguments (no upload).
constexpr int32_t kSampleInlineRows = 16;

struct SampleArgs {
  float* logits = nullptr;                  // [R, V] f32, overwritten (penalties, then z = l / temperature)
  const SampleRowParams* params = nullptr;  // [R] device memory, or null: inline_params holds the R <= 16 rows
  SampleRowParams inline_params[kSampleInlineRows] = {};
  const int32_t* hist_tokens = nullptr;     // [Hn] distinct per row, each in [0, V)
  const int32_t* hist_counts = nullptr;     // [Hn] occurrences among generated tokens
  float* hist_raw = nullptr;                // [Hn] scratch: raw logits of history tokens
  int32_t* out_ids = nullptr;               // [R]
  float* out_logprob = nullptr;             // [R] raw-logit logprob of the chosen token
  int32_t* out_top_ids = nullptr;           // [R, max_logprobs]
  float* out_top_logprobs = nullptr;        // [R, max_logprobs]
  int32_t* out_status = nullptr;            // [R] SampleStatus
  int32_t num_rows = 0;                     // R
  int32_t vocab = 0;                        // V
  int32_t max_logprobs = 0;
  // Set by the caller when every row is greedy or a plain id-order draw (temperature > 0 with top_k
  // 0 or >= V and top_p >= 1), without penalties and with num_logprobs 0 (min_p and the chosen
  // token's logprob allowed).
  bool id_order_only = false;
};

// id_order_only batches (unless PHOTON_CUDA_SAMPLE_LEAN=0): launch_sample_id_order. Others:
// compute_major >= 9 and at most 16 rows: a thread-block cluster per row holds the row in
// registers (up to 16 blocks); otherwise one block per row reads it from global memory.
Status launch_sample(const SampleArgs& a, int32_t compute_major, int32_t num_sms, cudaStream_t stream);

// The lean id-order kernel (sampling_id_order.cu): `group` blocks of 256 threads per row, a
// cluster of up to 16 on sm_90+ (as many as keep R * group <= 2 * num_sms), one block per row
// otherwise; the row is read from global memory (L2/L1) in each of its three passes: max and
// checks, kept masses, the descent inside the one block that holds the draw. Two reductions
// across the row's blocks, each one block barrier and one cluster barrier.
// Bandwidth model: reads V*4 bytes per row twice plus ~V*4/group in the descent; writes
// R*(3 + 2*max_logprobs)*4 bytes.
Status launch_sample_id_order(const SampleArgs& a, int32_t compute_major, int32_t num_sms, cudaStream_t stream);

}  // namespace photon::cuda
