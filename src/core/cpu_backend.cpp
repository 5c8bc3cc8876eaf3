// CpuBackend: host memory, the staged plan, and dispatch to the CPU ops
// (cpu_ops_*.cpp, cpu_sampler.cpp).
#include "core/cpu_backend.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>
#include <string>
#include <vector>

#include "core/cpu_ops.hpp"
#include "core/thread_pool.hpp"
#include "core/try.hpp"

namespace photon {
namespace {

constexpr size_t kAlignment = 64;

// The plan's arrays, copied into memory this backend owns.
struct StagedPlan {
  std::vector<int32_t> input_ids, positions, query_start, context_lens, block_tables, slot_mapping, logits_rows;
};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(std::unique_ptr<ThreadPool> pool) : pool_(std::move(pool)) {}

  std::string_view name() const noexcept override { return "cpu"; }
  DType activation_dtype() const noexcept override { return DType::f32; }
  DType kv_dtype() const noexcept override { return DType::f32; }
  DType weight_dtype(DType stored) const noexcept override { return stored; }
  bool supports_int8_weights() const noexcept override { return true; }

  Result<Buffer> allocate(size_t bytes) override {
    if (bytes == 0) return Buffer(this, nullptr, 0);
    const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    if (rounded < bytes) return fail(Errc::out_of_memory, "cpu: allocation of " + std::to_string(bytes) + " bytes");
    void* p = ::operator new(rounded, std::align_val_t(kAlignment), std::nothrow);
    if (p == nullptr)
      return fail(Errc::out_of_memory, "cpu: cannot allocate " + std::to_string(bytes) + " bytes of host memory");
    return Buffer(this, p, bytes);
  }
  Result<void> copy_to_device(void* dst, const void* host_src, size_t bytes) override {
    return copy("copy_to_device", dst, host_src, bytes);
  }
  Result<void> copy_to_host(void* host_dst, const void* src, size_t bytes) override {
    return copy("copy_to_host", host_dst, src, bytes);
  }
  Result<void> fill_zero(Tensor t) override {
    PHOTON_TRY(cpu::expect_data("fill_zero", "t", t));
    if (t.numel() > 0) std::memset(t.data, 0, t.nbytes());
    return {};
  }
  Result<void> synchronize() override { return {}; }
  // Available physical memory (the KV cache and weights live in host RAM).
  size_t free_memory() const noexcept override {
    const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0) return std::numeric_limits<size_t>::max() / 2;
    return size_t(pages) * size_t(page);
  }

  Result<StepPlanView> stage_plan(const BatchPlan& plan) override;

  Result<void> embed(Tensor out, const Weight& table, const StepPlanView& plan) override {
    return cpu::embed(*pool_, out, table, plan);
  }
  Result<void> rmsnorm(Tensor out, Tensor x, Tensor w, float eps) override {
    return cpu::rmsnorm(*pool_, out, x, w, eps);
  }
  Result<void> matmul(Tensor out, Tensor x, const Weight& W) override {
    return cpu::matmul(*pool_, scratch_, out, x, W);
  }
  // The product into scratch, then added: the same sums as matmul followed by an add.
  Result<void> matmul_add(Tensor residual, Tensor x, const Weight& W, Tensor scratch) override {
    if (overlaps(residual, x) || overlaps(residual, scratch))
      return fail(Errc::invalid_argument, "matmul_add: residual overlaps x or scratch");
    PHOTON_TRY(cpu::matmul(*pool_, scratch_, scratch, x, W));
    return cpu::add_into(*pool_, residual, scratch);
  }
  // The product into scratch, then SwiGLU: the same values as matmul followed by silu_mul.
  Result<void> matmul_silu(Tensor out, Tensor x, const Weight& W, Tensor scratch) override {
    if (overlaps(out, x) || overlaps(out, scratch))
      return fail(Errc::invalid_argument, "matmul_silu: out overlaps x or scratch");
    PHOTON_TRY(cpu::matmul(*pool_, scratch_, scratch, x, W));
    return cpu::silu_mul(*pool_, out, scratch);
  }
  Result<void> rope_qkv(Tensor q_out, Tensor qkv, const StepPlanView& plan, Tensor inv_freq, Tensor q_norm,
                        Tensor k_norm, float eps, KvLayer cache) override {
    return cpu::rope_qkv(*pool_, scratch_, q_out, qkv, plan, inv_freq, q_norm, k_norm, eps, cache);
  }
  Result<void> attention(Tensor out, Tensor q, KvLayer cache, const StepPlanView& plan, float scale) override {
    return cpu::attention(*pool_, scratch_, out, q, cache, plan, scale);
  }
  Result<void> silu_mul(Tensor out, Tensor gate_up) override { return cpu::silu_mul(*pool_, out, gate_up); }
  Result<void> gather_logit_rows(Tensor out, Tensor x, const StepPlanView& plan) override {
    return cpu::gather_rows(*pool_, out, x, plan);
  }
  Result<void> sample(Tensor logits, const SampleBatch& batch, const SampleOutput& out) override {
    return cpu::sample(*pool_, scratch_, logits, batch, out);
  }

 protected:
  void release(void* ptr) noexcept override {
    if (ptr != nullptr) ::operator delete(ptr, std::align_val_t(kAlignment));
  }

 private:
  static Result<void> copy(const char* op, void* dst, const void* src, size_t bytes) {
    if (bytes == 0) return {};
    if (dst == nullptr || src == nullptr)
      return fail(Errc::invalid_argument, std::string("cpu ") + op + ": null pointer for " + std::to_string(bytes) +
                                              " bytes");
    std::memmove(dst, src, bytes);
    return {};
  }

  std::unique_ptr<ThreadPool> pool_;
  cpu::CpuScratch scratch_;
  StagedPlan staged_;
};

Result<StepPlanView> CpuBackend::stage_plan(const BatchPlan& plan) {
  const size_t T = plan.input_ids.size();
  const int32_t S = plan.num_seqs();
  auto bad = [](const std::string& what) { return fail(Errc::invalid_argument, "stage_plan: " + what); };
  if (plan.positions.size() != T || plan.slot_mapping.size() != T)
    return bad("positions and slot_mapping must have one entry per input id");
  if (plan.context_lens.size() != size_t(S)) return bad("context_lens must have one entry per sequence");
  if (plan.max_blocks_per_seq < 0 || plan.block_tables.size() != size_t(S) * size_t(plan.max_blocks_per_seq))
    return bad("block_tables must be [S, max_blocks_per_seq] (call BatchPlan::finalize)");
  if (S > 0 && (plan.query_start.front() != 0 || size_t(plan.query_start.back()) != T))
    return bad("query_start must run from 0 to the token count");
  if (S == 0 && T > 0) return bad("tokens without sequences");

  StepPlanView v;
  v.num_tokens = int32_t(T);
  v.num_seqs = S;
  v.num_logits = plan.num_logits();
  v.max_blocks_per_seq = plan.max_blocks_per_seq;
  for (int32_t s = 0; s < S; ++s) {
    const int32_t q0 = plan.query_start[size_t(s)], q1 = plan.query_start[size_t(s) + 1];
    if (q1 < q0) return bad("query_start decreases at sequence " + std::to_string(s));
    v.max_query_len = std::max(v.max_query_len, q1 - q0);
    v.max_context_len = std::max(v.max_context_len, plan.context_lens[size_t(s)]);
  }
  if (v.max_context_len > 0 && plan.max_blocks_per_seq == 0)
    return bad("sequences have context but no block table (call BatchPlan::finalize)");
  staged_.input_ids = plan.input_ids;
  staged_.positions = plan.positions;
  staged_.query_start = plan.query_start;
  staged_.context_lens = plan.context_lens;
  staged_.block_tables = plan.block_tables;
  staged_.slot_mapping = plan.slot_mapping;
  staged_.logits_rows = plan.logits_rows;

  v.input_ids = staged_.input_ids.data();
  v.positions = staged_.positions.data();
  v.query_start = staged_.query_start.data();
  v.context_lens = staged_.context_lens.data();
  v.block_tables = staged_.block_tables.data();
  v.slot_mapping = staged_.slot_mapping.data();
  v.logits_rows = staged_.logits_rows.data();
  v.logits_of_every_token = logits_of_every_token(plan);
  return v;
}

}  // namespace

Result<std::unique_ptr<Backend>> make_cpu_backend(const CpuBackendOptions& options) {
  PHOTON_ASSIGN_OR_RETURN(std::unique_ptr<ThreadPool> pool, ThreadPool::create(options.num_threads));
  return std::unique_ptr<Backend>(new CpuBackend(std::move(pool)));
}

}  // namespace photon
