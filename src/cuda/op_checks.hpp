// Argument checks shared by the CUDA backend's ops: each names the op and the tensor and returns
// Errc::shape_mismatch (or invalid_argument for a tensor without data), never aborts. Host-only.
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.hpp"
#include "cuda/cuda_status.hpp"

namespace photon::cuda {

// "bf16[2, 3]": a tensor's dtype and shape for messages.
std::string shape_string(const Tensor& t);
// Errc::shape_mismatch: "cuda <op>: <what>".
Unexpected mismatch(const char* op, const std::string& what);
// t holds data of dtype `want` (or is empty).
Status expect(const char* op, const char* name, const Tensor& t, DType want);
// A norm weight: bf16 or f32 (the dtype the loader picked), [n].
Status expect_norm_weight(const char* op, const char* name, const Tensor& w, int64_t n);

}  // namespace photon::cuda
