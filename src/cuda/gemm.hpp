// Gemm: bf16 matrix products through cuBLASLt, out[M, N] = x[M, K] @ w[N, K]^T
// (w stored as nn.Linear stores it), fp32 accumulation, bf16 or f32 output.
// The algorithm chosen by cuBLASLt's heuristic is cached per (shape, output
// dtype, pointer alignment); one workspace (owned by the caller, reused by
// every call on the stream) serves all products, so calls are capturable into
// CUDA graphs. Bandwidth model: reads (M*K + N*K)*2 bytes, writes M*N*2 (or 4).
// Thread-compatibility: one thread at a time (the backend's).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>

#include "core/dtype.hpp"
#include "cuda/cuda_status.hpp"

namespace photon::cuda {

class Gemm {
 public:
  // workspace: device memory of workspace_bytes, owned by the caller, outliving the Gemm.
  static Result<std::unique_ptr<Gemm>> create(void* workspace, size_t workspace_bytes);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // out [M, N] (out_dtype f32 or bf16) = x [M, K] bf16 @ w [N, K]^T bf16, or with accumulate
  // out += the product (cuBLASLt's beta = 1 with C = D = out: one rounding); all device pointers.
  Status run(void* out, DType out_dtype, const void* x, const void* w, int64_t M, int64_t N, int64_t K,
             cudaStream_t stream, bool accumulate = false);

 private:
  struct Key {
    int64_t m, n, k;
    int32_t out_f32;
    int32_t align;  // smallest pointer alignment in bytes, capped at 256
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const noexcept;
  };
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  Gemm() = default;
  Result<const Plan*> plan_for(const Key& key);
  static void destroy(Plan& p) noexcept;

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::unordered_map<Key, Plan, KeyHash> plans_;
};

}  // namespace photon::cuda
