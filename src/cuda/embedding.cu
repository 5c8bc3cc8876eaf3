#include "cuda/common.cuh"
#include "cuda/embedding.cuh"
#include "cuda/launch.cuh"

namespace photon::cuda {

namespace {

// One block per token; threads stride over the row in VEC-element chunks.
template <int VEC>
__global__ void embedding_kernel(EmbeddingArgs a) {
  const StepTraceScope step_trace_scope(step_trace_tag(kTraceEmbedding, 0, a.num_tokens, a.hidden));
  pdl_launch_dependents();  // early: the next kernel may start streaming its weights (launch.cuh)
  pdl_wait();  // out may still be read by the previous step's kernels
  const int t = blockIdx.x;
  const int32_t id = a.ids[t];
  bf16* dst = a.out + int64_t(t) * a.hidden;
  if (id < 0 || id >= a.vocab) {  // the backend rejects such ids on the host; never read out of bounds
    for (int i = threadIdx.x; i < a.hidden; i += blockDim.x) dst[i] = to_bf16(__int_as_float(0x7fc00000));
    return;
  }
  const bf16* src = a.table + int64_t(id) * a.hidden;
  if constexpr (VEC == 8) {
    for (int i = threadIdx.x * 8; i < a.hidden; i += blockDim.x * 8)
      *reinterpret_cast<uint4*>(dst + i) = *reinterpret_cast<const uint4*>(src + i);
  } else {
    for (int i = threadIdx.x; i < a.hidden; i += blockDim.x) dst[i] = src[i];
  }
}

}  // namespace

PHOTON_STEP_TRACE_UNIT(embedding)
PHOTON_PRELOAD_UNIT(embedding, embedding_kernel<8>)

Status launch_embedding(const EmbeddingArgs& a, cudaStream_t stream) {
  if (a.num_tokens < 0 || a.hidden <= 0) return bad_launch("embedding", "needs T >= 0 and H > 0");
  if (a.num_tokens == 0) return {};
  const bool vec = a.hidden % 8 == 0 && is_aligned(a.out, 16) && is_aligned(a.table, 16);
  const int threads = vec ? (a.hidden / 8 >= 128 ? 128 : 32) : 128;
  PHOTON_CUDA_TRY(launch_kernel(vec ? embedding_kernel<8> : embedding_kernel<1>, dim3(unsigned(a.num_tokens)),
                                dim3(unsigned(threads)), 0, stream, a));
  return {};
}

}  // namespace photon::cuda
