#include "cuda/common.cuh"
#include "cuda/silu_mul.cuh"
#include "cuda/launch.cuh"

namespace photon::cuda {

namespace {

constexpr int kThreads = 256;

// Grid-stride over the T * I / VEC chunks of the output.
template <int VEC>
__global__ void __launch_bounds__(kThreads) silu_mul_kernel(SiluMulArgs a) {
  const StepTraceScope step_trace_scope(step_trace_tag(kTraceSiluMul, 0, a.num_tokens, a.inter));
  pdl_launch_dependents();  // early: the next kernel may start streaming its weights (launch.cuh)
  pdl_wait();
  const int64_t per_row = a.inter / VEC;
  const int64_t total = int64_t(a.num_tokens) * per_row;
  for (int64_t c = int64_t(blockIdx.x) * kThreads + threadIdx.x; c < total; c += int64_t(gridDim.x) * kThreads) {
    const int64_t t = c / per_row;
    const int64_t i = (c - t * per_row) * VEC;
    const bf16* g = a.gate_up + t * 2 * a.inter + i;
    const bf16* u = g + a.inter;
    bf16* o = a.out + t * a.inter + i;
    if constexpr (VEC == 8) {
      float gv[8], uv[8], ov[8];
      load_bf16x8(g, gv);
      load_bf16x8(u, uv);
#pragma unroll
      for (int k = 0; k < 8; ++k) ov[k] = silu_times(gv[k], uv[k]);
      store_bf16x8(o, ov);
    } else {
      o[0] = to_bf16(silu_times(to_f32(g[0]), to_f32(u[0])));
    }
  }
}

}  // namespace

PHOTON_STEP_TRACE_UNIT(silu_mul)
PHOTON_PRELOAD_UNIT(silu_mul, silu_mul_kernel<8>)

Status launch_silu_mul(const SiluMulArgs& a, cudaStream_t stream) {
  if (a.num_tokens < 0 || a.inter <= 0) return bad_launch("silu_mul", "needs T >= 0 and I > 0");
  if (a.num_tokens == 0) return {};
  const bool vec = a.inter % 8 == 0 && is_aligned(a.out, 16) && is_aligned(a.gate_up, 16);
  const int vec_width = vec ? 8 : 1;
  const int64_t chunks = int64_t(a.num_tokens) * (a.inter / vec_width);
  const int blocks = int(ceil_div64(chunks, kThreads) < 65536 ? ceil_div64(chunks, kThreads) : 65536);
  PHOTON_CUDA_TRY(launch_kernel(vec ? silu_mul_kernel<8> : silu_mul_kernel<1>, dim3(unsigned(blocks)), dim3(kThreads), 0,
                                stream, a));
  return {};
}

}  // namespace photon::cuda
