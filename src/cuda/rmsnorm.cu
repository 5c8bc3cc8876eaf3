#include "cuda/common.cuh"
#include "cuda/rmsnorm.cuh"
#include "cuda/launch.cuh"

namespace photon::cuda {

namespace {

constexpr int kThreads = 256;

// One block per row, any H: pass 1 forms the sum of squares, pass 2 re-reads
// what this same thread read and scales it, so out may alias x. Serves rows
// that rmsnorm_regs_kernel cannot hold (H > 8192, or not 16-byte vectors).
template <int VEC, class W>
__global__ void __launch_bounds__(kThreads) rmsnorm_kernel(RmsNormArgs a) {
  const StepTraceScope step_trace_scope(step_trace_tag(kTraceRmsNorm, 0, a.rows, a.hidden));
  __shared__ float scratch[32];
  pdl_launch_dependents();  // early: the next kernel may start streaming its weights (launch.cuh)
  pdl_wait();
  const int64_t base = int64_t(blockIdx.x) * a.hidden;
  const bf16* x = a.x + base;
  bf16* out = a.out + base;
  const W* w = static_cast<const W*>(a.weight);
  const int H = a.hidden;

  float ss = 0.f;
  for (int i = threadIdx.x * VEC; i < H; i += kThreads * VEC) {
    float v[VEC];
    if constexpr (VEC == 8) load_bf16x8(x + i, v);
    else v[0] = to_f32(x[i]);
#pragma unroll
    for (int k = 0; k < VEC; ++k) ss += v[k] * v[k];
  }
  const float inv = rsqrtf(block_sum<kThreads>(ss, scratch) / float(H) + a.eps);

  for (int i = threadIdx.x * VEC; i < H; i += kThreads * VEC) {
    float v[VEC], g[VEC];
    if constexpr (VEC == 8) {
      load_bf16x8(x + i, v);
      load_x8(w + i, g);
    } else {
      v[0] = to_f32(x[i]);
      g[0] = to_f32(w[i]);
    }
#pragma unroll
    for (int k = 0; k < VEC; ++k) v[k] = v[k] * inv * g[k];
    if constexpr (VEC == 8) store_bf16x8(out + i, v);
    else out[i] = to_bf16(v[0]);
  }
}

// Plain RMSNorm of rows with H <= kThreads * 8 * CH (H % 8 == 0): each thread keeps its CH chunks
// of 8 in registers (no second read of x) and loads its norm weights before pdl_wait() (weights are
// never written by kernels), so the wait is followed by one load of x, one reduction and one store.
// Against rmsnorm_kernel: 1.2 us less per norm at Qwen3-8B's H = 4096 (docs/performance.md, row 27).
template <int CH, class W>
__global__ void __launch_bounds__(kThreads) rmsnorm_regs_kernel(RmsNormArgs a) {
  const StepTraceScope step_trace_scope(step_trace_tag(kTraceRmsNorm, 1, a.rows, a.hidden));
  __shared__ float scratch[32];
  pdl_launch_dependents();  // early: the next kernel may start streaming its weights (launch.cuh)
  const int H = a.hidden;
  const W* w = static_cast<const W*>(a.weight);
  float g[CH][8];
#pragma unroll
  for (int c = 0; c < CH; ++c) {
    const int i = (c * kThreads + threadIdx.x) * 8;
    if (i < H) load_x8(w + i, g[c]);
  }
  pdl_wait();
  const int64_t base = int64_t(blockIdx.x) * H;
  float v[CH][8];
  float ss = 0.f;
#pragma unroll
  for (int c = 0; c < CH; ++c) {
    const int i = (c * kThreads + threadIdx.x) * 8;
    if (i < H) {
      load_bf16x8(a.x + base + i, v[c]);
#pragma unroll
      for (int k = 0; k < 8; ++k) ss += v[c][k] * v[c][k];
    }
  }
  const float inv = rsqrtf(block_sum<kThreads>(ss, scratch) / float(H) + a.eps);
#pragma unroll
  for (int c = 0; c < CH; ++c) {
    const int i = (c * kThreads + threadIdx.x) * 8;
    if (i < H) {
#pragma unroll
      for (int k = 0; k < 8; ++k) v[c][k] = v[c][k] * inv * g[c][k];
      store_bf16x8(a.out + base + i, v[c]);
    }
  }
}

template <int CH>
cudaError_t launch_regs(const RmsNormArgs& a, cudaStream_t stream) {
  return launch_kernel(a.weight_f32 ? rmsnorm_regs_kernel<CH, float> : rmsnorm_regs_kernel<CH, bf16>,
                       dim3(unsigned(a.rows)), dim3(kThreads), 0, stream, a);
}

template <int VEC>
cudaError_t launch_any(const RmsNormArgs& a, cudaStream_t stream) {
  return launch_kernel(a.weight_f32 ? rmsnorm_kernel<VEC, float> : rmsnorm_kernel<VEC, bf16>, dim3(unsigned(a.rows)),
                       dim3(kThreads), 0, stream, a);
}

}  // namespace

PHOTON_STEP_TRACE_UNIT(rmsnorm)
PHOTON_PRELOAD_UNIT(rmsnorm, rmsnorm_regs_kernel<1, bf16>)

Status launch_rmsnorm(const RmsNormArgs& a, cudaStream_t stream) {
  if (a.rows < 0 || a.hidden <= 0) return bad_launch("rmsnorm", "needs rows >= 0 and H > 0");
  if (a.rows == 0) return {};
  const bool vec = a.hidden % 8 == 0 && is_aligned(a.out, 16) && is_aligned(a.x, 16) &&
                   is_aligned(a.weight, a.weight_f32 ? 32 : 16);
  if (vec && a.hidden <= kThreads * 8 * 4) {  // up to 4 chunks of 8 per thread in registers
    const int chunks = ceil_div(a.hidden, kThreads * 8);
    PHOTON_CUDA_TRY(chunks == 1   ? launch_regs<1>(a, stream)
                    : chunks == 2 ? launch_regs<2>(a, stream)
                                  : launch_regs<4>(a, stream));
    return {};
  }
  PHOTON_CUDA_TRY(vec ? launch_any<8>(a, stream) : launch_any<1>(a, stream));
  return {};
}

}  // namespace photon::cuda
