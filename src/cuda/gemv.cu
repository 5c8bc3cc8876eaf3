#include "cuda/common.cuh"
#include "cuda/gemv.cuh"
#include "cuda/launch.cuh"

namespace photon::cuda {

namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kUnroll = 8;  // 16-byte weight loads in flight per lane
// Shared memory for the staged x rows of a prologue: without an opt-in a block may use 48 KiB.
// Shared memory for the staged x rows of a prologue: a block may use 48 KiB
// without an opt-in; the kernel's static shared memory takes < 1 KiB of it.
constexpr int64_t kMaxStagedBytes = 40 * 1024;

__device__ __forceinline__ void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

// Builds the M staged x rows [M, K] (bf16, shared memory) of a prologue; all
// threads of the block call it, after pdl_wait().
//  add_rmsnorm: xs[m] = rmsnorm(residual[m] + x[m]) * norm_w, the sum rounded
//    to bf16 first, the same thread layout and summation order as the
//    add_rmsnorm kernel (rmsnorm.cu), so the rows are bit-identical to its output;
//  silu_mul: xs[m] = silu(x[m, :K]) * x[m, K:] (x is gate_up [M, 2K]).
template <int M, GemvPrologue P>
__device__ void stage_rows(const GemvArgs& a, bf16* xs) {
  __shared__ float scratch[32];
  const int K = a.K;
#pragma unroll 1
  for (int m = 0; m < M; ++m) {
    bf16* row = xs + int64_t(m) * K;
    if constexpr (P == GemvPrologue::silu_mul) {
      const bf16* g = a.x + int64_t(m) * 2 * K;
      for (int i = threadIdx.x * 8; i < K; i += kThreads * 8) {  // pairwise: fewer live registers than 3 x 8 floats
        const uint4 gr = *reinterpret_cast<const uint4*>(g + i), ur = *reinterpret_cast<const uint4*>(g + K + i);
        const bf162* gh = reinterpret_cast<const bf162*>(&gr);
        const bf162* uh = reinterpret_cast<const bf162*>(&ur);
        uint4 o;
        bf162* oh = reinterpret_cast<bf162*>(&o);
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const float2 gf = __bfloat1622float2(gh[k]), uf = __bfloat1622float2(uh[k]);
          oh[k] = __floats2bfloat162_rn(silu_times(gf.x, uf.x), silu_times(gf.y, uf.y));
        }
        *reinterpret_cast<uint4*>(row + i) = o;
      }
    } else {
      const bf16* x = a.x + int64_t(m) * K;
      const bf16* res = a.residual + int64_t(m) * K;
      float ss = 0.f;
      for (int i = threadIdx.x * 8; i < K; i += kThreads * 8) {
        float v[8], r[8];
        load_bf16x8(x + i, v);
        load_bf16x8(res + i, r);
#pragma unroll
        for (int k = 0; k < 8; ++k) v[k] = to_f32(to_bf16(v[k] + r[k]));
        store_bf16x8(row + i, v);
#pragma unroll
        for (int k = 0; k < 8; ++k) ss += v[k] * v[k];
      }
      const float inv = rsqrtf(block_sum<kThreads>(ss, scratch) / float(K) + a.eps);
      for (int i = threadIdx.x * 8; i < K; i += kThreads * 8) {  // this thread's own chunks: no barrier needed
        float v[8], g[8];
        load_bf16x8(row + i, v);
        if (a.norm_f32) load_x8(static_cast<const float*>(a.norm_w) + i, g);
        else load_x8(static_cast<const bf16*>(a.norm_w) + i, g);
#pragma unroll
        for (int k = 0; k < 8; ++k) v[k] = v[k] * inv * g[k];
        store_bf16x8(row + i, v);
      }
    }
  }
}

// add_rmsnorm prologue: every block reads the old residual, so it is updated
// only by the block that arrives last (all others have finished reading it):
// residual[m] = bf16(residual[m] + x[m]). The arrival counter is zero before
// the launch and left zero after it.
template <int M>
__device__ void update_residual_once(const GemvArgs& a) {
  __shared__ bool last;
  __syncthreads();  // this block's reads of residual are done
  if (threadIdx.x == 0) {
    __threadfence();
    last = atomicAdd(a.arrivals, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  for (int64_t i = int64_t(threadIdx.x) * 8; i < int64_t(M) * a.K; i += kThreads * 8) {
    float v[8], r[8];
    load_bf16x8(a.x + i, v);
    load_bf16x8(a.residual + i, r);
#pragma unroll
    for (int k = 0; k < 8; ++k) v[k] += r[k];
    store_bf16x8(a.residual + i, v);
  }
  if (threadIdx.x == 0) *a.arrivals = 0u;
}

// Block of kWarps warps serving kWarps / KS output columns; the KS warps of a
// column split its K range (interleaved 16-byte chunks) and meet in shared
// memory. KS > 1 when N alone gives too few warps to keep DRAM busy.
// With a prologue, each lane prefetches its first kUnroll weight chunks into
// L2 before pdl_wait() (weights are never written by kernels), so weight
// streaming overlaps the previous kernel's tail without holding registers
// (loads into registers there raised the kernel from 36 to 50-76 registers and
// cut occupancy). The plain kernel does not: the prefetch slowed it on the
// H200 (LM head 121.7 -> 134.7 us). x (or the prologue's inputs) is read after
// pdl_wait().
template <int M, int KS, class Out, GemvPrologue P>
__global__ void __launch_bounds__(kThreads) gemv_kernel(GemvArgs a) {
  constexpr int kCols = kWarps / KS;
  constexpr bool kStaged = P != GemvPrologue::none;
  constexpr int kStep = 32 * KS;
  __shared__ float partial[kWarps][M];
  extern __shared__ __align__(16) unsigned char staged_raw[];  // [M, K] bf16 when kStaged
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int col = warp / KS, slice = warp % KS;
  const int n = blockIdx.x * kCols + col;
  const bool active = n < a.N;
  const int chunks = a.K / 8;
  const uint4* w = reinterpret_cast<const uint4*>(a.w + int64_t(active ? n : 0) * a.K);
  const int c0 = slice * 32 + lane;

  if constexpr (kStaged) {  // the prologue delays the first weight loads: start them in L2
    if (active)
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (c0 + kStep * u < chunks) prefetch_l2(w + c0 + kStep * u);
  }
  pdl_wait();
  pdl_launch_dependents();

  const uint4* x = reinterpret_cast<const uint4*>(a.x);
  if constexpr (kStaged) {
    bf16* xs = reinterpret_cast<bf16*>(staged_raw);
    stage_rows<M, P>(a, xs);
    if constexpr (P == GemvPrologue::add_rmsnorm) update_residual_once<M>(a);
    __syncthreads();
    x = reinterpret_cast<const uint4*>(xs);
  }

  float acc[M];
#pragma unroll
  for (int m = 0; m < M; ++m) acc[m] = 0.f;
  if (active) {
    auto accumulate = [&](const uint4& wv, int c) {
      float wf[8];
      unpack_bf16x8(wv, wf);
#pragma unroll
      for (int m = 0; m < M; ++m) {
        float xf[8];
        if constexpr (kStaged) unpack_bf16x8(x[int64_t(m) * chunks + c], xf);
        else unpack_bf16x8(__ldg(x + int64_t(m) * chunks + c), xf);
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[m] += wf[e] * xf[e];
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
  if (lane == 0 && active) {
    Out* out = static_cast<Out*>(a.out);
#pragma unroll
    for (int m = 0; m < M; ++m) {
      if constexpr (sizeof(Out) == 4) out[int64_t(m) * a.N + n] = acc[m];
      else out[int64_t(m) * a.N + n] = to_bf16(acc[m]);
    }
  }
}

template <int M, int KS>
cudaError_t launch_mk(const GemvArgs& a, cudaStream_t stream) {
  const dim3 blocks(unsigned(ceil_div(a.N, kWarps / KS)));
  const size_t staged = a.prologue == GemvPrologue::none ? 0 : size_t(M) * size_t(a.K) * 2;
  switch (a.prologue) {
    case GemvPrologue::add_rmsnorm:
      return launch_kernel(gemv_kernel<M, KS, bf16, GemvPrologue::add_rmsnorm>, blocks, dim3(kThreads), staged, stream, a);
    case GemvPrologue::silu_mul:
      return launch_kernel(gemv_kernel<M, KS, bf16, GemvPrologue::silu_mul>, blocks, dim3(kThreads), staged, stream, a);
    case GemvPrologue::none: break;
  }
  return launch_kernel(a.out_f32 ? gemv_kernel<M, KS, float, GemvPrologue::none> : gemv_kernel<M, KS, bf16, GemvPrologue::none>,
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
  switch (a.prologue) {
    case GemvPrologue::none: return true;
    case GemvPrologue::silu_mul: return !a.out_f32 && int64_t(a.M) * a.K * 2 <= kMaxStagedBytes;
    case GemvPrologue::add_rmsnorm:
      return !a.out_f32 && int64_t(a.M) * a.K * 2 <= kMaxStagedBytes && a.residual != nullptr &&
             is_aligned(a.residual, 16) && a.norm_w != nullptr && is_aligned(a.norm_w, a.norm_f32 ? 32 : 16) &&
             a.arrivals != nullptr;
  }
  return false;
}

Status launch_gemv(const GemvArgs& a, cudaStream_t stream) {
  if (!gemv_applies(a))
    return bad_launch("gemv", "needs M = 1, K % 8 == 0, 16-byte aligned x and w (and a prologue's inputs), a bf16 "
                              "output and staged rows within 40 KiB for a prologue");
  static_assert(kGemvMaxRows == 1, "instantiate the kernel for every dispatched row count");
  PHOTON_CUDA_TRY(launch_m<1>(a, stream));
  return {};
}

}  // namespace photon::cuda
