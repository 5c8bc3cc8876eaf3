// GPU sampling, exactly as docs/sampling.md specifies. Two kernels (and the screened draw below,
// for the LM head screen's one-row steps):
//  * the one-pass kernel (sampling_gumbel.cu) for batches of at most
//    kOnePassMaxRows rows, all greedy or Gumbel-max draws without penalties,
//    min-p or top-n logprobs (the common case): each row is split into
//    slices, one block each, about one wave in all (1024 ids per slice at
//    one row, an eighth of a row at 64); a block reads its slice once, keeps
//    its best (z + G, id) (greedy: (l, id)), the slice's max and sum of exp
//    for the chosen token's logprob, and the row's last block to finish
//    combines the slices.
//    Bandwidth model: reads R*V*4 bytes once; writes and re-reads
//    32 bytes per slice; writes R*(3 + 2*max_logprobs)*4 bytes.
//  * the general kernel (sampling.cu), one thread-block cluster (or block)
//    per row: raw-logit logprobs (max, log-sum-exp, top-n), penalties in
//    place, greedy argmax, or temperature -> top-k -> top-p -> min-p -> the
//    draw: Gumbel-max when no prefix rule cuts, else one Philox uniform
//    walked down the sorted order pi, which is never materialized: each
//    prefix rule is found by a radix descent over the 32-bit order key of z
//    (four 8-bit digits, shared-memory histograms), ties broken by a radix
//    select over ids. Sums of probability mass use 2^-40 fixed-point
//    integers, so results do not depend on thread scheduling.
//    Bandwidth model: reads the row (V*4 bytes) once on the cluster path
//    (the passes then run over registers); the block path re-reads it per
//    pass: ~3 passes for greedy or Gumbel-max rows with logprobs, ~20 with
//    top-k and top-p. Writes R*(3 + 2*max_logprobs)*4 bytes.
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
  int32_t out_offset = 0;  // the one-pass kernel writes this row's results at out_*[row + out_offset]
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
  int32_t* next_ids = nullptr;              // one-pass kernel: [R] device, also gets each row's id (0 if it failed)
  int32_t num_rows = 0;                     // R
  int32_t vocab = 0;                        // V
  int32_t max_logprobs = 0;
  // Set by the caller when every row is greedy, or a Gumbel-max draw with min_p 0 (temperature > 0,
  // top_k 0 or >= V, top_p 1), without penalties and with num_logprobs 0 (the chosen token's logprob
  // allowed): the one-pass kernel serves the batch. The out_* arrays may then be mapped pinned host
  // memory (written once per row by the row's last block).
  bool one_pass = false;
  // The one-pass kernel's workspace: one_pass_slices() 32-byte partials per row, and R arrival
  // counters that are zero before the launch (the kernel leaves them zero).
  void* one_pass_partials = nullptr;
  int32_t* one_pass_arrivals = nullptr;
};

constexpr size_t kOnePassPartialBytes = 32;
// Batches of more rows take the general kernel: at 256 rows the one-pass kernel's noise (a Philox
// call per 4 ids, two logarithms per id, ~65 instructions an id) makes it compute-bound, 169 us
// under ncu against the general kernel's 98 (H200, V = 128256; at 64 rows 49 against 61).
constexpr int32_t kOnePassMaxRows = 64;

// one_pass batches: launch_sample_one_pass. Others:
// compute_major >= 9 and at most 16 rows: a thread-block cluster per row holds the row in
// registers (up to 16 blocks); otherwise one block per row reads it from global memory.
Status launch_sample(const SampleArgs& a, int32_t compute_major, int32_t num_sms, cudaStream_t stream);

// The one-pass kernel's slices per row: blocks of 256 threads, about one wave of 4 blocks per SM
// (R * slices <= ~4 SMs) while every thread has at least one quad of 4 ids; *quads_per_thread gets
// the quads each thread covers (the slices hold the whole row, none empty).
int32_t one_pass_slices(int32_t num_rows, int32_t vocab, int32_t num_sms, int32_t* quads_per_thread = nullptr);
Status launch_sample_one_pass(const SampleArgs& a, int32_t num_sms, cudaStream_t stream);

// ---- the screened draw (docs/lm-head-screen.md; sampling_screened.cu) ----
// One greedy or Gumbel-max row (the one-pass kernel's rows) whose logits [V] are the screen's int8
// product (gemv.cuh, GemvArgs::bound) with per-id bounds: the id drawn is the one the exact bf16
// logits give. Each block of the one-row one-pass grid scores its 1024 ids by their bounds and keeps
// those the bounds cannot rule out within its slice (at most kScreenKeep), its best id's bf16 row
// and the first prefetch_rows - 1 candidates' prefetched into L2 (none at 0). The last block merges the lists: where one id survives
// (the usual case) it is the draw, and the whole block computes its exact logit for the logprob
// only, its loads issued as soon as the headers name it; else it stages the normed row and rescores
// the survivors with the bf16 head (one warp and one K * 2 byte row each). Either way the
// log-sum-exp is corrected with the survivors' exact logits: the logprob is within the largest
// bound of the ids not rescored. Bandwidth model: reads V * 8 bytes (logits and bounds), writes and
// re-reads 288 bytes per slice, then K * 4 bytes of x and the norm weights from L2 and K * 2 bytes
// per survivor from DRAM.
struct ScreenArgs {
  const float* bound = nullptr;          // [V] f32: |logits - exact logits| <= bound
  const void* x = nullptr;               // [K] bf16: the LM head's input row (the residual stream)
  const void* norm_w = nullptr;          // [K] bf16: the final norm's weights
  float eps = 0.f;                       // the final norm's epsilon
  const void* w = nullptr;               // [V, K] bf16: the head the screen quantizes
  int32_t K = 0;
  unsigned long long* rescored = nullptr;  // optional: += the ids the draw rescored (its last block)
  // bf16 rows each block prefetches into L2 (0..32): at 1 its best id's, then its first kept ids'.
  int32_t prefetch_rows = 0;
};
constexpr int32_t kScreenKeep = 32;
constexpr int64_t kScreenMaxRowBytes = 32 * 1024;  // K * 2: the last block stages the normed row
// The screened kernel's workspace for a row of `vocab` ids (one_pass_arrivals: one counter, zero).
size_t screened_workspace_bytes(int32_t vocab, int32_t num_sms);
// Whether a row of `vocab` ids over a head of K inputs is one the screened kernel serves: its ids
// one quad per thread of the one-row one-pass grid, K % 8 == 0 and K * 2 <= kScreenMaxRowBytes.
bool sample_screened_shape(int64_t vocab, int64_t K, int32_t num_sms);
// Whether launch_sample_screened serves (a, s): one row of sample_screened_shape, a bound and
// 16-byte aligned x, norm_w and w.
bool sample_screened_applies(const SampleArgs& a, const ScreenArgs& s, int32_t num_sms);
Status launch_sample_screened(const SampleArgs& a, const ScreenArgs& s, int32_t num_sms, cudaStream_t stream);

}  // namespace photon::cuda
