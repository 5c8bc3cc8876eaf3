// Helpers of the CUDA backend tests: the backends under test (CUDA) and as
// reference (CPU, the numerical oracle), tensors moved between host f32
// vectors and either backend's memory, poisoned outputs, and the norm-wise
// relative error ||out - ref|| / ||ref|| the tolerances are stated in.
//
// Tolerance rationale (bf16 has an 8-bit significand): rounding one value to
// bf16 moves it by at most 2^-9 relative (~0.2%), about 2^-9 / sqrt(3)
// ~ 0.11% in RMS over many values. An op whose only bf16 rounding is its
// output therefore lands near 1e-3 norm-wise; the tests allow 4e-3 for those.
// Attention also rounds its softmax weights to bf16 before P.V (one more
// rounding of the same size), so it gets 1e-2. fp32-output matmuls differ
// from the CPU only in summation order: 1e-4.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/backend.hpp"
#include "core/batch_plan.hpp"
#include "core/cpu_backend.hpp"
#include "core/dtype.hpp"
#include "cuda/cuda_backend.hpp"

namespace photon::test {

inline constexpr double kBf16OutputTol = 4e-3;
inline constexpr double kAttentionTol = 1e-2;
inline constexpr double kF32MatmulTol = 1e-4;

inline std::unique_ptr<Backend> cuda_backend(CudaBackendOptions options = {}) {
  auto b = make_cuda_backend(options);
  if (!b) FAIL("make_cuda_backend: " << b.error().message);
  return std::move(*b);
}

inline std::unique_ptr<Backend> cpu_reference() {
  auto b = make_cpu_backend(CpuBackendOptions{.num_threads = 4});
  REQUIRE(b.has_value());
  return std::move(*b);
}

inline std::vector<float> random_vec(std::mt19937& rng, size_t n, float lo = -1.f, float hi = 1.f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// The values as bf16 would store them (so both backends see identical inputs).
inline std::vector<float> bf16_rounded(std::vector<float> v) {
  for (float& x : v) x = bf16_to_f32(f32_to_bf16(x));
  return v;
}

// A tensor in a backend's memory with the Buffer that owns it.
struct DeviceTensor {
  Buffer buf;
  Tensor t;
};

inline std::vector<uint8_t> encode(const std::vector<float>& v, DType dt) {
  std::vector<uint8_t> bytes(v.size() * dtype_size(dt));
  for (size_t i = 0; i < v.size(); ++i) {
    if (dt == DType::f32) std::memcpy(bytes.data() + 4 * i, &v[i], 4);
    else if (dt == DType::bf16) {
      const uint16_t b = f32_to_bf16(v[i]);
      std::memcpy(bytes.data() + 2 * i, &b, 2);
    } else FAIL("encode: unsupported dtype");
  }
  return bytes;
}

inline DeviceTensor upload(Backend& b, const std::vector<float>& v, DType dt, std::initializer_list<int64_t> dims) {
  DeviceTensor d;
  const std::vector<uint8_t> bytes = encode(v, dt);
  auto buf = b.allocate(bytes.size());
  REQUIRE(buf.has_value());
  d.buf = std::move(*buf);
  d.t = d.buf.tensor(dt, dims);
  REQUIRE(d.t.numel() == int64_t(v.size()));
  REQUIRE(b.copy_to_device(d.buf.data(), bytes.data(), bytes.size()).has_value());
  return d;
}

// Raw bytes in a backend's memory as a tensor of `dt`.
inline DeviceTensor upload_raw(Backend& b, const void* bytes, size_t n, DType dt, std::initializer_list<int64_t> dims) {
  DeviceTensor d;
  auto buf = b.allocate(n);
  REQUIRE(buf.has_value());
  d.buf = std::move(*buf);
  d.t = d.buf.tensor(dt, dims);
  REQUIRE(d.t.nbytes() == n);
  REQUIRE(b.copy_to_device(d.buf.data(), bytes, n).has_value());
  return d;
}

// An [N, K] weight quantized to int8 groups of `group` (core/quantize.hpp), in host memory.
struct HostInt8 {
  std::vector<int8_t> codes;   // [N, K]
  std::vector<float> scales;   // [N, groups]
  int64_t N, K, groups;
  int32_t group;
};

// The weight in a backend's memory (the loader's layout: i8 codes, f32 scales).
struct DeviceInt8 {
  DeviceTensor codes, scales;
  Weight weight() const {
    Weight w;
    w.w = codes.t;
    w.scales = scales.t;
    w.group_size = group;
    return w;
  }
  int32_t group;
};

inline DeviceInt8 upload_int8(Backend& b, const HostInt8& h) {
  return {upload_raw(b, h.codes.data(), h.codes.size(), DType::i8, {h.N, h.K}),
          upload_raw(b, h.scales.data(), h.scales.size() * sizeof(float), DType::f32, {h.N, h.groups}), h.group};
}

// An output tensor filled with NaN, so an element the op fails to write shows.
inline DeviceTensor poisoned(Backend& b, DType dt, std::initializer_list<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return upload(b, std::vector<float>(size_t(n), std::numeric_limits<float>::quiet_NaN()), dt, dims);
}

// A bf16 (or f32) weight over d's tensor, without int8 scales.
inline Weight weight_of(const DeviceTensor& d) {
  Weight w;
  w.w = d.t;
  return w;
}

inline std::vector<float> download(Backend& b, const Tensor& t) {
  std::vector<uint8_t> bytes(t.nbytes());
  REQUIRE(b.copy_to_host(bytes.data(), t.data, bytes.size()).has_value());
  std::vector<float> v(size_t(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) {
    if (t.dtype == DType::f32) std::memcpy(&v[i], bytes.data() + 4 * i, 4);
    else if (t.dtype == DType::bf16) {
      uint16_t h;
      std::memcpy(&h, bytes.data() + 2 * i, 2);
      v[i] = bf16_to_f32(h);
    } else FAIL("download: unsupported dtype");
  }
  return v;
}

// A paged KV cache inside the decoder's block-major pool (docs/kv-cache-layout.md): one allocation
// [num_blocks][layers][k | v][bs][nkv][hd], the test's cache its last layer. layers = 1 instead
// gives a packed cache (K [num_blocks, bs, nkv, hd], then V; block_stride 0). Every other layer's
// rows hold NaN, so a kernel that reads a row of the wrong layer shows in its output and one that
// writes there shows in download_kv.
struct DeviceKv {
  DeviceTensor pool;  // [num_blocks * layers * 2 * bs * nkv * hd]
  KvLayer layer;      // views into pool
  int64_t num_blocks, bs, nkv, hd, layers;

  // Where part p (2l: layer l's K, 2l + 1: its V) of block blk starts in pool, in elements.
  int64_t offset(int64_t blk, int64_t p) const {
    const int64_t part = bs * nkv * hd;  // one block's k (or v) of one layer
    return layers == 1 ? (p * num_blocks + blk) * part : (blk * layers * 2 + p) * part;
  }
};

// k and v: the layer's values, packed [num_blocks, bs, nkv, hd].
inline DeviceKv upload_kv(Backend& b, const std::vector<float>& k, const std::vector<float>& v, DType dt,
                          int64_t num_blocks, int64_t bs, int64_t nkv, int64_t hd, int64_t layers = 1) {
  const int64_t part = bs * nkv * hd, l = layers - 1;
  REQUIRE(k.size() == size_t(num_blocks * part));
  REQUIRE(v.size() == size_t(num_blocks * part));
  DeviceKv d{{}, {}, num_blocks, bs, nkv, hd, layers};
  std::vector<float> pool(size_t(num_blocks * layers * 2 * part), std::numeric_limits<float>::quiet_NaN());
  for (int64_t blk = 0; blk < num_blocks; ++blk) {
    std::copy_n(k.begin() + ptrdiff_t(blk * part), part, pool.begin() + ptrdiff_t(d.offset(blk, 2 * l)));
    std::copy_n(v.begin() + ptrdiff_t(blk * part), part, pool.begin() + ptrdiff_t(d.offset(blk, 2 * l + 1)));
  }
  d.pool = upload(b, pool, dt, {int64_t(pool.size())});
  auto* base = static_cast<char*>(d.pool.buf.data());
  const size_t es = dtype_size(dt);
  d.layer.k = Tensor::of(base + size_t(d.offset(0, 2 * l)) * es, dt, {num_blocks, bs, nkv, hd});
  d.layer.v = Tensor::of(base + size_t(d.offset(0, 2 * l + 1)) * es, dt, {num_blocks, bs, nkv, hd});
  d.layer.block_stride = layers > 1 ? 2 * layers * bs : 0;
  return d;
}

// The layer's k and v, packed [num_blocks, bs, nkv, hd]; every other layer's rows must still be NaN.
struct HostKv {
  std::vector<float> k, v;
};
inline HostKv download_kv(Backend& b, const DeviceKv& d) {
  const std::vector<float> pool = download(b, d.pool.t);
  const int64_t part = d.bs * d.nkv * d.hd, l = d.layers - 1;
  HostKv h;
  int64_t stray = 0;
  for (int64_t blk = 0; blk < d.num_blocks; ++blk)
    for (int64_t p = 0; p < 2 * d.layers; ++p) {
      const auto from = pool.begin() + ptrdiff_t(d.offset(blk, p));
      if (p == 2 * l) h.k.insert(h.k.end(), from, from + part);
      else if (p == 2 * l + 1) h.v.insert(h.v.end(), from, from + part);
      else stray += std::count_if(from, from + part, [](float x) { return !std::isnan(x); });
    }
  CHECK(stray == 0);
  return h;
}

// ||out - ref|| / ||ref||; infinity when out holds a NaN/inf (an unwritten or broken element).
inline double rel_error(const std::vector<float>& out, const std::vector<float>& ref) {
  REQUIRE(out.size() == ref.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i])) return std::numeric_limits<double>::infinity();
    const double d = double(out[i]) - double(ref[i]);
    num += d * d;
    den += double(ref[i]) * double(ref[i]);
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// RoPE inverse frequencies [hd / 2] of base theta (no scaling).
inline std::vector<float> inv_freq_of(int64_t hd, double theta) {
  std::vector<float> f(size_t(hd / 2));
  for (int64_t i = 0; i < hd / 2; ++i) f[size_t(i)] = float(std::pow(theta, -2.0 * double(i) / double(hd)));
  return f;
}

// Attention geometry: head dim, KV heads, query heads per KV head.
struct Geometry {
  int64_t hd, nkv, group;
};

// One sequence of a ragged batch: `ctx` tokens in the cache after the step, the last `q_len` new.
struct SeqSpec {
  int32_t ctx;
  int32_t q_len;
};

// A plan over `seqs` whose blocks are a shuffled subset of a pool of
// num_blocks, so block tables are scattered; token ids drawn from [0, vocab).
inline BatchPlan scattered_plan(const std::vector<SeqSpec>& seqs, int32_t block_size, int32_t num_blocks,
                                std::mt19937& rng, int32_t vocab = 1000) {
  std::vector<int32_t> pool(static_cast<size_t>(num_blocks));
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  std::uniform_int_distribution<int32_t> tok(0, vocab - 1);
  size_t next = 0;
  BatchPlan plan;
  for (const SeqSpec& s : seqs) {
    std::vector<int32_t> table;
    for (int32_t b = 0; b * block_size < s.ctx; ++b) table.push_back(pool.at(next++));
    std::vector<int32_t> ids(size_t(s.q_len));
    for (int32_t& id : ids) id = tok(rng);
    plan.add_sequence(ids.data(), s.q_len, s.ctx - s.q_len, table.data(), int32_t(table.size()), block_size, true);
  }
  plan.finalize();
  REQUIRE(plan.validate(block_size, num_blocks).has_value());
  return plan;
}

}  // namespace photon::test
