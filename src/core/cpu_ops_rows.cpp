// Row-wise CPU ops: embedding lookup, RMSNorm (plain and fused with the
// residual add), SiLU-gated product, logits-row gather. Each row is computed
// by one thread; rows are split evenly over the pool.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/cpu_ops.hpp"
#include "core/try.hpp"

namespace photon::cpu {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

Result<void> check_plan_tokens(const char* op, const StepPlanView& plan) {
  if (plan.num_tokens < 0 || plan.num_seqs < 0 || plan.num_logits < 0)
    return fail(Errc::invalid_argument, std::string(op) + ": plan has negative sizes");
  return {};
}

}  // namespace

Result<void> embed(ThreadPool& pool, Tensor out, const Weight& table, const StepPlanView& plan) {
  const char* op = "embed";
  PHOTON_TRY(check_plan_tokens(op, plan));
  PHOTON_TRY(check_weight(op, "table", table));
  PHOTON_TRY(expect_f32(op, "out", out));
  const int64_t T = plan.num_tokens, V = table.w.dim(0), H = table.w.dim(1);
  if (out.rank < 1 || out.dim(0) != T || out.numel() != T * H)
    return fail(Errc::shape_mismatch, "embed: out must be [T = " + str(T) + ", H = " + str(H) + "], got " +
                                          shape_string(out));
  if (T > 0 && plan.input_ids == nullptr) return fail(Errc::invalid_argument, "embed: plan has no input_ids");
  for (int64_t t = 0; t < T; ++t) {
    const int32_t id = plan.input_ids[t];
    if (id < 0 || id >= V)
      return fail(Errc::out_of_range,
                  "embed: token id " + str(id) + " at row " + str(t) + " outside the vocabulary [0, " + str(V) + ")");
  }
  float* o = out.as<float>();
  pool.parallel_for(0, T, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) widen_weight_row(table, plan.input_ids[t], o + t * H);
  });
  return {};
}

namespace {

// rows = x.numel() / w.numel(); out has x's element count.
Result<int64_t> check_norm(const char* op, Tensor out, Tensor x, Tensor w) {
  PHOTON_TRY(expect_data(op, "w", w));
  PHOTON_TRY(expect_f32(op, "x", x));
  PHOTON_TRY(expect_f32(op, "out", out));
  PHOTON_TRY(expect_float_dtype(op, "w", w));
  const int64_t H = w.numel();
  if (H == 0) return fail(Errc::shape_mismatch, std::string(op) + ": weight w is empty");
  if (x.numel() % H != 0)
    return fail(Errc::shape_mismatch, std::string(op) + ": x " + shape_string(x) +
                                          " is not a whole number of rows of w " + shape_string(w));
  if (out.numel() != x.numel())
    return fail(Errc::shape_mismatch,
                std::string(op) + ": out " + shape_string(out) + " differs in size from x " + shape_string(x));
  return x.numel() / H;
}

}  // namespace

Result<void> rmsnorm(ThreadPool& pool, Tensor out, Tensor x, Tensor w, float eps) {
  PHOTON_ASSIGN_OR_RETURN(const int64_t rows, check_norm("rmsnorm", out, x, w));
  const int64_t H = w.numel();
  std::vector<float> wf(static_cast<size_t>(H));
  widen_row(w, 0, H, wf.data());
  const float* xs = x.as<const float>();
  float* o = out.as<float>();
  pool.parallel_for(0, rows, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) rmsnorm_row(xs + r * H, wf.data(), H, eps, o + r * H);
  });
  return {};
}

Result<void> add_into(ThreadPool& pool, Tensor residual, Tensor x) {
  const char* op = "matmul_add";
  PHOTON_TRY(expect_f32(op, "residual", residual));
  PHOTON_TRY(expect_f32(op, "product", x));
  if (residual.numel() != x.numel())
    return fail(Errc::shape_mismatch, "matmul_add: residual " + shape_string(residual) + " differs in size from the product " +
                                          shape_string(x));
  float* r = residual.as<float>();
  const float* xs = x.as<const float>();
  pool.parallel_for(0, residual.numel(), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) r[i] += xs[i];
  });
  return {};
}

Result<void> silu_mul(ThreadPool& pool, Tensor out, Tensor gate_up) {
  const char* op = "silu_mul";
  PHOTON_TRY(expect_f32(op, "out", out));
  PHOTON_TRY(expect_f32(op, "gate_up", gate_up));
  const int64_t T = gate_up.rank >= 1 ? gate_up.dim(0) : 0;
  const int64_t I2 = gate_up.row_elems();
  if (gate_up.rank < 2 || I2 % 2 != 0 || out.rank < 1 || out.dim(0) != T || out.numel() * 2 != gate_up.numel())
    return fail(Errc::shape_mismatch, "silu_mul: need gate_up [T, 2I] and out [T, I], got gate_up " +
                                          shape_string(gate_up) + ", out " + shape_string(out));
  const int64_t I = I2 / 2;
  const float* gu = gate_up.as<const float>();
  float* o = out.as<float>();
  pool.parallel_for(0, T, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const float* g = gu + t * I2;
      const float* u = g + I;
      float* ot = o + t * I;
      for (int64_t i = 0; i < I; ++i) ot[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
    }
  });
  return {};
}

Result<void> gather_rows(ThreadPool& pool, Tensor out, Tensor x, const StepPlanView& plan) {
  const char* op = "gather_logit_rows";
  PHOTON_TRY(check_plan_tokens(op, plan));
  PHOTON_TRY(expect_f32(op, "out", out));
  PHOTON_TRY(expect_f32(op, "x", x));
  const int64_t R = plan.num_logits, rows = x.rank >= 1 ? x.dim(0) : 0, H = x.row_elems();
  if (out.rank < 1 || out.dim(0) != R || out.numel() != R * H)
    return fail(Errc::shape_mismatch, "gather_logit_rows: out must be [R = " + str(R) + ", H = " + str(H) +
                                          "], got " + shape_string(out));
  if (R > 0 && plan.logits_rows == nullptr)
    return fail(Errc::invalid_argument, "gather_logit_rows: plan has no logits_rows");
  for (int64_t r = 0; r < R; ++r)
    if (plan.logits_rows[r] < 0 || plan.logits_rows[r] >= rows)
      return fail(Errc::out_of_range, "gather_logit_rows: logits row " + str(plan.logits_rows[r]) + " outside x " +
                                          shape_string(x));
  const float* xs = x.as<const float>();
  float* o = out.as<float>();
  pool.parallel_for(0, R, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) std::memcpy(o + r * H, xs + plan.logits_rows[r] * H, size_t(H) * sizeof(float));
  });
  return {};
}

}  // namespace photon::cpu
