// How the CUDA backend dispatches its ops: the measured bounds between kernels (each with the
// docs/performance.md row that set it), the environment overrides that measurements use, and the
// decode graphs' batch buckets. Host-only; read by cuda_backend.cpp.
#pragma once

#include <cstdint>

#include "core/backend.hpp"

namespace photon::cuda {

// Decode attention merges its splits inside a cluster (8 at most) when contexts can reach at most
// this many keys: at 4000 keys, 8 cluster splits measured 4.5% slower per step than 16 global ones.
constexpr int64_t kClusterMergeMaxKeys = 2048;

// GemvEarly::large: one-row GEMVs with N and K both at least this many load their first weights
// before pdl_wait() (docs/performance.md, row 51).
constexpr int64_t kGemvEarlyMinDim = 4096;
// GemvEarly::narrow_n / wide_n: the output count that parts them.
constexpr int64_t kGemvEarlyWideN = 8192;

// RopeInAttention::wide_queries: decode steps of two or more sequences of models with at least this
// query width (nq * hd) run RoPE inside the decode attention kernel (docs/performance.md, rows 50
// and 95).
constexpr int64_t kRopeInAttentionMinQueryWidth = 4096;

// A decode-only step: one query token per sequence, token s of sequence s.
inline bool is_decode(const StepPlanView& plan) { return plan.max_query_len == 1 && plan.num_tokens == plan.num_seqs; }

// matmul_silu uses the GEMV's SwiGLU mode for one row from this many input features: at Qwen3-8B's
// K = 4096 it measured 1.7% faster per decode step than the GEMV + silu_mul pair (row 28); at
// Llama-3.2-1B's K = 2048, with the GEMV's early weights (row 54), 2.5% faster than gemv_skinny's
// SwiGLU mode (row 55); at Qwen3-0.6B's K = 1024, with the norm folded in (no rmsnorm kernel),
// 2.0% faster in bf16 and 5.3% with int8 weights against main's build (row 94; 3-4% as a knob).
constexpr int64_t kSwiGluGemvMinK = 1024;

// The environment variable `name` as an integer when set and >= min_value, else fallback (measurement knobs).
int64_t env_int64(const char* name, int64_t fallback, int64_t min_value);

// kSwiGluGemvMinK, or PHOTON_CUDA_SWIGLU_GEMV_MIN_K (measurements).
int64_t swiglu_gemv_min_k();

// skinny_decode_matmul serves products with at most this many output features (a layer's qkv, o and
// down, and the gate/up product with SwiGLU of I outputs; plain gate_up products and the LM head stay
// on cuBLASLt, which streams them at 3.6-4.2 TB/s).
// PHOTON_CUDA_SKINNY_MAX_N overrides it (measurements).
int64_t skinny_max_n();

// Whether the environment variable `name` is unset or does not start with '0' (a default-on switch).
bool env_not_zero(const char* name);

// A boolean option overridden by the environment variable `name` when it is "0" or "1"
// (measurement switches); any other value leaves it as it is.
void override_from_env(const char* name, bool& option);

// matmul_silu of decode batches (2..16 rows, I <= skinny_max_n()) on gemv_skinny's SwiGLU mode, with
// skinny_decode_matmul: Llama-3.2-1B B = 16 1.067-1.076 -> 1.032-1.034 ms/step (docs/performance.md,
// row 39). PHOTON_CUDA_SKINNY_SILU=0 keeps the product + silu_mul pair (measurements).
bool skinny_silu_enabled();

// One-row products (single-stream decode) on gemv_skinny, with skinny_decode_matmul and N (or I) within
// skinny_max_n(): matmul_silu where the one-row GEMV has no SwiGLU mode (K < kSwiGluGemvMinK), and
// plain or add products of at most kOneRowSkinnyMaxNK weights (Llama-3.2-1B's qkv and o; not its down
// or Qwen3-8B's matrices, 16 Mi weights and more, where the one-row GEMV's streaming matters more
// than gemv_skinny's early first round: Qwen3-8B measured 4.12 -> 4.27 ms/token with them on it).
// PHOTON_CUDA_SKINNY_M1=1 puts every one-row product within skinny_max_n() on it, =0 none
// (measurements: docs/performance.md, row 41).
enum class OneRowSkinny { none, bounded, all };
OneRowSkinny one_row_skinny();
constexpr int64_t kOneRowSkinnyMaxNK = int64_t(12) << 20;  // N * K
// PHOTON_CUDA_SKINNY_M1_MAX_NK overrides the bound (measurements).
int64_t one_row_skinny_max_nk();

// int8 decode-batch products on gemv_int8_skinny, with skinny_decode_matmul; PHOTON_CUDA_INT8_SKINNY=0
// keeps the int8 GEMV and dequantize + cuBLASLt (measurements).
bool int8_skinny_enabled();

// gemv_int8_skinny's SwiGLU mode for int8 decode batches (docs/performance.md, row 45: B = 16
// 1.092 -> 0.964 ms/step); PHOTON_CUDA_INT8_SKINNY_SILU=0 restores the product + silu_mul pair.
bool int8_skinny_silu();

// Batch-size buckets of decode graphs: powers of two to 8, then multiples of 8 to 64, then of 32.
int32_t bucket_for(int32_t s);

}  // namespace photon::cuda
