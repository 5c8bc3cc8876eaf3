#include "cuda/op_checks.hpp"

namespace photon::cuda {

std::string shape_string(const Tensor& t) {
  std::string s = std::string(dtype_name(t.dtype)) + "[";
  for (int i = 0; i < t.rank; ++i) s += (i ? ", " : "") + std::to_string(t.shape[size_t(i)]);
  return s + "]";
}
Unexpected mismatch(const char* op, const std::string& what) {
  return fail(Errc::shape_mismatch, std::string("cuda ") + op + ": " + what);
}
Status expect(const char* op, const char* name, const Tensor& t, DType want) {
  if (t.dtype != want)
    return mismatch(op, std::string(name) + " must be " + std::string(dtype_name(want)) + ", got " + shape_string(t));
  if (t.data == nullptr && t.numel() > 0) return fail(Errc::invalid_argument, std::string("cuda ") + op + ": " + name + " has no data");
  return {};
}
Status expect_norm_weight(const char* op, const char* name, const Tensor& w, int64_t n) {
  if (w.dtype != DType::bf16 && w.dtype != DType::f32)
    return mismatch(op, std::string(name) + " must be bf16 or f32, got " + shape_string(w));
  if (w.numel() != n || w.data == nullptr)
    return mismatch(op, std::string(name) + " must have " + std::to_string(n) + " elements, got " + shape_string(w));
  return {};
}

}  // namespace photon::cuda
