#include "cuda/common.cuh"
#include "cuda/gemv.cuh"
#include "cuda/launch.cuh"

namespace photon::cuda {

namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kUnroll = 8;  // 16-byte weight loads in flight per lane

// The 8 norm weights of chunk c as floats.
__device__ __forceinline__ void load_norm8(const GemvArgs& a, int c, float (&g)[8]) {
  if (a.norm_f32) {
    const float4* p = reinterpret_cast<const float4*>(a.norm_w) + 2 * int64_t(c);
    const float4 lo = __ldg(p), hi = __ldg(p + 1);
    g[0] = lo.x, g[1] = lo.y, g[2] = lo.z, g[3] = lo.w, g[4] = hi.x, g[5] = hi.y, g[6] = hi.z, g[7] = hi.w;
  } else {
    unpack_bf16x8(__ldg(reinterpret_cast<const uint4*>(a.norm_w) + c), g);
  }
}

// Block of kWarps warps serving kWarps / KS output columns; the KS warps of a
// column split its K range (interleaved 16-byte chunks) and meet in shared
// memory. KS > 1 when N alone gives too few warps to keep DRAM busy.
// Everything is read after pdl_wait(): starting the weight stream before it
// (weights are never written by kernels) measured slower through L2 prefetch
// and no faster through shared-memory copies (docs/performance.md).
template <int M, int KS, class Out, GemvMode MODE>
__device__ __forceinline__ void gemv_body(const GemvArgs& a) {
  constexpr int kCols = kWarps / KS;
  constexpr int kStep = 32 * KS;
  constexpr bool kNorm = MODE == GemvMode::rmsnorm;
  constexpr int kSums = kNorm ? 2 * M : M;  // dot products, then (rmsnorm) sums of squares of x
  __shared__ float partial[kWarps][kSums];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int col = warp / KS, slice = warp % KS;
  const int n = blockIdx.x * kCols + col;
  const bool active = n < a.N;
  const int chunks = a.K / 8;
  const uint4* w = reinterpret_cast<const uint4*>(a.w + int64_t(active ? n : 0) * a.K);
  const int c0 = slice * 32 + lane;

  pdl_wait();
  pdl_launch_dependents();

  const uint4* x = reinterpret_cast<const uint4*>(a.x);
  float acc[kSums];
#pragma unroll
  for (int m = 0; m < kSums; ++m) acc[m] = 0.f;
  if (active) {
    auto accumulate = [&](const uint4& wv, int c) {
      float wf[8];
      unpack_bf16x8(wv, wf);
      float g[8];
      if constexpr (kNorm) load_norm8(a, c, g);
#pragma unroll
      for (int m = 0; m < M; ++m) {
        float xf[8];
        unpack_bf16x8(__ldg(x + int64_t(m) * chunks + c), xf);
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          if constexpr (kNorm) {
            acc[M + m] += xf[e] * xf[e];
            acc[m] += wf[e] * (xf[e] * g[e]);
          } else {
            acc[m] += wf[e] * xf[e];
          }
        }
      }
    };
    int c = c0;
    for (; c + kStep * (kUnroll - 1) < chunks; c += kStep * kUnroll) {
      uint4 wv[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) wv[u] = __ldcs(w + c + kStep * u);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) accumulate(wv[u], c + kStep * u);
    }
#pragma unroll 4
    for (; c < chunks; c += kStep) accumulate(__ldcs(w + c), c);
  }
#pragma unroll
  for (int m = 0; m < kSums; ++m) acc[m] = warp_sum(acc[m]);
  if constexpr (KS > 1) {
    if (lane == 0)
#pragma unroll
      for (int m = 0; m < kSums; ++m) partial[warp][m] = acc[m];
    __syncthreads();
    if (slice != 0) return;
#pragma unroll
    for (int m = 0; m < kSums; ++m)
      for (int k = 1; k < KS; ++k) acc[m] += partial[warp + k][m];
  }
  if (lane == 0 && active) {
    Out* out = static_cast<Out*>(a.out);
#pragma unroll
    for (int m = 0; m < M; ++m) {
      float v = acc[m];
      if constexpr (kNorm) v *= rsqrtf(acc[M + m] / float(a.K) + a.eps);
      Out& o = out[int64_t(m) * a.N + n];
      if constexpr (MODE == GemvMode::add) v += to_f32(o);
      if constexpr (sizeof(Out) == 4) o = v;
      else o = to_bf16(v);
    }
  }
}

// plain and add: 35-36 registers unbounded (a minimum-blocks bound makes ptxas spill or spend more).
template <int M, int KS, class Out, GemvMode MODE>
__global__ void __launch_bounds__(kThreads) gemv_kernel(GemvArgs a) {
  gemv_body<M, KS, Out, MODE>(a);
}

// rmsnorm: held to 40 registers, 6 blocks per SM (unbounded it takes 44: 5 blocks).
template <int M, int KS, class Out>
__global__ void __launch_bounds__(kThreads, 6) gemv_rmsnorm_kernel(GemvArgs a) {
  gemv_body<M, KS, Out, GemvMode::rmsnorm>(a);
}

template <int M, int KS>
cudaError_t launch_mk(const GemvArgs& a, cudaStream_t stream) {
  const dim3 blocks(unsigned(ceil_div(a.N, kWarps / KS)));
  switch (a.mode) {
    case GemvMode::add:
      return launch_kernel(gemv_kernel<M, KS, bf16, GemvMode::add>, blocks, dim3(kThreads), 0, stream, a);
    case GemvMode::rmsnorm:
      return launch_kernel(a.out_f32 ? gemv_rmsnorm_kernel<M, KS, float> : gemv_rmsnorm_kernel<M, KS, bf16>,
                           blocks, dim3(kThreads), 0, stream, a);
    case GemvMode::plain: break;
  }
  return launch_kernel(a.out_f32 ? gemv_kernel<M, KS, float, GemvMode::plain> : gemv_kernel<M, KS, bf16, GemvMode::plain>,
                       blocks, dim3(kThreads), 0, stream, a);
}

template <int M>
cudaError_t launch_m(const GemvArgs& a, cudaStream_t stream) {
  // About 8192 warps in flight fill an H100/H200's DRAM pipe; split K until N * KS gets there.
  if (a.N >= 8192 || a.K < 2048) return launch_mk<M, 1>(a, stream);
  if (a.N >= 4096) return launch_mk<M, 2>(a, stream);
  if (a.N >= 2048) return launch_mk<M, 4>(a, stream);
  return launch_mk<M, 8>(a, stream);
}

}  // namespace

bool gemv_applies(const GemvArgs& a) {
  if (!(a.M >= 1 && a.M <= kGemvMaxRows && a.K > 0 && a.K % 8 == 0 && a.N > 0 && is_aligned(a.x, 16) &&
        is_aligned(a.w, 16)))
    return false;
  switch (a.mode) {
    case GemvMode::plain: return true;
    case GemvMode::add: return !a.out_f32;
    case GemvMode::rmsnorm: return a.norm_w != nullptr && is_aligned(a.norm_w, a.norm_f32 ? 32 : 16);
  }
  return false;
}

Status launch_gemv(const GemvArgs& a, cudaStream_t stream) {
  if (!gemv_applies(a))
    return bad_launch("gemv", "needs M = 1, K % 8 == 0, 16-byte aligned x and w, a bf16 output to add into, and a "
                              "16-byte (bf16) or 32-byte (f32) aligned norm weight for rmsnorm");
  static_assert(kGemvMaxRows == 1, "instantiate the kernel for every dispatched row count");
  PHOTON_CUDA_TRY(launch_m<1>(a, stream));
  return {};
}

}  // namespace photon::cuda
