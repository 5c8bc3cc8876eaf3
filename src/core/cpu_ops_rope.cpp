// rope_qkv on the CPU: splits packed qkv rows, applies the optional per-head
// RMSNorm of q and k (Qwen3 q_norm / k_norm) and then rotate-half RoPE
// (Hugging Face convention: dim i pairs with dim i + hd/2), writes q to q_out
// and k, v into the paged cache slots of the plan.
//
// Angles follow transformers' LlamaRotaryEmbedding in fp32:
// angle_i = float(position) * inv_freq[i], cos/sin of that float in fp32,
// the same cos/sin for dims i and i + hd/2.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/cpu_ops.hpp"
#include "core/try.hpp"

namespace photon::cpu {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

// x[hd] <- rotate-half RoPE of x with cos/sin [hd/2].
inline void rotate_half(float* x, const float* cos, const float* sin, int64_t half) noexcept {
  for (int64_t i = 0; i < half; ++i) {
    const float a = x[i], b = x[i + half];
    x[i] = a * cos[i] + (-b) * sin[i];
    x[i + half] = b * cos[i] + a * sin[i];
  }
}

Result<std::vector<float>> widen_head_norm(const char* name, Tensor w, int64_t hd) {
  std::vector<float> out;
  if (w.empty()) return out;
  PHOTON_TRY(expect_float_dtype("rope_qkv", name, w));
  if (w.numel() != hd)
    return fail(Errc::shape_mismatch, std::string("rope_qkv: ") + name + " must hold head_dim = " + str(hd) +
                                          " values, got " + shape_string(w));
  out.resize(size_t(hd));
  widen_row(w, 0, hd, out.data());
  return out;
}

}  // namespace

Result<void> rope_qkv(ThreadPool& pool, CpuScratch& scratch, Tensor q_out, Tensor qkv, const StepPlanView& plan,
                      Tensor inv_freq, Tensor q_norm, Tensor k_norm, float eps, KvLayer cache) {
  const char* op = "rope_qkv";
  PHOTON_TRY(expect_f32(op, "q_out", q_out));
  PHOTON_TRY(expect_f32(op, "qkv", qkv));
  PHOTON_TRY(expect_f32(op, "inv_freq", inv_freq));
  PHOTON_TRY(check_kv_cache(op, cache));
  const int64_t T = plan.num_tokens;
  const int64_t slots = cache.k.dim(0) * cache.k.dim(1), nkv = cache.k.dim(2), hd = cache.k.dim(3);
  if (hd % 2 != 0)
    return fail(Errc::shape_mismatch, "rope_qkv: cache head_dim must be even, got " +
                                          shape_string(cache.k));
  const int64_t half = hd / 2;
  if (qkv.rank < 1 || qkv.dim(0) != T || T < 0)
    return fail(Errc::shape_mismatch, "rope_qkv: qkv must have T = " + str(T) + " rows, got " + shape_string(qkv));
  const int64_t width = qkv.row_elems();
  if (T > 0 && (width % hd != 0 || width / hd <= 2 * nkv))
    return fail(Errc::shape_mismatch, "rope_qkv: qkv rows of " + str(width) + " values are not (nq + 2 * " +
                                          str(nkv) + ") heads of " + str(hd));
  const int64_t nq = T > 0 ? width / hd - 2 * nkv : 0;
  if (q_out.rank < 1 || q_out.dim(0) != T || q_out.numel() != T * nq * hd)
    return fail(Errc::shape_mismatch, "rope_qkv: q_out must be [T = " + str(T) + ", nq = " + str(nq) + ", hd = " +
                                          str(hd) + "], got " + shape_string(q_out));
  if (inv_freq.numel() != half)
    return fail(Errc::shape_mismatch,
                "rope_qkv: inv_freq must hold hd/2 = " + str(half) + " values, got " + shape_string(inv_freq));
  PHOTON_ASSIGN_OR_RETURN(const std::vector<float> qn, widen_head_norm("q_norm", q_norm, hd));
  PHOTON_ASSIGN_OR_RETURN(const std::vector<float> kn, widen_head_norm("k_norm", k_norm, hd));
  if (T > 0 && (plan.positions == nullptr || plan.slot_mapping == nullptr))
    return fail(Errc::invalid_argument, "rope_qkv: plan has no positions or slot_mapping");
  for (int64_t t = 0; t < T; ++t) {
    if (plan.positions[t] < 0)
      return fail(Errc::out_of_range, "rope_qkv: negative position at token " + str(t));
    if (plan.slot_mapping[t] < 0 || plan.slot_mapping[t] >= slots)
      return fail(Errc::out_of_range, "rope_qkv: slot " + str(plan.slot_mapping[t]) + " of token " + str(t) +
                                          " outside the cache's " + str(slots) + " slots");
  }

  const float* freq = inv_freq.as<const float>();
  const float* src = qkv.as<const float>();
  float* qo = q_out.as<float>();
  float* kc = cache.k.as<float>();
  float* vc = cache.v.as<float>();
  scratch.rope.reserve(pool.max_concurrency(), hd);
  pool.parallel_for_indexed(0, T, [&](int32_t worker, int64_t b, int64_t e) {
    float* cos = scratch.rope.of(worker);  // [half], then sin [half]
    float* sin = cos + half;
    for (int64_t t = b; t < e; ++t) {
      const float pos = float(plan.positions[t]);
      for (int64_t i = 0; i < half; ++i) {
        const float angle = pos * freq[i];
        cos[i] = std::cos(angle);
        sin[i] = std::sin(angle);
      }
      const float* row = src + t * width;
      for (int64_t h = 0; h < nq; ++h) {
        float* q = qo + (t * nq + h) * hd;
        if (qn.empty()) std::memcpy(q, row + h * hd, size_t(hd) * sizeof(float));
        else rmsnorm_row(row + h * hd, qn.data(), hd, eps, q);
        rotate_half(q, cos, sin, half);
      }
      const int64_t cache_row = cache.row_of_slot(plan.slot_mapping[t]);
      for (int64_t h = 0; h < nkv; ++h) {
        float* k = kc + (cache_row * nkv + h) * hd;
        const float* kin = row + (nq + h) * hd;
        if (kn.empty()) std::memcpy(k, kin, size_t(hd) * sizeof(float));
        else rmsnorm_row(kin, kn.data(), hd, eps, k);
        rotate_half(k, cos, sin, half);
        std::memcpy(vc + (cache_row * nkv + h) * hd, row + (nq + nkv + h) * hd, size_t(hd) * sizeof(float));
      }
    }
  });
  return {};
}

}  // namespace photon::cpu
