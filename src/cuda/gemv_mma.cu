#include <cooperative_groups.h>

#include "cuda/common.cuh"
#include "cuda/gemv_mma.cuh"
#include "cuda/launch.cuh"
#include "cuda/mma.cuh"

namespace photon::cuda {

namespace {

namespace cg = cooperative_groups;

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kBlockRows = kWarps * 16;  // weight rows per block (16 per warp)
constexpr int kStepK = 64;               // k per pipeline stage
constexpr int kSubSteps = kStepK / 32;   // 32-k halves of a stage (two MMAs each)
constexpr int kStages = 4;
// Per stage: every warp's weight tile, laid out [warp][sub][row half][lane] as 16-byte chunks.
constexpr int kWeightStageBytes = kWarps * kSubSteps * 2 * 32 * 16;

template <int MPAD>
constexpr int smem_bytes() {
  return kStages * (kWeightStageBytes + MPAD * kStepK * 2);
}

// The kernel body compiles for sm_90+ only (clusters); the sm_80 pass keeps a stub.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define PHOTON_GEMV_MMA_BODY 1
// x tile of one stage: [MPAD rows][8 chunks of 16 bytes]; chunk c of row m lives at
// c ^ (4 * (m & 1)) so that the two rows a quarter-warp reads fall in disjoint banks.
__device__ __forceinline__ int x_chunk(int m, int c) { return m * 8 + (c ^ ((m & 1) << 2)); }
#endif

// grid ceil(N / 128) * KC, clusters of KC consecutive blocks along x: the KC blocks
// of a cluster own the same 128 weight rows and split the K range into contiguous stage ranges.
template <int MPAD, int KC>
__global__ void __launch_bounds__(kThreads, 2) gemv_mma_kernel(GemvArgs a) {
#if defined(PHOTON_GEMV_MMA_BODY)
  constexpr int NT = MPAD / 8;  // n tiles of activation rows
  extern __shared__ __align__(16) unsigned char smem[];
  uint4* wsm = reinterpret_cast<uint4*>(smem);
  uint4* xsm = reinterpret_cast<uint4*>(smem + kStages * kWeightStageBytes);

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const int rank = KC > 1 ? int(cg::this_cluster().block_rank()) : 0;
  const int row_block = int(blockIdx.x) / KC;
  const int row0 = row_block * kBlockRows + warp * 16;
  const int total_steps = ceil_div(a.K, kStepK);
  const int s_begin = rank * total_steps / KC;
  const int nsteps = (rank + 1) * total_steps / KC - s_begin;
  const uint64_t policy = evict_first_policy();

  // Lane (g, t) copies, for each 32-k half u, 8 k of row g and of row g + 8
  // (k = 32u + 8t ..): the A fragments of two MMAs whose k order is permuted
  // the same way in x (the sum over k does not care about the order).
  auto load_w = [&](int step, int slot) {
    const int kb = (s_begin + step) * kStepK;
    uint4* dst = wsm + (slot * kWarps + warp) * (kSubSteps * 2 * 32) + lane;
#pragma unroll
    for (int u = 0; u < kSubSteps; ++u)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = row0 + g + 8 * h, k = kb + 32 * u + 8 * t;
        uint4* d = dst + (u * 2 + h) * 32;
        if (row < a.N && k < a.K) cp_async_16_hint(d, a.w + int64_t(row) * a.K + k, policy);
        else *d = make_uint4(0, 0, 0, 0);
      }
  };
  auto load_x = [&](int step, int slot) {
    const int kb = (s_begin + step) * kStepK;
    uint4* dst = xsm + slot * MPAD * 8;
    for (int c = threadIdx.x; c < MPAD * 8; c += kThreads) {
      const int m = c >> 3, ch = c & 7, k = kb + ch * 8;
      const bool valid = m < a.M && k < a.K;
      cp_async_16(dst + x_chunk(m, ch), valid ? static_cast<const void*>(a.x + int64_t(m) * a.K + k) : a.x, valid);
    }
  };

  // Weights do not depend on earlier kernels: start streaming them before the wait.
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s)
    if (s < nsteps) load_w(s, s);
  cp_async_commit();
  pdl_wait();
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < nsteps) load_x(s, s);
    cp_async_commit();
  }

  float acc[NT][4];
#pragma unroll
  for (int j = 0; j < NT; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;

  // Groups committed before iteration i: weights(0..S-2), x(0), ..., x(S-2), then one per
  // earlier iteration; stage i is complete once at most S-2 groups are pending.
  for (int i = 0; i < nsteps; ++i) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // stage i visible to all; everyone is done with the slot reloaded below
    const int next = i + kStages - 1;
    if (next < nsteps) {
      load_w(next, next % kStages);
      load_x(next, next % kStages);
    }
    cp_async_commit();

    const int slot = i % kStages;
    const uint4* wv = wsm + (slot * kWarps + warp) * (kSubSteps * 2 * 32) + lane;
    const uint4* xs = xsm + slot * MPAD * 8;
#pragma unroll
    for (int u = 0; u < kSubSteps; ++u) {
      const uint4 lo = wv[(u * 2) * 32], hi = wv[(u * 2 + 1) * 32];  // rows g and g + 8
      const uint32_t a0[4] = {lo.x, hi.x, lo.y, hi.y};
      const uint32_t a1[4] = {lo.z, hi.z, lo.w, hi.w};
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const uint4 xv = xs[x_chunk(8 * j + g, 4 * u + t)];
        mma_bf16_16816(acc[j], a0, xv.x, xv.y);
        mma_bf16_16816(acc[j], a1, xv.z, xv.w);
      }
    }
  }
  pdl_launch_dependents();  // the next kernel may start streaming its weights during the reduction

  // Partial tile [MPAD][128] f32 in this block's shared memory (the pipeline is drained).
  cp_async_wait<0>();
  __syncthreads();
  float* part = reinterpret_cast<float*>(smem);
  {
    const int r = warp * 16 + g;
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      const int m = 8 * j + 2 * t;
      part[m * kBlockRows + r] = acc[j][0];
      part[(m + 1) * kBlockRows + r] = acc[j][1];
      part[m * kBlockRows + r + 8] = acc[j][2];
      part[(m + 1) * kBlockRows + r + 8] = acc[j][3];
    }
  }
  if constexpr (KC > 1) cg::this_cluster().sync();
  else __syncthreads();

  // Rank r adds up activation rows [r * MPAD / KC, (r + 1) * MPAD / KC) over the cluster.
  constexpr int kRowsPerRank = MPAD / KC;
  static_assert(kRowsPerRank >= 1, "MPAD >= KC");
  for (int idx = threadIdx.x; idx < kRowsPerRank * kBlockRows; idx += kThreads) {
    const int m = rank * kRowsPerRank + idx / kBlockRows, r = idx % kBlockRows;
    const int n = row_block * kBlockRows + r;
    if (m >= a.M || n >= a.N) continue;
    float v = part[m * kBlockRows + r];
    if constexpr (KC > 1) {
      cg::cluster_group c = cg::this_cluster();
#pragma unroll
      for (int q = 1; q < KC; ++q) v += c.map_shared_rank(part, (rank + q) % KC)[m * kBlockRows + r];
    }
    const int64_t o = int64_t(m) * a.N + n;
    if (a.out_f32) static_cast<float*>(a.out)[o] = v;
    else static_cast<bf16*>(a.out)[o] = to_bf16(v);
  }
  if constexpr (KC > 1) cg::this_cluster().sync();  // no block leaves while others read its shared memory
#else
  pdl_wait();
  __trap();  // launched only on sm_90 and newer
#endif
}

template <int MPAD, int KC>
Status launch_mk(const GemvArgs& a, cudaStream_t stream) {
  auto kernel = gemv_mma_kernel<MPAD, KC>;
  constexpr int smem = smem_bytes<MPAD>();
  PHOTON_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const dim3 grid(unsigned(ceil_div(a.N, kBlockRows) * KC));
  if constexpr (KC == 1) {
    PHOTON_CUDA_TRY(launch_kernel(kernel, grid, dim3(kThreads), smem, stream, a));
  } else {
    PHOTON_CUDA_TRY(launch_kernel_in_clusters(kernel, grid, dim3(kThreads), smem, stream, unsigned(KC), a));
  }
  return {};
}

template <int MPAD>
Status launch_m(const GemvArgs& a, int32_t num_sms, cudaStream_t stream) {
  // Two blocks fit an SM; split K (at least two stages per block) until the grid covers them.
  const int64_t row_blocks = ceil_div(a.N, kBlockRows);
  const int steps = ceil_div(a.K, kStepK);
  int kc = 1;
  while (kc < 8 && row_blocks * kc < 2 * int64_t(num_sms) && steps >= 2 * kc * 2) kc *= 2;
  switch (kc) {
    case 1: return launch_mk<MPAD, 1>(a, stream);
    case 2: return launch_mk<MPAD, 2>(a, stream);
    case 4: return launch_mk<MPAD, 4>(a, stream);
    default: return launch_mk<MPAD, 8>(a, stream);
  }
}

}  // namespace

PHOTON_PRELOAD_UNIT(gemv_mma, gemv_mma_kernel<8, 1>)

bool gemv_mma_applies(const GemvArgs& a) {
  return a.M >= kGemvMmaMinRows && a.M <= kGemvMmaMaxRows && a.K > 0 && a.K % 8 == 0 && a.N > 0 &&
         is_aligned(a.x, 16) && is_aligned(a.w, 16);
}

Status launch_gemv_mma(const GemvArgs& a, int32_t num_sms, cudaStream_t stream) {
  if (!gemv_mma_applies(a))
    return bad_launch("gemv_mma", "needs 2 <= M <= 64, K % 8 == 0 and 16-byte aligned x and w");
  if (num_sms <= 0) return bad_launch("gemv_mma", "num_sms must be positive");
  if (a.M <= 8) return launch_m<8>(a, num_sms, stream);
  if (a.M <= 16) return launch_m<16>(a, num_sms, stream);
  if (a.M <= 32) return launch_m<32>(a, num_sms, stream);
  return launch_m<64>(a, num_sms, stream);
}

}  // namespace photon::cuda
