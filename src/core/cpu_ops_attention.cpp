// Paged causal attention on the CPU, fp32.
//
// For query token t of sequence s (at position p = plan.positions[t]) and
// query head h: scores_j = scale * q[t, h] . K[j, h / (nq / nkv)] for the
// cached positions j = 0 .. p (found through s's block table), softmax in
// fp32 (two passes: max, then exponentials and their sum), then
// out[t, h] = sum_j softmax_j * V[j, kv head]. Work items are (token, kv
// head) pairs handed out dynamically (their cost grows with the position).
#include <algorithm>
#include <cmath>
#include <string>

#include "core/cpu_ops.hpp"
#include "core/try.hpp"

namespace photon::cpu {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

// Checks the plan's per-sequence arrays against a cache of `num_blocks`
// blocks of `block_size` and fills seq_of_token[T].
Result<void> check_sequences(const StepPlanView& plan, int64_t num_blocks, int64_t block_size,
                             std::vector<int32_t>& seq_of_token) {
  const int64_t T = plan.num_tokens, S = plan.num_seqs;
  auto bad = [](const std::string& what) { return fail(Errc::invalid_argument, "attention: plan " + what); };
  if (T < 0 || S < 0 || plan.max_blocks_per_seq < 0) return bad("has negative sizes");
  if (T > 0 && (S == 0 || plan.positions == nullptr)) return bad("has tokens but no sequences or positions");
  if (S > 0 && (plan.query_start == nullptr || plan.context_lens == nullptr ||
                (plan.max_blocks_per_seq > 0 && plan.block_tables == nullptr)))
    return bad("lacks query_start, context_lens or block_tables");
  if (S > 0 && (plan.query_start[0] != 0 || plan.query_start[S] != T))
    return bad("query_start must run from 0 to T = " + str(T));
  seq_of_token.resize(size_t(T));
  for (int64_t s = 0; s < S; ++s) {
    const int32_t q0 = plan.query_start[s], q1 = plan.query_start[s + 1];
    if (q1 < q0) return bad("query_start decreases at sequence " + str(s));
    const int64_t ctx = plan.context_lens[s];
    if (ctx < 0 || ctx > int64_t(plan.max_blocks_per_seq) * block_size)
      return fail(Errc::out_of_range, "attention: context length " + str(ctx) + " of sequence " + str(s) +
                                          " beyond its block table of " + str(plan.max_blocks_per_seq) + " blocks");
    const int32_t* table = plan.block_tables + s * plan.max_blocks_per_seq;
    for (int64_t b = 0; b * block_size < ctx; ++b)
      if (table[b] < 0 || table[b] >= num_blocks)
        return fail(Errc::out_of_range, "attention: block id " + str(table[b]) + " of sequence " + str(s) +
                                            " outside the cache's " + str(num_blocks) + " blocks");
    for (int32_t t = q0; t < q1; ++t) {
      if (plan.positions[t] < 0 || plan.positions[t] >= ctx)
        return fail(Errc::out_of_range, "attention: position " + str(plan.positions[t]) + " of token " + str(t) +
                                            " outside its sequence's context of " + str(ctx));
      seq_of_token[size_t(t)] = int32_t(s);
    }
  }
  return {};
}

// The validated arguments of one attention call (shapes as in the file comment).
struct PagedAttention {
  const float* q;             // [T, nq, hd]
  const float* k;             // [num_blocks, bs, nkv, hd], block b at row b * block_stride
  const float* v;             // as k
  float* out;                 // [T, nq, hd]
  const int32_t* positions;   // [T]
  const int32_t* tables;      // [S, max_blocks]
  const int32_t* seq_of_token;  // [T]
  int64_t max_blocks, nq, nkv, hd, bs, block_stride, group, longest;
  float scale;
};

// Query heads kvh * group .. + group of token t over kv head kvh.
// work: [group * (longest + hd)] floats (scores, then output accumulators).
PHOTON_CPU_CLONES void attend(const PagedAttention& a, int64_t t, int64_t kvh, float* work) {
  const int64_t group = a.group, hd = a.hd, bs = a.bs, nkv = a.nkv, longest = a.longest;
  float* scores = work;                  // [group, longest]
  float* acc = work + group * longest;   // [group, hd]
  const int32_t* table = a.tables + int64_t(a.seq_of_token[t]) * a.max_blocks;
  const int64_t n = int64_t(a.positions[t]) + 1;
  const float* q0 = a.q + (t * a.nq + kvh * group) * hd;  // the group's query heads, contiguous
  // Position j of the sequence lives in block table[j / bs] at offset j % bs.
  for (int64_t j0 = 0; j0 < n; j0 += bs) {
    const float* kb = a.k + (int64_t(table[j0 / bs]) * a.block_stride * nkv + kvh) * hd;
    for (int64_t j = j0; j < std::min(n, j0 + bs); ++j) {
      const float* krow = kb + (j - j0) * nkv * hd;
      for (int64_t g = 0; g < group; ++g) scores[g * longest + j] = dot_f32(q0 + g * hd, krow, hd) * a.scale;
    }
  }
  // Softmax per query head: max, then exponentials and their sum, then probabilities.
  for (int64_t g = 0; g < group; ++g) {
    float* sg = scores + g * longest;
    float max_score = -INFINITY;
    for (int64_t j = 0; j < n; ++j) max_score = std::max(max_score, sg[j]);
    float sum = 0.0f;
    for (int64_t j = 0; j < n; ++j) {
      sg[j] = std::exp(sg[j] - max_score);
      sum += sg[j];
    }
    for (int64_t j = 0; j < n; ++j) sg[j] = sg[j] / sum;
  }
  std::fill(acc, acc + group * hd, 0.0f);
  for (int64_t j0 = 0; j0 < n; j0 += bs) {
    const float* vb = a.v + (int64_t(table[j0 / bs]) * a.block_stride * nkv + kvh) * hd;
    for (int64_t j = j0; j < std::min(n, j0 + bs); ++j) {
      const float* vrow = vb + (j - j0) * nkv * hd;
      for (int64_t g = 0; g < group; ++g) {
        const float p = scores[g * longest + j];
        float* ag = acc + g * hd;
        for (int64_t d = 0; d < hd; ++d) ag[d] += p * vrow[d];
      }
    }
  }
  std::copy(acc, acc + group * hd, a.out + (t * a.nq + kvh * group) * hd);
}

}  // namespace

Result<void> attention(ThreadPool& pool, CpuScratch& scratch, Tensor out, Tensor q, KvLayer cache,
                       const StepPlanView& plan, float scale) {
  const char* op = "attention";
  PHOTON_TRY(expect_f32(op, "out", out));
  PHOTON_TRY(expect_f32(op, "q", q));
  PHOTON_TRY(check_kv_cache(op, cache));
  const int64_t num_blocks = cache.k.dim(0), bs = cache.k.dim(1), nkv = cache.k.dim(2), hd = cache.k.dim(3);
  const int64_t T = plan.num_tokens;
  if (q.rank < 1 || q.dim(0) != T || (T > 0 && q.row_elems() % hd != 0))
    return fail(Errc::shape_mismatch, "attention: q must be [T = " + str(T) + ", nq, hd = " + str(hd) + "], got " +
                                          shape_string(q));
  const int64_t nq = T > 0 ? q.row_elems() / hd : 0;
  if (T > 0 && (nq == 0 || nq % nkv != 0))
    return fail(Errc::shape_mismatch, "attention: " + str(nq) + " query heads are not a multiple of " + str(nkv) +
                                          " kv heads");
  if (out.rank < 1 || out.dim(0) != T || out.numel() != q.numel())
    return fail(Errc::shape_mismatch, "attention: out " + shape_string(out) + " must match q " + shape_string(q));
  if (!std::isfinite(scale)) return fail(Errc::invalid_argument, "attention: scale must be finite");
  PHOTON_TRY(check_sequences(plan, num_blocks, bs, scratch.seq_of_token));
  if (T == 0) return {};

  int64_t longest = 1;
  for (int64_t t = 0; t < T; ++t) longest = std::max<int64_t>(longest, int64_t(plan.positions[t]) + 1);
  const int64_t group = nq / nkv;
  scratch.attention.reserve(pool.max_concurrency(), group * (longest + hd));
  const PagedAttention args{q.as<const float>(), cache.k.as<const float>(), cache.v.as<const float>(), out.as<float>(),
                            plan.positions, plan.block_tables, scratch.seq_of_token.data(), plan.max_blocks_per_seq,
                            nq, nkv, hd, bs, cache.block_stride_rows(), group, longest, scale};
  // One item = one token and one kv head with its `group` query heads, so
  // each K and V row is read once per item (GQA).
  const int64_t items = T * nkv;
  const int64_t grain = std::max<int64_t>(1, items / (int64_t(pool.max_concurrency()) * 8));
  pool.parallel_for_indexed(
      0, items,
      [&](int32_t worker, int64_t begin, int64_t end) {
        float* work = scratch.attention.of(worker);
        for (int64_t item = begin; item < end; ++item) attend(args, item / nkv, item % nkv, work);
      },
      grain);
  return {};
}

}  // namespace photon::cpu
