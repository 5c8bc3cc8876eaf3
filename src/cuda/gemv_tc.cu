#include "cuda/common.cuh"
#include "cuda/gemv_tc.cuh"
#include "cuda/launch.cuh"
#include "cuda/mma.cuh"

namespace photon::cuda {

namespace {

constexpr int kWarps = 8;
constexpr int kUnroll = 4;  // 32-k chunks in flight per lane: 2 x 16-byte weight loads each
constexpr int kTargetWarps = 2048;  // warps that keep an H100/H200's DRAM pipe full at 4 KB in flight each

// A block of kWarps warps serves kWarps / KS groups of 16 weight rows; the KS
// warps of a group split its 32-k chunks (interleaved) and meet in shared memory.
// NT n-tiles of 8 activation rows.
template <int NT, int KS, class Out>
__global__ void __launch_bounds__(kWarps * 32) gemv_tc_kernel(GemvArgs a) {
  constexpr int kGroups = kWarps / KS;
  __shared__ float partial[KS > 1 ? kWarps : 1][32][4 * NT];
  const int warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31;
  const int group = warp / KS, slice = warp % KS;
  const int g = lane >> 2, t = lane & 3;
  const int row0 = (int(blockIdx.x) * kGroups + group) * 16;
  // Rows past N read row N - 1 (valid memory) and are never written.
  const int ra = min(row0 + g, a.N - 1), rb = min(row0 + g + 8, a.N - 1);
  const bf16* wa = a.w + int64_t(ra) * a.K + 8 * t;
  const bf16* wb = a.w + int64_t(rb) * a.K + 8 * t;
  const int chunks = (a.K + 31) / 32;

  float acc[NT][4];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;

  // This lane's 8 k of chunk c from both of its rows (zeros past K: never read out of bounds).
  auto load_w = [&](int c, uint4& va, uint4& vb) {
    if (32 * c + 8 * t < a.K) {
      va = __ldcs(reinterpret_cast<const uint4*>(wa + 32 * c));
      vb = __ldcs(reinterpret_cast<const uint4*>(wb + 32 * c));
    } else {
      va = vb = make_uint4(0u, 0u, 0u, 0u);
    }
  };
  // Two MMAs per n-tile: physical k 8t..8t+3 in the logical slots of k {2t, 2t+1, 2t+8, 2t+9}, then 8t+4..8t+7.
  auto mma_chunk = [&](const uint4& va, const uint4& vb, int c) {
    const uint32_t a1[4] = {va.x, vb.x, va.y, vb.y};
    const uint32_t a2[4] = {va.z, vb.z, va.w, vb.w};
    const int k = 32 * c + 8 * t;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const int n = nt * 8 + g;
      uint4 xv = make_uint4(0u, 0u, 0u, 0u);
      if (n < a.M && k < a.K) xv = __ldg(reinterpret_cast<const uint4*>(a.x + int64_t(n) * a.K + k));
      mma_bf16_16816(acc[nt], a1, xv.x, xv.y);
      mma_bf16_16816(acc[nt], a2, xv.z, xv.w);
    }
  };

  // The first weight loads go out before waiting for the kernel that writes x.
  bool waited = false;
  int c = slice;
  for (; c + KS * (kUnroll - 1) < chunks; c += KS * kUnroll) {
    uint4 va[kUnroll], vb[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) load_w(c + KS * u, va[u], vb[u]);
    if (!waited) {
      pdl_wait();
      pdl_launch_dependents();
      waited = true;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) mma_chunk(va[u], vb[u], c + KS * u);
  }
  if (!waited) {
    pdl_wait();
    pdl_launch_dependents();
  }
  for (; c < chunks; c += KS) {
    uint4 va, vb;
    load_w(c, va, vb);
    mma_chunk(va, vb, c);
  }

  if constexpr (KS > 1) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) partial[warp][lane][nt * 4 + i] = acc[nt][i];
    __syncthreads();
    if (slice != 0) return;
#pragma unroll
    for (int s = 1; s < KS; ++s)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[nt][i] += partial[warp + s][lane][nt * 4 + i];
  }

  // C fragment: acc[nt][i] is weight row g (+8 for i >= 2), activation row nt*8 + 2t (+1 for odd i).
  Out* out = static_cast<Out*>(a.out);
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = row0 + g + (i >= 2 ? 8 : 0), n = nt * 8 + 2 * t + (i & 1);
      if (row >= a.N || n >= a.M) continue;
      if constexpr (sizeof(Out) == 4) out[int64_t(n) * a.N + row] = acc[nt][i];
      else out[int64_t(n) * a.N + row] = to_bf16(acc[nt][i]);
    }
}

template <int NT, int KS>
cudaError_t launch_ks(const GemvArgs& a, cudaStream_t stream) {
  const int groups = ceil_div(a.N, 16);
  const dim3 grid(unsigned(ceil_div(groups, kWarps / KS)));
  if (a.out_f32) return launch_kernel(gemv_tc_kernel<NT, KS, float>, grid, dim3(kWarps * 32), 0, stream, a);
  return launch_kernel(gemv_tc_kernel<NT, KS, bf16>, grid, dim3(kWarps * 32), 0, stream, a);
}

template <int NT>
cudaError_t launch_nt(const GemvArgs& a, cudaStream_t stream) {
  // Split K until the row groups give about kTargetWarps warps, keeping every
  // slice at least one chunk.
  const int groups = ceil_div(a.N, 16), chunks = ceil_div(a.K, 32);
  int ks = 1;
  while (ks < kWarps && groups * ks < kTargetWarps && 2 * ks <= chunks) ks *= 2;
  switch (ks) {
    case 1: return launch_ks<NT, 1>(a, stream);
    case 2: return launch_ks<NT, 2>(a, stream);
    case 4: return launch_ks<NT, 4>(a, stream);
    default: return launch_ks<NT, 8>(a, stream);
  }
}

}  // namespace

bool gemv_tc_applies(const GemvArgs& a) {
  return a.M >= kGemvTcMinRows && a.M <= kGemvTcMaxRows && a.K > 0 && a.K % 8 == 0 && a.N > 0 &&
         is_aligned(a.x, 16) && is_aligned(a.w, 16);
}

Status launch_gemv_tc(const GemvArgs& a, cudaStream_t stream) {
  if (!gemv_tc_applies(a))
    return bad_launch("gemv_tc", "needs 2 <= M <= 32, K % 8 == 0, N > 0 and 16-byte aligned x and w");
  static_assert(kGemvTcMaxRows == 32, "instantiate an n-tile count for every dispatched row count");
  cudaError_t err;
  if (a.M <= 8) err = launch_nt<1>(a, stream);
  else if (a.M <= 16) err = launch_nt<2>(a, stream);
  else err = launch_nt<4>(a, stream);
  PHOTON_CUDA_TRY(err);
  return {};
}

}  // namespace photon::cuda
