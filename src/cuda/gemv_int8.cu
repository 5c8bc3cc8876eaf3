#include "cuda/common.cuh"
#include "cuda/gemv_int8.cuh"
#include "cuda/launch.cuh"

namespace photon::cuda {

namespace {

constexpr int kWarps = 8;
constexpr int kUnroll = 8;          // 16-byte code loads in flight per lane (fast path)
constexpr int kAnyUnroll = 4;       // 1-byte code loads in flight per lane (general path)
constexpr int kRowsPerPass = 8;     // x rows one pass over w serves
constexpr int kDequantThreads = 256;

// Four int8 codes packed in a 32-bit word as exact floats: code ^ 0x80 is
// code + 128 in [1, 255] (-128 never occurs), placed as the low mantissa byte
// of 2^23 (0x4B000000) it reads as 2^23 + code + 128; subtracting
// 2^23 + 128 leaves the code.
__device__ __forceinline__ void codes4_to_f32(uint32_t word, float* f) {
  const uint32_t biased = word ^ 0x80808080u;
#pragma unroll
  for (int i = 0; i < 4; ++i) f[i] = __uint_as_float(__byte_perm(biased, 0x4B000000u, 0x7440u | unsigned(i))) - 8388736.f;
}

// Lane 0 of the warp that owns column n writes its rows' results.
template <int MAXM>
__device__ __forceinline__ void store_column(const GemvInt8Args& a, int n, const float (&acc)[MAXM]) {
#pragma unroll
  for (int m = 0; m < MAXM; ++m) {
    if (m >= a.M) break;
    if (a.out_f32) static_cast<float*>(a.out)[int64_t(m) * a.N + n] = acc[m];
    else static_cast<bf16*>(a.out)[int64_t(m) * a.N + n] = to_bf16(acc[m]);
  }
}

// Fast path (K % 16 == 0, group % 16 == 0, 16-byte aligned w and x): a block
// of kWarps warps serves kWarps / KS columns; the KS warps of a column split
// its K / 16 chunks (interleaved) and meet in shared memory. Lanes of one
// group read the same scale (one broadcast load). MAXM >= a.M rows of x.
template <int MAXM, int KS>
__global__ void __launch_bounds__(kWarps * 32) gemv_int8_kernel(GemvInt8Args a) {
  constexpr int kCols = kWarps / KS;
  constexpr int kStep = 32 * KS;
  __shared__ float partial[kWarps][MAXM];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int col = warp / KS, slice = warp % KS;
  const int n = blockIdx.x * kCols + col;
  const int chunks = n < a.N ? a.K / 16 : 0;  // a column past N streams nothing
  const int row = n < a.N ? n : 0;
  const int chunks_per_group = a.group / 16;
  // group index of chunk c: a shift when chunks_per_group is a power of two (group 16, 32, 64, 128, ...)
  const int group_shift = (chunks_per_group & (chunks_per_group - 1)) == 0 ? __ffs(chunks_per_group) - 1 : -1;
  const uint4* w = reinterpret_cast<const uint4*>(a.w) + int64_t(row) * (a.K / 16);
  const float* s = a.scales + int64_t(row) * ceil_div(a.K, a.group);

  uint4 wv[kUnroll];
  float sc[kUnroll];
  auto load = [&](int base) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int c = base + kStep * u;
      wv[u] = c < chunks ? __ldcs(w + c) : make_uint4(0, 0, 0, 0);
      sc[u] = c < chunks ? __ldg(s + (group_shift >= 0 ? c >> group_shift : c / chunks_per_group)) : 0.f;
    }
  };
  int c0 = slice * 32 + lane;
  load(c0);  // weights and scales only: no earlier kernel writes them
  pdl_wait();
  pdl_launch_dependents();

  float acc[MAXM];
#pragma unroll
  for (int m = 0; m < MAXM; ++m) acc[m] = 0.f;
  const uint4* x = reinterpret_cast<const uint4*>(a.x);
  const int64_t x_row = a.K / 8;  // 16-byte vectors per x row
  for (; c0 < chunks; c0 += kStep * kUnroll) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int c = c0 + kStep * u;
      if (c >= chunks) break;
      float q[16];
      codes4_to_f32(wv[u].x, q);
      codes4_to_f32(wv[u].y, q + 4);
      codes4_to_f32(wv[u].z, q + 8);
      codes4_to_f32(wv[u].w, q + 12);
#pragma unroll
      for (int m = 0; m < MAXM; ++m) {
        if (m >= a.M) break;
        float lo[8], hi[8];
        unpack_bf16x8(__ldg(x + m * x_row + 2 * c), lo);
        unpack_bf16x8(__ldg(x + m * x_row + 2 * c + 1), hi);
        float dot = 0.f;
#pragma unroll
        for (int e = 0; e < 8; ++e) dot += q[e] * lo[e];
#pragma unroll
        for (int e = 0; e < 8; ++e) dot += q[8 + e] * hi[e];
        acc[m] += sc[u] * dot;
      }
    }
    load(c0 + kStep * kUnroll);
  }
#pragma unroll
  for (int m = 0; m < MAXM; ++m) acc[m] = warp_sum(acc[m]);
  if constexpr (KS > 1) {
    if (lane == 0)
#pragma unroll
      for (int m = 0; m < MAXM; ++m) partial[warp][m] = acc[m];
    __syncthreads();
    if (slice != 0) return;
#pragma unroll
    for (int m = 0; m < MAXM; ++m)
      for (int k = 1; k < KS; ++k) acc[m] += partial[warp + k][m];
  }
  if (lane == 0 && n < a.N) store_column<MAXM>(a, n, acc);
}

// General path (any K, group and alignment): one warp per column, lanes
// stride over single codes, each dequantized as the CPU does (code * scale in
// f32) before the dot.
template <int MAXM>
__global__ void __launch_bounds__(kWarps * 32) gemv_int8_any_kernel(GemvInt8Args a) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int n = blockIdx.x * kWarps + warp;
  const int K = n < a.N ? a.K : 0;  // a column past N streams nothing
  const int row = n < a.N ? n : 0;
  const int8_t* w = a.w + int64_t(row) * a.K;
  const float* s = a.scales + int64_t(row) * ceil_div(a.K, a.group);
  pdl_wait();
  pdl_launch_dependents();
  float acc[MAXM];
#pragma unroll
  for (int m = 0; m < MAXM; ++m) acc[m] = 0.f;
  for (int k0 = lane; k0 < K; k0 += 32 * kAnyUnroll) {
    float wf[kAnyUnroll];
#pragma unroll
    for (int u = 0; u < kAnyUnroll; ++u) {
      const int k = k0 + 32 * u;
      wf[u] = k < K ? float(__ldcs(reinterpret_cast<const signed char*>(w) + k)) * __ldg(s + k / a.group) : 0.f;
    }
#pragma unroll
    for (int u = 0; u < kAnyUnroll; ++u) {
      const int k = k0 + 32 * u;
      if (k >= K) break;
#pragma unroll
      for (int m = 0; m < MAXM; ++m) {
        if (m >= a.M) break;
        acc[m] += wf[u] * to_f32(a.x[int64_t(m) * a.K + k]);
      }
    }
  }
#pragma unroll
  for (int m = 0; m < MAXM; ++m) acc[m] = warp_sum(acc[m]);
  if (lane == 0 && n < a.N) store_column<MAXM>(a, n, acc);
}

template <int MAXM, int KS>
cudaError_t launch_fast(const GemvInt8Args& a, cudaStream_t stream) {
  const unsigned blocks = unsigned(ceil_div(a.N, kWarps / KS));
  return launch_kernel(gemv_int8_kernel<MAXM, KS>, dim3(blocks), dim3(kWarps * 32), 0, stream, a);
}

template <int MAXM>
cudaError_t launch_rows(const GemvInt8Args& a, bool fast, cudaStream_t stream) {
  if (!fast) {
    const unsigned blocks = unsigned(ceil_div(a.N, kWarps));
    return launch_kernel(gemv_int8_any_kernel<MAXM>, dim3(blocks), dim3(kWarps * 32), 0, stream, a);
  }
  // About 8192 warps in flight fill an H100/H200's DRAM pipe; split K (rows of
  // K bytes) until N * KS gets there while every lane keeps a few chunks.
  if (a.N >= 8192 || a.K < 4096) return launch_fast<MAXM, 1>(a, stream);
  if (a.N >= 4096) return launch_fast<MAXM, 2>(a, stream);
  if (a.N >= 2048 || a.K < 8192) return launch_fast<MAXM, 4>(a, stream);
  return launch_fast<MAXM, 8>(a, stream);
}

// Out-of-place dequantization. kVec: 8 codes per thread step (K % 8 == 0,
// group % 8 == 0, w 8-byte and out 16-byte aligned), else one code.
template <bool kVec>
__global__ void __launch_bounds__(kDequantThreads) dequantize_int8_kernel(DequantizeInt8Args a) {
  pdl_wait();  // out may still be read by the product of an earlier layer
  pdl_launch_dependents();
  constexpr int kW = kVec ? 8 : 1;
  const int64_t per_row = a.K / kW;
  const int64_t total = a.N * per_row;
  const int64_t groups = ceil_div(a.K, a.group);
  for (int64_t i = int64_t(blockIdx.x) * kDequantThreads + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * kDequantThreads) {
    const int64_t r = i / per_row;
    const int64_t k = (i - r * per_row) * kW;
    const float scale = __ldg(a.scales + r * groups + k / a.group);
    if constexpr (kVec) {
      const uint2 codes = __ldcs(reinterpret_cast<const uint2*>(a.w + r * a.K + k));
      float f[8];
      codes4_to_f32(codes.x, f);
      codes4_to_f32(codes.y, f + 4);
#pragma unroll
      for (int e = 0; e < 8; ++e) f[e] *= scale;
      store_bf16x8(a.out + r * a.K + k, f);
    } else {
      a.out[r * a.K + k] = to_bf16(float(a.w[r * a.K + k]) * scale);
    }
  }
}

}  // namespace

bool gemv_int8_applies(const GemvInt8Args& a) {
  return a.M >= 1 && a.M <= kGemvInt8MaxRows && a.N > 0 && a.K > 0 && a.group > 0 && a.out != nullptr &&
         a.x != nullptr && a.w != nullptr && a.scales != nullptr;
}

Status launch_gemv_int8(const GemvInt8Args& a, cudaStream_t stream) {
  if (!gemv_int8_applies(a))
    return bad_launch("gemv_int8", "needs 1 <= M <= " + std::to_string(kGemvInt8MaxRows) +
                                       ", N, K, group > 0 and non-null pointers");
  const bool fast = a.K % 16 == 0 && a.group % 16 == 0 && is_aligned(a.w, 16) && is_aligned(a.x, 16);
  const size_t out_size = a.out_f32 ? sizeof(float) : sizeof(bf16);
  for (int32_t m0 = 0; m0 < a.M; m0 += kRowsPerPass) {
    GemvInt8Args p = a;
    p.M = a.M - m0 < kRowsPerPass ? a.M - m0 : kRowsPerPass;
    p.x = a.x + int64_t(m0) * a.K;
    p.out = static_cast<char*>(a.out) + size_t(m0) * size_t(a.N) * out_size;
    cudaError_t err;
    if (p.M == 1) err = launch_rows<1>(p, fast, stream);
    else if (p.M == 2) err = launch_rows<2>(p, fast, stream);
    else if (p.M <= 4) err = launch_rows<4>(p, fast, stream);
    else err = launch_rows<kRowsPerPass>(p, fast, stream);
    PHOTON_CUDA_TRY(err);
  }
  return {};
}

Status launch_dequantize_int8(const DequantizeInt8Args& a, cudaStream_t stream) {
  if (a.N < 0 || a.K <= 0 || a.group <= 0 || (a.N > 0 && (a.out == nullptr || a.w == nullptr || a.scales == nullptr)))
    return bad_launch("dequantize_int8", "needs N >= 0, K, group > 0 and non-null pointers");
  if (a.N == 0) return {};
  const bool vec = a.K % 8 == 0 && a.group % 8 == 0 && is_aligned(a.w, 8) && is_aligned(a.out, 16);
  const int64_t steps = a.N * (vec ? a.K / 8 : a.K);
  const int64_t want = ceil_div64(steps, kDequantThreads);
  const unsigned blocks = unsigned(want < 65536 ? want : 65536);
  const cudaError_t err = vec ? launch_kernel(dequantize_int8_kernel<true>, dim3(blocks), dim3(kDequantThreads), 0,
                                              stream, a)
                              : launch_kernel(dequantize_int8_kernel<false>, dim3(blocks), dim3(kDequantThreads), 0,
                                              stream, a);
  PHOTON_CUDA_TRY(err);
  return {};
}

}  // namespace photon::cuda
