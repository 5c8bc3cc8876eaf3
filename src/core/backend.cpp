// Backend's default fused ops (rope_attention, rmsnorm_matmul, rmsnorm_matmul_silu, rmsnorm_qkv_attention,
// decoder_layers): the op sequences every backend implements, so they are also the twins of any
// backend's fused overrides.
#include "core/backend.hpp"

#include <string>

#include "core/try.hpp"

namespace photon {

Result<void> Backend::run_step_sampled(const BatchPlan& plan, const StepForward& forward, const SampleBatch& batch,
                                       const SampleOutput& out) {
  PHOTON_ASSIGN_OR_RETURN(Tensor logits, run_step(plan, forward));
  if (batch.num_rows == 0) return {};  // a step of prefill chunks only: nothing to sample
  return sample(logits, batch, out);
}

Result<void> Backend::launch_step_sampled(const BatchPlan& plan, const StepForward& forward, const SampleBatch& batch,
                                          const SampleOutput& out, std::span<const int32_t> prev_rows) {
  if (batch.num_rows > 0 && out.token_ids == nullptr)
    return fail(Errc::invalid_argument, "launch_step_sampled: out.token_ids is required");
  return sync_steps_.launch(plan, prev_rows, out.token_ids, batch.num_rows,
                            [&](const BatchPlan& p) { return run_step_sampled(p, forward, batch, out); });
}

Result<void> Backend::finish_step_sampled() { return sync_steps_.finish(); }

Result<void> Backend::rope_attention(Tensor out, Tensor q, Tensor qkv, const StepPlanView& plan, Tensor inv_freq,
                                     Tensor q_norm, Tensor k_norm, float eps, KvLayer cache, float scale) {
  PHOTON_TRY(rope_qkv(q, qkv, plan, inv_freq, q_norm, k_norm, eps, cache));
  return attention(out, q, cache, plan, scale);
}

Result<void> Backend::rmsnorm_matmul(Tensor out, Tensor x, Tensor norm_w, float eps, const Weight& W, Tensor h) {
  PHOTON_TRY(rmsnorm(h, x, norm_w, eps));
  return matmul(out, h, W);
}

Result<void> Backend::rmsnorm_matmul_silu(Tensor out, Tensor x, Tensor norm_w, float eps, const Weight& W, Tensor h,
                                          Tensor scratch) {
  PHOTON_TRY(rmsnorm(h, x, norm_w, eps));
  return matmul_silu(out, h, W, scratch);
}

Result<void> Backend::rmsnorm_qkv_attention(Tensor out, Tensor x, Tensor norm_w, const Weight& W, Tensor h,
                                            Tensor qkv, Tensor q, const StepPlanView& plan, Tensor inv_freq,
                                            Tensor q_norm, Tensor k_norm, float eps, KvLayer cache, float scale) {
  PHOTON_TRY(rmsnorm_matmul(qkv, x, norm_w, eps, W, h));
  return rope_attention(out, q, qkv, plan, inv_freq, q_norm, k_norm, eps, cache, scale);
}

Result<void> Backend::decoder_layers(Tensor x, std::span<const DecoderLayerWeights> layers,
                                     std::span<const KvLayer> caches, const DecoderScratch& s,
                                     const StepPlanView& plan, const DecoderLayersParams& p) {
  if (layers.size() != caches.size())
    return fail(Errc::invalid_argument, "decoder_layers: " + std::to_string(layers.size()) + " layers but " +
                                            std::to_string(caches.size()) + " KV cache layers");
  if (x.rank != 2 || s.q.rank != 3)
    return fail(Errc::shape_mismatch, "decoder_layers: x must be [T, H] and scratch.q [T, nq, hd]");
  const int64_t T = x.dim(0), q_dim = s.q.dim(1) * s.q.dim(2);
  for (size_t l = 0; l < layers.size(); ++l) {
    const DecoderLayerWeights& L = layers[l];
    PHOTON_TRY(rmsnorm_qkv_attention(s.attn, x, L.input_norm, L.qkv, s.h, s.qkv, s.q, plan, p.inv_freq, L.q_norm,
                                     L.k_norm, p.eps, caches[l], p.attn_scale));
    PHOTON_TRY(matmul_add(x, s.attn.view({T, q_dim}), L.o, s.tmp));
    PHOTON_TRY(rmsnorm_matmul_silu(s.mlp, x, L.post_attention_norm, p.eps, L.gate_up, s.h, s.gate_up));
    PHOTON_TRY(matmul_add(x, s.mlp, L.down, s.tmp));
  }
  return {};
}

}  // namespace photon
