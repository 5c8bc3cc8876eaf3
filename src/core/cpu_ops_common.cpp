// Argument checks and dtype widening shared by the CPU ops.
#include <cmath>
#include <string>

#include "core/cpu_ops.hpp"
#include "core/quantize.hpp"
#include "core/try.hpp"

namespace photon::cpu {

std::string shape_string(const Tensor& t) {
  std::string s = std::string(dtype_name(t.dtype)) + "[";
  for (int i = 0; i < t.rank; ++i) s += (i ? ", " : "") + std::to_string(t.shape[size_t(i)]);
  return s + "]";
}

Result<void> expect_dtype(const char* op, const char* name, const Tensor& t, DType want) {
  if (t.dtype != want)
    return fail(Errc::shape_mismatch, std::string(op) + ": " + name + " must be " + std::string(dtype_name(want)) +
                                          ", got " + shape_string(t));
  return {};
}

Result<void> expect_float_dtype(const char* op, const char* name, const Tensor& t) {
  if (t.dtype != DType::f32 && t.dtype != DType::bf16 && t.dtype != DType::f16)
    return fail(Errc::shape_mismatch,
                std::string(op) + ": " + name + " must be f32, bf16 or f16, got " + shape_string(t));
  return {};
}

Result<void> expect_data(const char* op, const char* name, const Tensor& t) {
  if (t.rank < 0 || t.rank > 4) return fail(Errc::invalid_argument, std::string(op) + ": " + name + " has a bad rank");
  for (int i = 0; i < t.rank; ++i)
    if (t.shape[size_t(i)] < 0)
      return fail(Errc::invalid_argument,
                  std::string(op) + ": " + name + " has a negative dimension " + shape_string(t));
  if (t.data == nullptr && t.numel() > 0)
    return fail(Errc::invalid_argument, std::string(op) + ": " + name + " has no data");
  return {};
}

Result<void> expect_f32(const char* op, const char* name, const Tensor& t) {
  PHOTON_TRY(expect_data(op, name, t));
  return expect_dtype(op, name, t, DType::f32);
}

Result<void> check_kv_cache(const char* op, const KvLayer& cache) {
  PHOTON_TRY(expect_f32(op, "cache.k", cache.k));
  PHOTON_TRY(expect_f32(op, "cache.v", cache.v));
  if (cache.k.rank != 4 || cache.v.rank != 4 || cache.k.shape != cache.v.shape || cache.k.dim(0) <= 0 ||
      cache.k.dim(1) <= 0 || cache.k.dim(2) <= 0 || cache.k.dim(3) <= 0)
    return fail(Errc::shape_mismatch, std::string(op) +
                                          ": cache k and v must both be [num_blocks, block_size, nkv, hd] with "
                                          "positive dimensions, got " +
                                          shape_string(cache.k) + " and " + shape_string(cache.v));
  if (cache.block_stride != 0 && cache.block_stride < cache.k.dim(1))
    return fail(Errc::invalid_argument, std::string(op) + ": cache block_stride " +
                                            std::to_string(cache.block_stride) + " must be 0 or at least block_size " +
                                            std::to_string(cache.k.dim(1)));
  return {};
}

void rmsnorm_row(const float* x, const float* w, int64_t n, float eps, float* out) noexcept {
  double sum_sq = 0.0;
  for (int64_t i = 0; i < n; ++i) sum_sq += double(x[i]) * double(x[i]);
  const float mean_sq = n > 0 ? float(sum_sq / double(n)) : 0.0f;
  const float r = 1.0f / std::sqrt(mean_sq + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = w[i] * (x[i] * r);
}

Result<void> check_weight(const char* op, const char* name, const Weight& W) {
  PHOTON_TRY(expect_data(op, name, W.w));
  const std::string what = std::string(op) + ": weight " + name + " ";
  if (W.w.rank != 2) return fail(Errc::shape_mismatch, what + "must be [N, K], got " + shape_string(W.w));
  if (W.w.dtype == DType::i8) {
    const int64_t N = W.w.dim(0), K = W.w.dim(1);
    if (W.group_size <= 0)
      return fail(Errc::invalid_argument, what + "int8 group_size " + std::to_string(W.group_size) +
                                              " must be positive");
    const int64_t groups = int8_group_count(K, W.group_size);
    PHOTON_TRY(expect_data(op, name, W.scales));
    if (W.scales.dtype != DType::f32 || W.scales.rank != 2 || W.scales.dim(0) != N || W.scales.dim(1) != groups)
      return fail(Errc::shape_mismatch, what + "int8 scales must be f32[" + std::to_string(N) + ", " +
                                            std::to_string(groups) + "] (ceil(K / group_size)), got " +
                                            shape_string(W.scales));
    return {};
  }
  return expect_float_dtype(op, name, W.w);
}

}  // namespace photon::cpu
