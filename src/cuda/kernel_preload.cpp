#include "cuda/kernel_preload.hpp"

namespace photon::cuda {

// Defined by PHOTON_PRELOAD_UNIT(name, kernel) in each kernel file; a new kernel file adds its line
// here and to the list below.
cudaError_t preload_unit_decode_attention();
cudaError_t preload_unit_decode_attention_one();
cudaError_t preload_unit_decode_layers();
cudaError_t preload_unit_embedding();
cudaError_t preload_unit_gather_rows();
cudaError_t preload_unit_gemv();
cudaError_t preload_unit_gemv_int8();
cudaError_t preload_unit_gemv_int8_skinny();
cudaError_t preload_unit_gemv_mma();
cudaError_t preload_unit_gemv_skinny();
cudaError_t preload_unit_prefill_attention();
cudaError_t preload_unit_rmsnorm();
cudaError_t preload_unit_rope_qkv();
cudaError_t preload_unit_sampling();
cudaError_t preload_unit_sampling_gumbel();
cudaError_t preload_unit_sampling_screened();
cudaError_t preload_unit_silu_mul();

Status preload_kernel_modules() {
  for (auto preload :
       {preload_unit_decode_attention, preload_unit_decode_attention_one, preload_unit_decode_layers,
        preload_unit_embedding, preload_unit_gather_rows, preload_unit_gemv, preload_unit_gemv_int8,
        preload_unit_gemv_int8_skinny, preload_unit_gemv_mma, preload_unit_gemv_skinny, preload_unit_prefill_attention,
        preload_unit_rmsnorm, preload_unit_rope_qkv, preload_unit_sampling, preload_unit_sampling_gumbel, preload_unit_sampling_screened,
        preload_unit_silu_mul})
    PHOTON_CUDA_TRY(preload());
  return {};
}

}  // namespace photon::cuda
