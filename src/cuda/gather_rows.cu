#include "cuda/common.cuh"
#include "cuda/gather_rows.cuh"

namespace photon::cuda {

namespace {

// One block per output row; Unit is uint4 (16 bytes) or uint16_t.
template <class Unit>
__global__ void gather_rows_kernel(GatherRowsArgs a) {
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

Status launch_gather_rows(const GatherRowsArgs& a, cudaStream_t stream) {
  if (a.num_rows < 0 || a.row_bytes <= 0 || a.row_bytes % 2 != 0)
    return bad_launch("gather_rows", "needs R >= 0 and an even, positive row size");
  if (a.num_rows == 0) return {};
  if (a.row_bytes % 16 == 0 && is_aligned(a.out, 16) && is_aligned(a.x, 16))
    gather_rows_kernel<uint4><<<a.num_rows, 128, 0, stream>>>(a);
  else
    gather_rows_kernel<uint16_t><<<a.num_rows, 128, 0, stream>>>(a);
  PHOTON_CUDA_CHECK_LAUNCH();
  return {};
}

}  // namespace photon::cuda
