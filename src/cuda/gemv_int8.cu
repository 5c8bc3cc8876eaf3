#include "cuda/common.cuh"
#include "cuda/gemv_int8.cuh"
#include "cuda/launch.cuh"

namespace photon::cuda {

namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kUnroll = 8;          // 16-byte code loads in flight per lane (fast path)
constexpr int kAnyUnroll = 4;       // 1-byte code loads in flight per lane (general path)
constexpr int kDequantThreads = 256;

// The thread holding column n's sums writes its rows' results.
template <int MAXM>
__device__ __forceinline__ void store_column(const GemvInt8Args& a, int n, const float (&acc)[MAXM]) {
#pragma unroll
  for (int m = 0; m < MAXM; ++m) {
    if (m >= a.M) break;
    if (a.out_f32) {
      static_cast<float*>(a.out)[int64_t(m) * a.N + n] = acc[m];
    } else {
      bf16& o = static_cast<bf16*>(a.out)[int64_t(m) * a.N + n];
      o = to_bf16(a.accumulate ? to_f32(o) + acc[m] : acc[m]);
    }
  }
}

// Fast path (K % 16 == 0, group % 16 == 0, 16-byte aligned w and x): TPC
// threads per output column (16 .. 256, a power of two), so a block of
// kThreads serves kThreads / TPC columns; the TPC threads of a column take its
// K / 16 chunks interleaved (thread p: chunks p, p + TPC, ...) and meet by
// shuffles (within a warp) and shared memory (TPC > 32). Threads of one group
// read the same scale (one broadcast load); the two columns of a warp at
// TPC = 16 read the same x (one L1 transaction). MAXM >= a.M rows of x.
// MAXM == 1 is held to 64 registers (4 blocks, 32 warps per SM): the bytes in
// flight per SM, not the instructions, bound a decode GEMV.
template <int MAXM, int TPC>
__global__ void __launch_bounds__(kThreads, MAXM == 1 ? 4 : 2) gemv_int8_kernel(GemvInt8Args a) {
  static_assert(TPC >= 16 && TPC <= kThreads && (TPC & (TPC - 1)) == 0, "threads per column");
  constexpr int kCols = kThreads / TPC;
  constexpr int kLanes = TPC < 32 ? TPC : 32;         // threads of a column in one warp
  constexpr int kColWarps = TPC > 32 ? TPC / 32 : 1;  // warps of a column
  __shared__ float partial[kWarps][MAXM];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int col = threadIdx.x / TPC, p = threadIdx.x % TPC;
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
      const int c = base + TPC * u;
      wv[u] = c < chunks ? __ldcs(w + c) : make_uint4(0, 0, 0, 0);
      sc[u] = c < chunks ? __ldg(s + (group_shift >= 0 ? c >> group_shift : c / chunks_per_group)) : 0.f;
    }
  };
  int c0 = p;
  load(c0);  // weights and scales only: no earlier kernel writes them
  pdl_wait();
  pdl_launch_dependents();

  float acc[MAXM];
#pragma unroll
  for (int m = 0; m < MAXM; ++m) acc[m] = 0.f;
  const uint4* x = reinterpret_cast<const uint4*>(a.x);
  const int64_t x_row = a.K / 8;  // 16-byte vectors per x row
  for (; c0 < chunks; c0 += TPC * kUnroll) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int c = c0 + TPC * u;
      if (c >= chunks) break;
      // the chunk's two halves of 8 codes, one at a time (fewer live registers)
      float dot[MAXM];
#pragma unroll
      for (int m = 0; m < MAXM; ++m) dot[m] = 0.f;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float q[8];
        codes4_to_f32(h == 0 ? wv[u].x : wv[u].z, q);
        codes4_to_f32(h == 0 ? wv[u].y : wv[u].w, q + 4);
#pragma unroll
        for (int m = 0; m < MAXM; ++m) {
          if (m >= a.M) break;
          float xf[8];
          unpack_bf16x8(__ldg(x + m * x_row + 2 * c + h), xf);
#pragma unroll
          for (int e = 0; e < 8; ++e) dot[m] += q[e] * xf[e];
        }
      }
#pragma unroll
      for (int m = 0; m < MAXM; ++m) acc[m] += sc[u] * dot[m];
    }
    load(c0 + TPC * kUnroll);
  }
#pragma unroll
  for (int m = 0; m < MAXM; ++m) acc[m] = group_sum<kLanes>(acc[m]);
  if constexpr (kColWarps > 1) {
    if (lane == 0)
#pragma unroll
      for (int m = 0; m < MAXM; ++m) partial[warp][m] = acc[m];
    __syncthreads();
    if (p >= 32) return;  // the column's first warp sums its warps' partials
#pragma unroll
    for (int m = 0; m < MAXM; ++m)
      for (int k = 1; k < kColWarps; ++k) acc[m] += partial[warp + k][m];
  }
  if (p == 0 && n < a.N) store_column<MAXM>(a, n, acc);
}

// General path (any K, group and alignment): one warp per column, lanes
// stride over single codes, each dequantized as the CPU does (code * scale in
// f32) before the dot.
template <int MAXM>
__global__ void __launch_bounds__(kThreads) gemv_int8_any_kernel(GemvInt8Args a) {
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

template <int MAXM, int TPC>
cudaError_t launch_fast(const GemvInt8Args& a, cudaStream_t stream) {
  const unsigned blocks = unsigned(ceil_div(a.N, kThreads / TPC));
  return launch_kernel(gemv_int8_kernel<MAXM, TPC>, dim3(blocks), dim3(kThreads), 0, stream, a);
}

template <int MAXM>
cudaError_t launch_rows(const GemvInt8Args& a, bool fast, cudaStream_t stream) {
  if (!fast) {
    const unsigned blocks = unsigned(ceil_div(a.N, kWarps));
    return launch_kernel(gemv_int8_any_kernel<MAXM>, dim3(blocks), dim3(kThreads), 0, stream, a);
  }
  // Threads per column: the fewest (>= 16) that leave each thread at most
  // kUnroll chunks, so one batch of loads covers the row (K = 2048: 16,
  // K = 8192: 64) and every thread has all its loads in flight at once.
  const int chunks = a.K / 16;
  if (chunks <= 16 * kUnroll) return launch_fast<MAXM, 16>(a, stream);
  if (chunks <= 32 * kUnroll) return launch_fast<MAXM, 32>(a, stream);
  if (chunks <= 64 * kUnroll) return launch_fast<MAXM, 64>(a, stream);
  if (chunks <= 128 * kUnroll) return launch_fast<MAXM, 128>(a, stream);
  return launch_fast<MAXM, 256>(a, stream);
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

PHOTON_PRELOAD_UNIT(gemv_int8, dequantize_int8_kernel<true>)

bool gemv_int8_applies(const GemvInt8Args& a) {
  return a.M >= 1 && a.M <= kGemvInt8MaxRows && a.N > 0 && a.K > 0 && a.group > 0 && a.out != nullptr &&
         a.x != nullptr && a.w != nullptr && a.scales != nullptr && !(a.accumulate && a.out_f32) && !a.silu;
}

Status launch_gemv_int8(const GemvInt8Args& a, cudaStream_t stream) {
  if (!gemv_int8_applies(a))
    return bad_launch("gemv_int8", "needs 1 <= M <= " + std::to_string(kGemvInt8MaxRows) +
                                       ", N, K, group > 0 and non-null pointers");
  const bool fast = a.K % 16 == 0 && a.group % 16 == 0 && is_aligned(a.w, 16) && is_aligned(a.x, 16);
  static_assert(kGemvInt8MaxRows == 8, "instantiate the kernels for every dispatched row count");
  cudaError_t err;
  if (a.M == 1) err = launch_rows<1>(a, fast, stream);
  else if (a.M == 2) err = launch_rows<2>(a, fast, stream);
  else if (a.M <= 4) err = launch_rows<4>(a, fast, stream);
  else err = launch_rows<8>(a, fast, stream);
  PHOTON_CUDA_TRY(err);
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
