#include "cuda/common.cuh"
#include "cuda/gemv_skinny.cuh"
#include "cuda/launch.cuh"
#include "cuda/mma.cuh"
#include "cuda/skinny_epilogue.cuh"

namespace photon::cuda {

namespace {

constexpr int kInFlight = 4;  // 32-k chunks per warp whose loads are in flight together (plain, add)

// Block of W warps: weight rows [16 b, 16 b + 16) (rows past N read row N - 1 and are never
// written), all of K; NT n-tiles of 8 activation rows. Lane (g, t) = (lane / 4, lane % 4).
// W = 16 (one block per SM, ~118 registers) when the grid fits one wave, else W = 8 (two per SM).
// silu: the block's 16 outputs have two weight rows each, gate row n and up row N + n; a chunk's
// activation fragments feed both products, and half as many chunks are in flight (the same weight
// bytes per lane as the other modes).
template <int NT, int W, class Out, GemvMode MODE>
__global__ void __launch_bounds__(W * 32, 16 / W) gemv_skinny_kernel(GemvArgs a) {
  const StepTraceScope step_trace_scope(step_trace_tag(kTraceGemvSkinny, unsigned(MODE), a.N, a.K));
  constexpr int kWarps = W;
  constexpr bool kAdd = MODE == GemvMode::add, kSilu = MODE == GemvMode::silu;
  constexpr int kMats = kSilu ? 2 : 1;                // weight matrices per output: gate and up
  constexpr int kIF = kSilu ? kInFlight / 2 : kInFlight;  // chunks in flight per warp
  __shared__ float partial[kWarps][kMats * NT * 4][32];  // each warp's C fragments
  const int warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31;
  const int g = lane >> 2, t = lane & 3;
  const int row0 = int(blockIdx.x) * 16;
  const int N = a.N, K = a.K, M = a.M;
  const bf16* w_lo[kMats];
  const bf16* w_hi[kMats];
#pragma unroll
  for (int r = 0; r < kMats; ++r) {
    w_lo[r] = a.w + (int64_t(r) * N + min(row0 + g, N - 1)) * K + 8 * t;
    w_hi[r] = a.w + (int64_t(r) * N + min(row0 + g + 8, N - 1)) * K + 8 * t;
  }
  const int chunks = (K + 31) / 32;

  const SkinnyOut<NT> e(row0, N, M);  // this thread's output element (skinny_epilogue.cuh)

  uint4 wa[kIF][kMats], wb[kIF][kMats], xv[kIF][NT];
  const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
  auto load_w = [&](int u, int c) {  // slot u <- 16 bytes of weight rows g and g + 8 of chunk c
    const bool in = c < chunks && 32 * c + 8 * t < K;  // K % 8 == 0: a lane's 8 k are all in or all out
#pragma unroll
    for (int r = 0; r < kMats; ++r) {
      wa[u][r] = in ? __ldcs(reinterpret_cast<const uint4*>(w_lo[r] + 32 * c)) : zero;
      wb[u][r] = in ? __ldcs(reinterpret_cast<const uint4*>(w_hi[r] + 32 * c)) : zero;
    }
  };
  // The first round's weights do not depend on earlier kernels: in flight before pdl_wait(), while
  // the kernel before finishes (measured: Llama-3.2-1B B = 16 1.112 -> 1.076 ms/step).
#pragma unroll
  for (int u = 0; u < kIF; ++u) load_w(u, warp + u * kWarps);
  pdl_wait();
  pdl_launch_dependents();
  // add: the value this element adds to, loaded now so its latency hides under the weight stream.
  float res = 0.f;
  if constexpr (kAdd) {
    res = e.residual(a.out);
  }

  const bf16* x_row[NT];
  bool x_live[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int m = nt * 8 + g;
    x_live[nt] = m < M;
    x_row[nt] = a.x + int64_t(x_live[nt] ? m : 0) * K + 8 * t;
  }
  float acc[kMats][NT][4];
#pragma unroll
  for (int r = 0; r < kMats; ++r)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) acc[r][nt][0] = acc[r][nt][1] = acc[r][nt][2] = acc[r][nt][3] = 0.f;

  // Slot u <- chunk c: 16 bytes of the activation rows (zeros past K), and of the weights.
  auto load_x = [&](int u, int c) {
    const bool in = c < chunks && 32 * c + 8 * t < K;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
      xv[u][nt] = in && x_live[nt] ? __ldg(reinterpret_cast<const uint4*>(x_row[nt] + 32 * c)) : zero;
  };
  auto load = [&](int u, int c) {
    load_w(u, c);
    load_x(u, c);
  };
  auto mma_slot = [&](int u) {
#pragma unroll
    for (int r = 0; r < kMats; ++r) {
      // Physical k 8t..8t+3 in the logical slots {2t, 2t+1, 2t+8, 2t+9} of the first MMA, 8t+4..8t+7 of the second.
      const uint32_t a1[4] = {wa[u][r].x, wb[u][r].x, wa[u][r].y, wb[u][r].y};
      const uint32_t a2[4] = {wa[u][r].z, wb[u][r].z, wa[u][r].w, wb[u][r].w};
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        mma_bf16_16816(acc[r][nt], a1, xv[u][nt].x, xv[u][nt].y);
        mma_bf16_16816(acc[r][nt], a2, xv[u][nt].z, xv[u][nt].w);
      }
    }
  };
  // Rolling: each slot is refilled with its next chunk as soon as its MMAs are issued, so
  // kIF chunks stay in flight per warp all along (not only at the start of a round).
#pragma unroll
  for (int u = 0; u < kIF; ++u) load_x(u, warp + u * kWarps);
  for (int c0 = warp; c0 < chunks; c0 += kWarps * kIF) {
#pragma unroll
    for (int u = 0; u < kIF; ++u) {
      mma_slot(u);
      load(u, c0 + (u + kIF) * kWarps);
    }
  }

  skinny_store<kMats, NT, kWarps, kSilu, kAdd, Out>(partial, acc, e, res, a.out);
}

template <int NT, int W>
cudaError_t launch_ntw(const GemvArgs& a, cudaStream_t stream) {
  const dim3 grid(unsigned(ceil_div(a.N, 16))), block(unsigned(W * 32));
  if (a.out_f32) return launch_kernel(gemv_skinny_kernel<NT, W, float, GemvMode::plain>, grid, block, 0, stream, a);
  switch (a.mode) {
    case GemvMode::add: return launch_kernel(gemv_skinny_kernel<NT, W, bf16, GemvMode::add>, grid, block, 0, stream, a);
    case GemvMode::silu:
      return launch_kernel(gemv_skinny_kernel<NT, W, bf16, GemvMode::silu>, grid, block, 0, stream, a);
    default: return launch_kernel(gemv_skinny_kernel<NT, W, bf16, GemvMode::plain>, grid, block, 0, stream, a);
  }
}

template <int NT>
cudaError_t launch_nt(const GemvArgs& a, int32_t num_sms, cudaStream_t stream) {
  return ceil_div(a.N, 16) <= num_sms ? launch_ntw<NT, 16>(a, stream) : launch_ntw<NT, 8>(a, stream);
}

}  // namespace

PHOTON_STEP_TRACE_UNIT(gemv_skinny)
PHOTON_PRELOAD_UNIT(gemv_skinny, gemv_skinny_kernel<1, 8, bf16, GemvMode::plain>)

bool gemv_skinny_applies(const GemvArgs& a) {
  return a.M >= kGemvSkinnyMinRows && a.M <= kGemvSkinnyMaxRows && a.K > 0 && a.K % 8 == 0 && a.N > 0 &&
         is_aligned(a.x, 16) && is_aligned(a.w, 16) &&
         (a.mode == GemvMode::plain || !a.out_f32);
}

Status launch_gemv_skinny(const GemvArgs& a, int32_t num_sms, cudaStream_t stream) {
  if (!gemv_skinny_applies(a))
    return bad_launch("gemv_skinny", "needs 1 <= M <= 16, K % 8 == 0, 16-byte aligned x and w, a bf16 out in add and silu modes");
  if (num_sms <= 0) return bad_launch("gemv_skinny", "num_sms must be positive");
  PHOTON_CUDA_TRY(a.M <= 8 ? launch_nt<1>(a, num_sms, stream) : launch_nt<2>(a, num_sms, stream));
  return {};
}

}  // namespace photon::cuda
