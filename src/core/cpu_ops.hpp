// The CPU backend's op implementations (internal to src/core/cpu_*.cpp).
//
// Each function validates its arguments (shapes, dtypes, indices) and then
// computes on host memory with the given pool; the comments of Backend in
// core/backend.hpp are the contract. Scratch buffers are owned by CpuScratch
// (one per backend) and reused across calls.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/backend.hpp"
#include "core/cpu_simd.hpp"
#include "core/quantize.hpp"
#include "core/thread_pool.hpp"

// Marks a hot loop to be compiled twice on x86-64 with GCC (AVX2 and the
// baseline), the variant picked once at load time (an ifunc). Both run the
// same fp32 operations in the same order (ISO C++ mode disables FMA
// contraction, and the avx2 target does not enable FMA), so results are
// identical. Off under ThreadSanitizer / AddressSanitizer, whose
// instrumentation cannot run inside an ifunc resolver (it runs before the
// sanitizer runtime is initialized).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__) && \
    !defined(__SANITIZE_ADDRESS__)
#define PHOTON_CPU_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define PHOTON_CPU_CLONES
#endif

namespace photon::cpu {

// Per-worker scratch, sized on demand before a parallel region (never inside
// one); worker w uses elements [w * stride, (w + 1) * stride).
template <class T>
class WorkerScratch {
 public:
  void reserve(int32_t workers, int64_t per_worker) {
    stride_ = per_worker;
    const size_t need = size_t(workers) * size_t(per_worker);
    if (data_.size() < need) data_.resize(need);
  }
  T* of(int32_t worker) noexcept { return data_.data() + size_t(worker) * size_t(stride_); }

 private:
  std::vector<T> data_;
  int64_t stride_ = 0;
};

struct CpuScratch {
  WorkerScratch<float> matmul;         // one widened weight row per worker
  WorkerScratch<float> attention;      // one row of scores per worker
  WorkerScratch<float> rope;           // cos and sin of one token per worker
  std::vector<int32_t> seq_of_token;   // [T] sequence index of each token (attention)
  WorkerScratch<int32_t> sample_ids;   // [V] per worker: token ids of one row, partly sorted
  WorkerScratch<float> sample_z;       // [V] per worker: one row's penalized, tempered logits
};

// Shape / dtype checks shared by the ops; each returns invalid_argument or
// shape_mismatch naming `op` and the tensor.
Result<void> expect_dtype(const char* op, const char* name, const Tensor& t, DType want);
Result<void> expect_float_dtype(const char* op, const char* name, const Tensor& t);  // f32/bf16/f16
Result<void> expect_data(const char* op, const char* name, const Tensor& t);
// expect_data and expect_dtype f32 together.
Result<void> expect_f32(const char* op, const char* name, const Tensor& t);
// k and v: f32 [num_blocks, block_size, nkv, hd] of one shape, dims positive.
Result<void> check_kv_cache(const char* op, const KvLayer& cache);
std::string shape_string(const Tensor& t);

// out[n] = x[n] * rsqrt(mean(x^2) + eps) * w[n], w already widened to f32.
void rmsnorm_row(const float* x, const float* w, int64_t n, float eps, float* out) noexcept;

// Widens n elements of a float tensor's data (f32 / bf16 / f16) starting at
// element `offset` into dst (f32). Inline so that hot loops compiled with
// PHOTON_CPU_CLONES get it vectorized for their target.
inline void widen_row(const Tensor& t, int64_t offset, int64_t n, float* dst) noexcept {
  switch (t.dtype) {
    case DType::f32: {
      const float* src = t.as<const float>() + offset;
      for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
      break;
    }
    case DType::bf16: {
      const uint16_t* src = t.as<const uint16_t>() + offset;
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
      break;
    }
    case DType::f16: {
      const uint16_t* src = t.as<const uint16_t>() + offset;
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(src[i]);
      break;
    }
    case DType::i8:
    case DType::i32: break;  // callers check float dtypes first
  }
}


// A Weight's w is [N, K] f32/bf16/f16, or i8 with scales
// [N, ceil(K / group_size)] f32 (group_size > 0; the last group may be shorter).
Result<void> check_weight(const char* op, const char* name, const Weight& W);
// Row n of W, dequantized / widened to f32: dst[K].
inline void widen_weight_row(const Weight& W, int64_t n, float* dst) noexcept {
  const int64_t K = W.w.dim(1);
  if (W.w.dtype != DType::i8) {
    widen_row(W.w, n * K, K, dst);
    return;
  }
  const int64_t groups = W.scales.dim(1);
  dequantize_row_int8(W.w.as<const int8_t>() + n * K, W.scales.as<const float>() + n * groups, K, W.group_size, dst);
}


Result<void> embed(ThreadPool& pool, Tensor out, const Weight& table, const StepPlanView& plan);
Result<void> rmsnorm(ThreadPool& pool, Tensor out, Tensor x, Tensor w, float eps);
Result<void> silu_mul(ThreadPool& pool, Tensor out, Tensor gate_up);
// residual += x elementwise (f32, equal element counts).
Result<void> add_into(ThreadPool& pool, Tensor residual, Tensor x);
Result<void> gather_rows(ThreadPool& pool, Tensor out, Tensor x, const StepPlanView& plan);
Result<void> matmul(ThreadPool& pool, CpuScratch& scratch, Tensor out, Tensor x, const Weight& W);
Result<void> rope_qkv(ThreadPool& pool, CpuScratch& scratch, Tensor q_out, Tensor qkv, const StepPlanView& plan,
                      Tensor inv_freq, Tensor q_norm, Tensor k_norm, float eps, KvLayer cache);
Result<void> attention(ThreadPool& pool, CpuScratch& scratch, Tensor out, Tensor q, KvLayer cache,
                       const StepPlanView& plan, float scale);
Result<void> sample(ThreadPool& pool, CpuScratch& scratch, Tensor logits, const SampleBatch& batch,
                    const SampleOutput& out);

}  // namespace photon::cpu
