#include "core/convert.hpp"

#include <cstdint>
#include <cstring>

namespace photon {

namespace {
inline float load_as_f32(const unsigned char* p, DType t) noexcept {
  if (t == DType::f32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  return t == DType::bf16 ? bf16_to_f32(h) : f16_to_f32(h);
}
inline void store_from_f32(unsigned char* p, DType t, float f) noexcept {
  if (t == DType::f32) {
    std::memcpy(p, &f, 4);
    return;
  }
  const uint16_t h = t == DType::bf16 ? f32_to_bf16(f) : f32_to_f16(f);
  std::memcpy(p, &h, 2);
}
}  // namespace

bool convert_elements(const void* src, DType from, void* dst, DType to, size_t n) noexcept {
  if (!is_float_dtype(from) || !is_float_dtype(to)) return false;
  const auto* s = static_cast<const unsigned char*>(src);
  auto* d = static_cast<unsigned char*>(dst);
  if (from == to) {
    std::memcpy(d, s, n * dtype_size(from));
    return true;
  }
  const size_t ss = dtype_size(from), ds = dtype_size(to);
  for (size_t i = 0; i < n; ++i) store_from_f32(d + i * ds, to, load_as_f32(s + i * ss, from));
  return true;
}

}  // namespace photon
