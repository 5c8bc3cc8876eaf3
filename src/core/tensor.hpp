// Tensor: a non-owning, contiguous, row-major view of backend memory.
//
// `data` points into memory of the backend that made it (host memory for the
// CPU backend, device memory for CUDA); the owner is whoever allocated the
// Buffer it views. Rank <= 4 covers every activation and weight photon uses.
// Thread-compatibility: a plain value.
#pragma once

#include <array>
#include <cassert>
#include <cstdint>
#include <initializer_list>

#include "core/dtype.hpp"

namespace photon {

struct Tensor {
  void* data = nullptr;
  DType dtype = DType::f32;
  int rank = 0;
  std::array<int64_t, 4> shape{};

  static Tensor of(void* data, DType dtype, std::initializer_list<int64_t> dims) {
    Tensor t;
    t.data = data;
    t.dtype = dtype;
    assert(dims.size() <= 4);
    for (int64_t d : dims) t.shape[size_t(t.rank++)] = d;
    return t;
  }

  bool empty() const noexcept { return data == nullptr; }
  int64_t dim(int i) const noexcept { return shape[size_t(i < 0 ? rank + i : i)]; }
  int64_t numel() const noexcept {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= shape[size_t(i)];
    return rank == 0 ? 0 : n;
  }
  size_t nbytes() const noexcept { return size_t(numel()) * dtype_size(dtype); }
  // Elements per row of the leading dimension.
  int64_t row_elems() const noexcept { return rank == 0 || shape[0] == 0 ? 0 : numel() / shape[0]; }

  template <class T>
  T* as() const noexcept { return static_cast<T*>(data); }

  // The same memory seen with other dimensions (numel must agree).
  Tensor view(std::initializer_list<int64_t> dims) const {
    Tensor t = of(data, dtype, dims);
    assert(t.numel() == numel());
    return t;
  }
  // Rows [begin, begin + count) of the leading dimension.
  Tensor rows(int64_t begin, int64_t count) const {
    Tensor t = *this;
    t.data = static_cast<char*>(data) + size_t(begin * row_elems()) * dtype_size(dtype);
    t.shape[0] = count;
    return t;
  }
};

// Whether the bytes of a and b overlap (empty tensors overlap nothing).
inline bool overlaps(const Tensor& a, const Tensor& b) noexcept {
  const auto pa = reinterpret_cast<uintptr_t>(a.data), pb = reinterpret_cast<uintptr_t>(b.data);
  return a.nbytes() > 0 && b.nbytes() > 0 && pa < pb + b.nbytes() && pb < pa + a.nbytes();
}

// The weight of a linear layer or an embedding table, in the backend's layout.
// w: [N, K] (out features, in features), f32 / bf16 / f16, or i8 with
// group-wise scales: scales [N, ceil(K / group_size)] f32, one per group of
// group_size consecutive elements of a row (the last group shorter when
// group_size does not divide K), w_real[n, k] = w[n, k] * scales[n, k / group_size]
// (core/quantize.hpp makes them).
struct Weight {
  Tensor w;
  Tensor scales;
  int32_t group_size = 0;

  int64_t out_features() const noexcept { return w.dim(0); }
  int64_t in_features() const noexcept { return w.dim(1); }
};

// An int8 copy of a bf16 LM head for the backend's screened draws (docs/lm-head-screen.md,
// Backend::rmsnorm_lm_head): q quantizes the head's values (core/quantize.hpp), and row_abs[v]
// (f32, rounded up) is at least the sum over row v of the head's |w|. q.w empty: none.
struct LmHeadScreen {
  Weight q;        // [V, H] i8, f32 scales [V, H / group]
  Tensor row_abs;  // [V] f32
};

}  // namespace photon
