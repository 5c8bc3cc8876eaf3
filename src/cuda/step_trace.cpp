#include "cuda/step_trace.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <vector>

#include "cuda/step_trace.cuh"

namespace photon::cuda {

#ifdef PHOTON_CUDA_STEP_TRACE
// Defined by PHOTON_STEP_TRACE_UNIT(name) in each traced kernel file.
cudaError_t step_trace_attach_gemv(StepTraceSlot* table);
cudaError_t step_trace_attach_gemv_skinny(StepTraceSlot* table);
cudaError_t step_trace_attach_decode_attention(StepTraceSlot* table);
cudaError_t step_trace_attach_decode_attention_one(StepTraceSlot* table);
cudaError_t step_trace_attach_sampling_gumbel(StepTraceSlot* table);
cudaError_t step_trace_attach_sampling_screened(StepTraceSlot* table);
cudaError_t step_trace_attach_embedding(StepTraceSlot* table);
cudaError_t step_trace_attach_rmsnorm(StepTraceSlot* table);
cudaError_t step_trace_attach_rope_qkv(StepTraceSlot* table);
cudaError_t step_trace_attach_silu_mul(StepTraceSlot* table);
cudaError_t step_trace_attach_gather_rows(StepTraceSlot* table);

namespace {
cudaError_t attach_all(StepTraceSlot* table) {
  for (auto attach : {step_trace_attach_gemv, step_trace_attach_gemv_skinny, step_trace_attach_decode_attention,
                      step_trace_attach_decode_attention_one,
                      step_trace_attach_sampling_gumbel, step_trace_attach_sampling_screened, step_trace_attach_embedding, step_trace_attach_rmsnorm,
                      step_trace_attach_rope_qkv, step_trace_attach_silu_mul, step_trace_attach_gather_rows})
    if (const cudaError_t e = attach(table); e != cudaSuccess) return e;
  return cudaSuccess;
}
}  // namespace
#endif

Result<std::unique_ptr<StepTrace>> StepTrace::open(const std::string& path) {
#ifndef PHOTON_CUDA_STEP_TRACE
  return fail(Errc::unsupported, "step trace: this build has no trace hooks (configure with -DPHOTON_CUDA_STEP_TRACE=ON)");
#else
  std::unique_ptr<StepTrace> t(new StepTrace());
  t->file_ = std::fopen(path.c_str(), "a");
  if (t->file_ == nullptr) return fail(Errc::io_error, "step trace: cannot open " + path + " for appending");
  PHOTON_CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&t->table_), sizeof(StepTraceSlot) * kStepTraceSlots));
  PHOTON_CUDA_TRY(cudaMemset(t->table_, 0, sizeof(StepTraceSlot) * kStepTraceSlots));
  PHOTON_CUDA_TRY(attach_all(t->table_));
  std::fprintf(t->file_, "# step rows grid_min grid_max tag blocks start wait_first wait_last end (mark_first mark_last) x %d\n", kStepTraceMarks);
  return t;
#endif
}

StepTrace::~StepTrace() {
#ifdef PHOTON_CUDA_STEP_TRACE
  if (table_ != nullptr) {
    (void)attach_all(nullptr);
    cudaFree(table_);
  }
#endif
  if (file_ != nullptr) std::fclose(file_);
}

Status StepTrace::begin(cudaStream_t stream) {
  PHOTON_CUDA_TRY(cudaMemsetAsync(table_, 0, sizeof(StepTraceSlot) * kStepTraceSlots, stream));
  return {};
}

Status StepTrace::end(cudaStream_t stream, int64_t step, int32_t rows) {
  std::vector<StepTraceSlot> host(kStepTraceSlots);
  PHOTON_CUDA_TRY(cudaMemcpyAsync(host.data(), table_, sizeof(StepTraceSlot) * kStepTraceSlots,
                                  cudaMemcpyDeviceToHost, stream));
  PHOTON_CUDA_TRY(cudaStreamSynchronize(stream));
  for (const StepTraceSlot& s : host) {
    if (s.blocks == 0) continue;
    unsigned long long start_inv = 0, wait_inv = 0, wait_max = 0, end_max = 0;
    for (int l = 0; l < kStepTraceLanes; ++l) {
      start_inv = std::max(start_inv, s.start_inv[l].v);
      wait_inv = std::max(wait_inv, s.wait_inv[l].v);
      wait_max = std::max(wait_max, s.wait_max[l].v);
      end_max = std::max(end_max, s.end_max[l].v);
    }
    std::fprintf(file_, "%lld %d %llu %llu %llu %llu %llu %llu %llu %llu", static_cast<long long>(step), rows,
                 ~s.grid_inv, s.grid_max, s.tag, s.blocks, ~start_inv, wait_inv == 0 ? 0ull : ~wait_inv, wait_max,
                 end_max);
    for (int k = 0; k < kStepTraceMarks; ++k) {
      unsigned long long inv = 0, mx = 0;
      for (int l = 0; l < kStepTraceLanes; ++l) {
        inv = std::max(inv, s.mark_inv[k][l].v);
        mx = std::max(mx, s.mark_max[k][l].v);
      }
      std::fprintf(file_, " %llu %llu", inv == 0 ? 0ull : ~inv, mx);
    }
    std::fputc('\n', file_);
  }
  std::fflush(file_);
  return {};
}

}  // namespace photon::cuda
