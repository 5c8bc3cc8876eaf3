#include "cuda/common.cuh"
#include "cuda/gemv_tc.cuh"
#include "cuda/launch.cuh"
#include "cuda/mma.cuh"

namespace photon::cuda {

namespace {

constexpr int kWarps = 8;
constexpr int kLoads = 8;           // 16-byte weight loads in flight per lane
constexpr int kTargetWarps = 2048;  // warps that keep an H100/H200's DRAM pipe full at 4 KB in flight each

// A block of kWarps warps serves kWarps / KS warp tiles of R * 16 weight rows;
// the KS warps of a tile split its 32-k chunks (interleaved) and meet in
// shared memory. The R 16-row groups of a warp share each x fragment (x is
// read once per R * 16 rows). NT n-tiles of 8 activation rows.
template <int R, int NT, int KS, class Out>
__global__ void __launch_bounds__(kWarps * 32) gemv_tc_kernel(GemvArgs a) {
  constexpr int kTiles = kWarps / KS;
  constexpr int kUnroll = kLoads / (2 * R);  // chunks in flight
  static_assert(kUnroll >= 1, "R too large for the load budget");
  __shared__ float partial[KS > 1 ? kWarps : 1][32][4 * NT * R];
  const int warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31;
  const int tile = warp / KS, slice = warp % KS;
  const int g = lane >> 2, t = lane & 3;
  const int row0 = (int(blockIdx.x) * kTiles + tile) * 16 * R;
  // Rows past N read row N - 1 (valid memory) and are never written.
  const bf16* w[R][2];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int h = 0; h < 2; ++h) w[r][h] = a.w + int64_t(min(row0 + 16 * r + 8 * h + g, a.N - 1)) * a.K + 8 * t;
  const int chunks = (a.K + 31) / 32;

  float acc[R][NT][4];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) acc[r][nt][0] = acc[r][nt][1] = acc[r][nt][2] = acc[r][nt][3] = 0.f;

  // This lane's 8 k of chunk c from each of its 2R rows (zeros past K: never read out of bounds).
  auto load_w = [&](int c, uint4 (&v)[R][2]) {
    const bool in = 32 * c + 8 * t < a.K;
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        v[r][h] = in ? __ldcs(reinterpret_cast<const uint4*>(w[r][h] + 32 * c)) : make_uint4(0u, 0u, 0u, 0u);
  };
  // Two MMAs per (group, n-tile): physical k 8t..8t+3 in the logical slots of
  // k {2t, 2t+1, 2t+8, 2t+9}, then 8t+4..8t+7.
  auto mma_chunk = [&](const uint4 (&v)[R][2], int c) {
    const int k = 32 * c + 8 * t;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const int n = nt * 8 + g;
      uint4 xv = make_uint4(0u, 0u, 0u, 0u);
      if (n < a.M && k < a.K) xv = __ldg(reinterpret_cast<const uint4*>(a.x + int64_t(n) * a.K + k));
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const uint32_t a1[4] = {v[r][0].x, v[r][1].x, v[r][0].y, v[r][1].y};
        const uint32_t a2[4] = {v[r][0].z, v[r][1].z, v[r][0].w, v[r][1].w};
        mma_bf16_16816(acc[r][nt], a1, xv.x, xv.y);
        mma_bf16_16816(acc[r][nt], a2, xv.z, xv.w);
      }
    }
  };

  // The first weight loads go out before waiting for the kernel that writes x.
  bool waited = false;
  int c = slice;
  for (; c + KS * (kUnroll - 1) < chunks; c += KS * kUnroll) {
    uint4 v[kUnroll][R][2];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) load_w(c + KS * u, v[u]);
    if (!waited) {
      pdl_wait();
      pdl_launch_dependents();
      waited = true;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) mma_chunk(v[u], c + KS * u);
  }
  if (!waited) {
    pdl_wait();
    pdl_launch_dependents();
  }
  for (; c < chunks; c += KS) {
    uint4 v[R][2];
    load_w(c, v);
    mma_chunk(v, c);
  }

  if constexpr (KS > 1) {
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) partial[warp][lane][(r * NT + nt) * 4 + i] = acc[r][nt][i];
    __syncthreads();
    if (slice != 0) return;
#pragma unroll
    for (int s = 1; s < KS; ++s)
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i) acc[r][nt][i] += partial[warp + s][lane][(r * NT + nt) * 4 + i];
  }

  // C fragment: acc[r][nt][i] is weight row 16r + g (+8 for i >= 2), activation row nt*8 + 2t (+1 for odd i).
  Out* out = static_cast<Out*>(a.out);
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int row = row0 + 16 * r + g + (i >= 2 ? 8 : 0), n = nt * 8 + 2 * t + (i & 1);
        if (row >= a.N || n >= a.M) continue;
        if constexpr (sizeof(Out) == 4) out[int64_t(n) * a.N + row] = acc[r][nt][i];
        else out[int64_t(n) * a.N + row] = to_bf16(acc[r][nt][i]);
      }
}

template <int R, int NT, int KS>
cudaError_t launch_ks(const GemvArgs& a, cudaStream_t stream) {
  const int tiles = ceil_div(a.N, 16 * R);
  const dim3 grid(unsigned(ceil_div(tiles, kWarps / KS)));
  if (a.out_f32) return launch_kernel(gemv_tc_kernel<R, NT, KS, float>, grid, dim3(kWarps * 32), 0, stream, a);
  return launch_kernel(gemv_tc_kernel<R, NT, KS, bf16>, grid, dim3(kWarps * 32), 0, stream, a);
}

// Two 16-row groups per warp share each x fragment (x is re-read per 32 weight rows).
template <int NT>
cudaError_t launch_nt(const GemvArgs& a, cudaStream_t stream) {
  constexpr int R = 2;
  // Split K until the warp tiles give about kTargetWarps warps, keeping every
  // slice at least one chunk.
  const int tiles = ceil_div(a.N, 16 * R), chunks = ceil_div(a.K, 32);
  int ks = 1;
  while (ks < kWarps && tiles * ks < kTargetWarps && 2 * ks <= chunks) ks *= 2;
  switch (ks) {
    case 1: return launch_ks<R, NT, 1>(a, stream);
    case 2: return launch_ks<R, NT, 2>(a, stream);
    case 4: return launch_ks<R, NT, 4>(a, stream);
    default: return launch_ks<R, NT, 8>(a, stream);
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
