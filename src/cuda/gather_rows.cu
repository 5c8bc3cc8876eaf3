#include "cuda/common.cuh"
#include "cuda/gather_rows.cuh"
#include "cuda/launch.cuh"

namespace photon::cuda {

namespace {

// One block per output row; Unit is uint4 (16 bytes) or uint16_t.
template <class Unit>
__global__ void gather_rows_kernel(GatherRowsArgs a) {
  const StepTraceScope step_trace_scope(step_trace_tag(kTraceGatherRows, 0, a.num_rows, 0));
  pdl_launch_dependents();  // early: the next kernel may start streaming its weights (launch.cuh)
  pdl_wait();
  const int r = blockIdx.x;
  const int32_t src_row = a.rows[r];
  const int64_t n = a.row_bytes / int64_t(sizeof(Unit));
  Unit* dst = static_cast<Unit*>(a.out) + int64_t(r) * n;
  if (src_row < 0 || src_row >= a.num_src_rows) {
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) dst[i] = Unit{};
    return;
  }
  const Unit* src = static_cast<const Unit*>(a.x) + int64_t(src_row) * n;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) dst[i] = src[i];
}

}  // namespace

PHOTON_STEP_TRACE_UNIT(gather_rows)
PHOTON_PRELOAD_UNIT(gather_rows, gather_rows_kernel<uint4>)

Status launch_gather_rows(const GatherRowsArgs& a, cudaStream_t stream) {
  if (a.num_rows < 0 || a.row_bytes <= 0 || a.row_bytes % 2 != 0)
    return bad_launch("gather_rows", "needs R >= 0 and an even, positive row size");
  if (a.num_rows == 0) return {};
  const bool vec = a.row_bytes % 16 == 0 && is_aligned(a.out, 16) && is_aligned(a.x, 16);
  PHOTON_CUDA_TRY(launch_kernel(vec ? gather_rows_kernel<uint4> : gather_rows_kernel<uint16_t>,
                                dim3(unsigned(a.num_rows)), dim3(128), 0, stream, a));
  return {};
}

}  // namespace photon::cuda
