#include "cuda/common.cuh"
#include "cuda/gemv_skinny.cuh"
#include "cuda/launch.cuh"
#include "cuda/mma.cuh"

namespace photon::cuda {

namespace {

constexpr int kInFlight = 4;  // 32-k chunks per warp whose loads are in flight together

// Block of W warps: weight rows [16 b, 16 b + 16) (rows past N read row N - 1 and are never
// written), all of K; NT n-tiles of 8 activation rows. Lane (g, t) = (lane / 4, lane % 4).
// W = 16 (one block per SM, ~118 registers) when the grid fits one wave, else W = 8 (two per SM).
template <int NT, int W, class Out, bool ADD>
__global__ void __launch_bounds__(W * 32, 16 / W) gemv_skinny_kernel(GemvArgs a) {
  constexpr int kWarps = W;
  __shared__ float partial[kWarps][NT * 4][32];  // each warp's C fragments
  const int warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31;
  const int g = lane >> 2, t = lane & 3;
  const int row0 = int(blockIdx.x) * 16;
  const int N = a.N, K = a.K, M = a.M;
  const bf16* w_lo = a.w + int64_t(min(row0 + g, N - 1)) * K + 8 * t;
  const bf16* w_hi = a.w + int64_t(min(row0 + g + 8, N - 1)) * K + 8 * t;
  const int chunks = (K + 31) / 32;

  // The epilogue's element of this thread (threads < NT * 128): C fragment entry i of lane ln.
  const int e_idx = int(threadIdx.x) / 32, e_ln = int(threadIdx.x) % 32;
  const int e_nt = e_idx / 4, e_i = e_idx % 4;
  const int e_row = row0 + (e_ln >> 2) + (e_i >= 2 ? 8 : 0), e_m = e_nt * 8 + 2 * (e_ln & 3) + (e_i & 1);
  const bool e_live = int(threadIdx.x) < NT * 128 && e_row < N && e_m < M;
  const int64_t e_out = int64_t(e_m) * N + e_row;

  uint4 wa[kInFlight], wb[kInFlight], xv[kInFlight][NT];
  const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
  auto load_w = [&](int u, int c) {  // slot u <- 16 bytes of weight rows g and g + 8 of chunk c
    const bool in = c < chunks && 32 * c + 8 * t < K;  // K % 8 == 0: a lane's 8 k are all in or all out
    wa[u] = in ? __ldcs(reinterpret_cast<const uint4*>(w_lo + 32 * c)) : zero;
    wb[u] = in ? __ldcs(reinterpret_cast<const uint4*>(w_hi + 32 * c)) : zero;
  };
  // The first round's weights do not depend on earlier kernels: in flight before pdl_wait(), while
  // the kernel before finishes (measured: Llama-3.2-1B B = 16 1.112 -> 1.076 ms/step).
#pragma unroll
  for (int u = 0; u < kInFlight; ++u) load_w(u, warp + u * kWarps);
  pdl_wait();
  pdl_launch_dependents();
  // add: the value this element adds to, loaded now so its latency hides under the weight stream.
  float res = 0.f;
  if constexpr (ADD) {
    if (e_live) res = to_f32(static_cast<const bf16*>(a.out)[e_out]);
  }

  const bf16* x_row[NT];
  bool x_live[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int m = nt * 8 + g;
    x_live[nt] = m < M;
    x_row[nt] = a.x + int64_t(x_live[nt] ? m : 0) * K + 8 * t;
  }
  float acc[NT][4];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;

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
    // Physical k 8t..8t+3 in the logical slots {2t, 2t+1, 2t+8, 2t+9} of the first MMA, 8t+4..8t+7 of the second.
    const uint32_t a1[4] = {wa[u].x, wb[u].x, wa[u].y, wb[u].y};
    const uint32_t a2[4] = {wa[u].z, wb[u].z, wa[u].w, wb[u].w};
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      mma_bf16_16816(acc[nt], a1, xv[u][nt].x, xv[u][nt].y);
      mma_bf16_16816(acc[nt], a2, xv[u][nt].z, xv[u][nt].w);
    }
  };
  // Rolling: each slot is refilled with its next chunk as soon as its MMAs are issued, so
  // kInFlight chunks stay in flight per warp all along (not only at the start of a round).
#pragma unroll
  for (int u = 0; u < kInFlight; ++u) load_x(u, warp + u * kWarps);
  for (int c0 = warp; c0 < chunks; c0 += kWarps * kInFlight) {
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      mma_slot(u);
      load(u, c0 + (u + kInFlight) * kWarps);
    }
  }

#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i) partial[warp][nt * 4 + i][lane] = acc[nt][i];
  __syncthreads();
  if (!e_live) return;
  // C fragment entry i of lane ln: weight row g (+8 for i >= 2), activation row nt * 8 + 2t (+1 for odd i).
  float v = 0.f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) v += partial[w][e_idx][e_ln];
  Out* out = static_cast<Out*>(a.out);
  if constexpr (sizeof(Out) == 4) out[e_out] = v;
  else out[e_out] = to_bf16(ADD ? res + v : v);
}

template <int NT, int W>
cudaError_t launch_ntw(const GemvArgs& a, cudaStream_t stream) {
  const dim3 grid(unsigned(ceil_div(a.N, 16))), block(unsigned(W * 32));
  if (a.out_f32) return launch_kernel(gemv_skinny_kernel<NT, W, float, false>, grid, block, 0, stream, a);
  if (a.mode == GemvMode::add)
    return launch_kernel(gemv_skinny_kernel<NT, W, bf16, true>, grid, block, 0, stream, a);
  return launch_kernel(gemv_skinny_kernel<NT, W, bf16, false>, grid, block, 0, stream, a);
}

template <int NT>
cudaError_t launch_nt(const GemvArgs& a, int32_t num_sms, cudaStream_t stream) {
  return ceil_div(a.N, 16) <= num_sms ? launch_ntw<NT, 16>(a, stream) : launch_ntw<NT, 8>(a, stream);
}

}  // namespace

bool gemv_skinny_applies(const GemvArgs& a) {
  return a.M >= kGemvSkinnyMinRows && a.M <= kGemvSkinnyMaxRows && a.K > 0 && a.K % 8 == 0 && a.N > 0 &&
         is_aligned(a.x, 16) && is_aligned(a.w, 16) &&
         (a.mode == GemvMode::plain || (a.mode == GemvMode::add && !a.out_f32));
}

Status launch_gemv_skinny(const GemvArgs& a, int32_t num_sms, cudaStream_t stream) {
  if (!gemv_skinny_applies(a))
    return bad_launch("gemv_skinny", "needs 2 <= M <= 16, K % 8 == 0, 16-byte aligned x and w, plain or bf16 add mode");
  if (num_sms <= 0) return bad_launch("gemv_skinny", "num_sms must be positive");
  PHOTON_CUDA_TRY(a.M <= 8 ? launch_nt<1>(a, num_sms, stream) : launch_nt<2>(a, num_sms, stream));
  return {};
}

}  // namespace photon::cuda
