// Element conversion between photon's floating-point dtypes on the host.
// Thread-compatibility: pure functions.
#pragma once

#include <cstddef>

#include "core/dtype.hpp"

namespace photon {

constexpr bool is_float_dtype(DType t) noexcept { return t == DType::f32 || t == DType::bf16 || t == DType::f16; }

// dst[i] = src[i] converted from `from` to `to` (f32 / bf16 / f16 each way;
// narrowing rounds to nearest-even), for n elements. src may be unaligned.
// Returns false, writing nothing, when either dtype is not a float dtype.
bool convert_elements(const void* src, DType from, void* dst, DType to, size_t n) noexcept;

}  // namespace photon
