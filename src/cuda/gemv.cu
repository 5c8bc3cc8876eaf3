#include "cuda/common.cuh"
#include "cuda/gemv.cuh"
#include "cuda/launch.cuh"

namespace photon::cuda {

namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kUnroll = 8;  // 16-byte weight loads in flight per lane

// Block of kWarps warps serving kWarps / KS output columns; the KS warps of a
// column split its K range (interleaved 16-byte chunks) and meet in shared
// memory. KS > 1 when N alone gives too few warps to keep DRAM busy.
// silu: a column's warps stream its gate row, then its up row (2K weights per
// column), and finish the output in registers.
// early_weights: each lane's first round of weight loads (kUnroll chunks of its
// column's first row) is issued before pdl_wait() into the registers the loop
// uses anyway; otherwise everything is read after pdl_wait(). Earlier attempts
// at starting the weight stream early measured slower through extra registers
// (fused prologues) and L2 prefetches, and no faster through shared-memory
// copies (docs/performance.md rows 16, 18, 21 and 26; row 51 for this one).
template <int M, int KS, class Out, GemvMode MODE, bool EARLY>
__global__ void __launch_bounds__(kThreads) gemv_kernel(GemvArgs a) {
  constexpr int kCols = kWarps / KS;
  constexpr int kStep = 32 * KS;
  constexpr bool kSilu = MODE == GemvMode::silu;
  constexpr int kRows = kSilu ? 2 : 1;  // weight rows per column: silu streams the gate row, then the up row
  __shared__ float partial[kWarps][kRows * M];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int col = warp / KS, slice = warp % KS;
  const int n = blockIdx.x * kCols + col;
  const bool active = n < a.N;
  const int chunks = a.K / 8;
  const uint4* w = reinterpret_cast<const uint4*>(a.w + int64_t(active ? n : 0) * a.K);
  const int c0 = slice * 32 + lane;

  // The round's weights; with `early` the first full round of row 0 (the gate row in silu mode) is
  // loaded before pdl_wait() and in flight across it.
  const bool early = EARLY && active && c0 + kStep * (kUnroll - 1) < chunks;
  uint4 first[kUnroll];
  if (early) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) first[u] = __ldcs(w + c0 + kStep * u);
  }

  pdl_wait();
  pdl_launch_dependents();

  // add: the residual value this column adds to, loaded now so its latency hides under the weight
  // stream (only this column's epilogue writes it).
  Out* out = static_cast<Out*>(a.out);
  float res[M];
#pragma unroll
  for (int m = 0; m < M; ++m)
    res[m] = MODE == GemvMode::add && active && lane == 0 && slice == 0 ? to_f32(out[int64_t(m) * a.N + n]) : 0.f;

  const uint4* x = reinterpret_cast<const uint4*>(a.x);
  float acc[kRows * M];  // [row r][m]: r = 0 the column's (gate) row, r = 1 its up row
#pragma unroll
  for (int i = 0; i < kRows * M; ++i) acc[i] = 0.f;
  if (active) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const uint4* wr = w + int64_t(r) * a.N * chunks;  // silu: up row n is row N + n
      auto accumulate = [&](const uint4& wv, int c) {
        float wf[8];
        unpack_bf16x8(wv, wf);
#pragma unroll
        for (int m = 0; m < M; ++m) {
          float xf[8];
          unpack_bf16x8(__ldg(x + int64_t(m) * chunks + c), xf);
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[r * M + m] += wf[e] * xf[e];
        }
      };
      int c = c0;
      if constexpr (EARLY) {
        bool loaded = r == 0 && early;  // this round's weights are in `first` already
#pragma unroll 1
        for (; c + kStep * (kUnroll - 1) < chunks; c += kStep * kUnroll) {
          if (!loaded) {
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) first[u] = __ldcs(wr + c + kStep * u);
          }
          loaded = false;
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) accumulate(first[u], c + kStep * u);
        }
      } else {
        for (; c + kStep * (kUnroll - 1) < chunks; c += kStep * kUnroll) {
          uint4 wv[kUnroll];
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) wv[u] = __ldcs(wr + c + kStep * u);
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) accumulate(wv[u], c + kStep * u);
        }
      }
#pragma unroll 4
      for (; c < chunks; c += kStep) accumulate(__ldcs(wr + c), c);
    }
  }
#pragma unroll
  for (int i = 0; i < kRows * M; ++i) acc[i] = warp_sum(acc[i]);
  if constexpr (KS > 1) {
    if (lane == 0)
#pragma unroll
      for (int i = 0; i < kRows * M; ++i) partial[warp][i] = acc[i];
    __syncthreads();
    if (slice != 0) return;
#pragma unroll
    for (int i = 0; i < kRows * M; ++i)
      for (int k = 1; k < KS; ++k) acc[i] += partial[warp + k][i];
  }
  if (lane == 0 && active) {
#pragma unroll
    for (int m = 0; m < M; ++m) {
      float v = acc[m];
      if constexpr (MODE == GemvMode::add) v += res[m];
      // silu: gate and up rounded to bf16 first, as the plain product would store them.
      if constexpr (kSilu) v = silu_times(to_f32(to_bf16(acc[m])), to_f32(to_bf16(acc[M + m])));
      if constexpr (sizeof(Out) == 4) out[int64_t(m) * a.N + n] = v;
      else out[int64_t(m) * a.N + n] = to_bf16(v);
    }
  }
}

template <int M, int KS, bool EARLY>
cudaError_t launch_mke(const GemvArgs& a, cudaStream_t stream) {
  const dim3 blocks(unsigned(ceil_div(a.N, kWarps / KS)));
  switch (a.mode) {
    case GemvMode::add:
      return launch_kernel(gemv_kernel<M, KS, bf16, GemvMode::add, EARLY>, blocks, dim3(kThreads), 0, stream, a);
    case GemvMode::silu:
      return launch_kernel(gemv_kernel<M, KS, bf16, GemvMode::silu, EARLY>, blocks, dim3(kThreads), 0, stream, a);
    case GemvMode::plain: break;
  }
  return launch_kernel(a.out_f32 ? gemv_kernel<M, KS, float, GemvMode::plain, EARLY>
                                 : gemv_kernel<M, KS, bf16, GemvMode::plain, EARLY>,
                       blocks, dim3(kThreads), 0, stream, a);
}

// The early-weights variant holds a round across pdl_wait() in 64 registers (4 blocks per SM)
// against the plain variant's 36 (7 blocks per SM): a separate instantiation.
template <int M, int KS>
cudaError_t launch_mk(const GemvArgs& a, cudaStream_t stream) {
  return a.early_weights ? launch_mke<M, KS, true>(a, stream) : launch_mke<M, KS, false>(a, stream);
}

template <int M>
cudaError_t launch_m(const GemvArgs& a, cudaStream_t stream) {
  // About 8192 warps in flight fill an H100/H200's DRAM pipe; split K until N * KS gets there.
  int ks = a.N >= 8192 || a.K < 2048 ? 1 : a.N >= 4096 ? 2 : a.N >= 2048 ? 4 : 8;
  if (a.early_weights && a.early_half_ks && ks > 1) ks /= 2;
  switch (ks) {
    case 1: return launch_mk<M, 1>(a, stream);
    case 2: return launch_mk<M, 2>(a, stream);
    case 4: return launch_mk<M, 4>(a, stream);
    default: return launch_mk<M, 8>(a, stream);
  }
}

}  // namespace

bool gemv_applies(const GemvArgs& a) {
  if (!(a.M >= 1 && a.M <= kGemvMaxRows && a.K > 0 && a.K % 8 == 0 && a.N > 0 && is_aligned(a.x, 16) &&
        is_aligned(a.w, 16)))
    return false;
  switch (a.mode) {
    case GemvMode::plain: return true;
    case GemvMode::add:
    case GemvMode::silu: return !a.out_f32;
  }
  return false;
}

Status launch_gemv(const GemvArgs& a, cudaStream_t stream) {
  if (!gemv_applies(a))
    return bad_launch("gemv", "needs M = 1, K % 8 == 0, 16-byte aligned x and w, and a bf16 output to add into or "
                              "apply SwiGLU to");
  static_assert(kGemvMaxRows == 1, "instantiate the kernel for every dispatched row count");
  PHOTON_CUDA_TRY(launch_m<1>(a, stream));
  return {};
}

}  // namespace photon::cuda
