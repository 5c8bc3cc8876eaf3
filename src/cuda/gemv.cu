#include "cuda/common.cuh"
#include "cuda/gemv.cuh"

namespace photon::cuda {

namespace {

constexpr int kWarps = 8;
constexpr int kUnroll = 8;  // 16-byte weight loads in flight per lane

// Block of kWarps warps serving kWarps / KS output columns; the KS warps of a
// column split its K range (interleaved 16-byte chunks) and meet in shared
// memory. KS > 1 when N alone gives too few warps to keep DRAM busy.
template <int M, int KS, class Out>
__global__ void __launch_bounds__(kWarps * 32) gemv_kernel(GemvArgs a) {
  constexpr int kCols = kWarps / KS;
  __shared__ float partial[kWarps][M];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int col = warp / KS, slice = warp % KS;
  const int n = blockIdx.x * kCols + col;
  const int chunks = a.K / 8;
  float acc[M];
#pragma unroll
  for (int m = 0; m < M; ++m) acc[m] = 0.f;
  if (n < a.N) {
    const uint4* w = reinterpret_cast<const uint4*>(a.w + int64_t(n) * a.K);
    const uint4* x = reinterpret_cast<const uint4*>(a.x);
    auto accumulate = [&](const uint4& wv, int c) {
      float wf[8];
      unpack_bf16x8(wv, wf);
#pragma unroll
      for (int m = 0; m < M; ++m) {
        float xf[8];
        unpack_bf16x8(__ldg(x + int64_t(m) * chunks + c), xf);
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[m] += wf[e] * xf[e];
      }
    };
    constexpr int kStep = 32 * KS;
    int c = slice * 32 + lane;
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
  for (int m = 0; m < M; ++m) acc[m] = warp_sum(acc[m]);
  if constexpr (KS > 1) {
    if (lane == 0)
#pragma unroll
      for (int m = 0; m < M; ++m) partial[warp][m] = acc[m];
    __syncthreads();
    if (slice != 0) return;
#pragma unroll
    for (int m = 0; m < M; ++m)
      for (int k = 1; k < KS; ++k) acc[m] += partial[warp + k][m];
  }
  if (lane == 0 && n < a.N) {
    Out* out = static_cast<Out*>(a.out);
#pragma unroll
    for (int m = 0; m < M; ++m) {
      if constexpr (sizeof(Out) == 4) out[int64_t(m) * a.N + n] = acc[m];
      else out[int64_t(m) * a.N + n] = to_bf16(acc[m]);
    }
  }
}

template <int M, int KS>
void launch_mk(const GemvArgs& a, cudaStream_t stream) {
  const unsigned blocks = unsigned(ceil_div(a.N, kWarps / KS));
  if (a.out_f32) gemv_kernel<M, KS, float><<<blocks, kWarps * 32, 0, stream>>>(a);
  else gemv_kernel<M, KS, bf16><<<blocks, kWarps * 32, 0, stream>>>(a);
}

template <int M>
void launch_m(const GemvArgs& a, cudaStream_t stream) {
  // About 8192 warps in flight fill an H100/H200's DRAM pipe; split K until N * KS gets there.
  if (a.N >= 8192 || a.K < 2048) launch_mk<M, 1>(a, stream);
  else if (a.N >= 4096) launch_mk<M, 2>(a, stream);
  else if (a.N >= 2048) launch_mk<M, 4>(a, stream);
  else launch_mk<M, 8>(a, stream);
}

}  // namespace

bool gemv_applies(const GemvArgs& a) {
  return a.M >= 1 && a.M <= kGemvMaxRows && a.K > 0 && a.K % 8 == 0 && a.N > 0 && is_aligned(a.x, 16) &&
         is_aligned(a.w, 16);
}

Status launch_gemv(const GemvArgs& a, cudaStream_t stream) {
  if (!gemv_applies(a)) return bad_launch("gemv", "needs M = 1, K % 8 == 0 and 16-byte aligned x and w");
  static_assert(kGemvMaxRows == 1, "instantiate the kernel for every dispatched row count");
  launch_m<1>(a, stream);
  PHOTON_CUDA_CHECK_LAUNCH();
  return {};
}

}  // namespace photon::cuda
