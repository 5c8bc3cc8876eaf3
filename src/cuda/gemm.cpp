#include "cuda/gemm.hpp"

#include <algorithm>
#include <string>

namespace photon::cuda {

namespace {

Unexpected cublas_failure(cublasStatus_t st, const char* expr, int line) {
  return fail(Errc::cuda_error, std::string("cuBLASLt error at gemm.cpp:") + std::to_string(line) + ": " + expr +
                                    " failed: " + cublasLtGetStatusString(st) + " (" + cublasLtGetStatusName(st) + ")");
}

#define PHOTON_CUBLAS_TRY(expr)                                                   \
  do {                                                                            \
    const cublasStatus_t photon_cublas_st_ = (expr);                              \
    if (photon_cublas_st_ != CUBLAS_STATUS_SUCCESS)                               \
      return cublas_failure(photon_cublas_st_, #expr, __LINE__);                  \
  } while (0)

int32_t alignment_of(const void* p) {
  const auto v = reinterpret_cast<uintptr_t>(p);
  int32_t a = 256;
  while (a > 1 && v % uintptr_t(a) != 0) a /= 2;
  return a;
}

}  // namespace

size_t Gemm::KeyHash::operator()(const Key& k) const noexcept {
  size_t h = std::hash<int64_t>()(k.m);
  h = h * 1000003u ^ std::hash<int64_t>()(k.n);
  h = h * 1000003u ^ std::hash<int64_t>()(k.k);
  h = h * 1000003u ^ size_t(k.out_f32 * 512 + k.align);
  return h;
}

Result<std::unique_ptr<Gemm>> Gemm::create(void* workspace, size_t workspace_bytes) {
  std::unique_ptr<Gemm> g(new Gemm());
  PHOTON_CUBLAS_TRY(cublasLtCreate(&g->handle_));
  g->workspace_ = workspace;
  g->workspace_bytes_ = workspace_bytes;
  return g;
}

Gemm::~Gemm() {
  for (auto& [key, plan] : plans_) destroy(plan);
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

void Gemm::destroy(Plan& p) noexcept {
  if (p.a) cublasLtMatrixLayoutDestroy(p.a);
  if (p.b) cublasLtMatrixLayoutDestroy(p.b);
  if (p.c) cublasLtMatrixLayoutDestroy(p.c);
  if (p.desc) cublasLtMatmulDescDestroy(p.desc);
  p = Plan{};
}

// cuBLASLt is column-major: out^T [N, M] = w [N, K] (as K x N col-major, transposed) * x^T (K x M col-major).
Result<const Gemm::Plan*> Gemm::plan_for(const Key& key) {
  if (auto it = plans_.find(key); it != plans_.end()) return &it->second;
  Plan p;
  auto built = [&]() -> Status {
    PHOTON_CUBLAS_TRY(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t trans = CUBLAS_OP_T, no_trans = CUBLAS_OP_N;
    PHOTON_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans, sizeof(trans)));
    PHOTON_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &no_trans, sizeof(no_trans)));
    PHOTON_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16BF, uint64_t(key.k), uint64_t(key.n), key.k));
    PHOTON_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_16BF, uint64_t(key.k), uint64_t(key.m), key.k));
    PHOTON_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&p.c, key.out_f32 ? CUDA_R_32F : CUDA_R_16BF, uint64_t(key.n),
                                                 uint64_t(key.m), key.n));
    cublasLtMatmulPreference_t pref = nullptr;
    PHOTON_CUBLAS_TRY(cublasLtMatmulPreferenceCreate(&pref));
    const uint32_t align = uint32_t(key.align);
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                             &workspace_bytes_, sizeof(workspace_bytes_));
    for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof(align));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.a, p.b, p.c, p.c, pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    PHOTON_CUBLAS_TRY(st);
    if (found == 0)
      return fail(Errc::unsupported, "cuBLASLt has no algorithm for a bf16 matmul of M=" + std::to_string(key.m) +
                                         " N=" + std::to_string(key.n) + " K=" + std::to_string(key.k));
    p.algo = result.algo;
    return {};
  }();
  if (!built) {
    destroy(p);
    return Unexpected{std::move(built).error()};
  }
  return &plans_.emplace(key, p).first->second;
}

Status Gemm::run(void* out, DType out_dtype, const void* x, const void* w, int64_t M, int64_t N, int64_t K,
                 cudaStream_t stream, bool accumulate) {
  if (M == 0 || N == 0) return {};
  if (M < 0 || N < 0 || K <= 0) return bad_launch("gemm", "needs M, N >= 0 and K > 0");
  if (out_dtype != DType::f32 && out_dtype != DType::bf16) return bad_launch("gemm", "output must be f32 or bf16");
  int32_t align = alignment_of(out);
  for (const void* p : {x, w}) align = std::min(align, alignment_of(p));
  const Key key{M, N, K, out_dtype == DType::f32 ? 1 : 0, align};
  PHOTON_ASSIGN_OR_RETURN(const Plan* plan, plan_for(key));
  const float alpha = 1.f, beta = accumulate ? 1.f : 0.f;
  PHOTON_CUBLAS_TRY(cublasLtMatmul(handle_, plan->desc, &alpha, w, plan->a, x, plan->b, &beta, out, plan->c, out,
                                   plan->c, &plan->algo, workspace_, workspace_bytes_, stream));
  return {};
}

}  // namespace photon::cuda
