// The CPU sampler: docs/sampling.md, step by step, one row per work item.
//
// When no top-k / top-p rule cuts the candidates, the draw is Gumbel-max over
// the kept ids (docs/sampling.md, section 5): no order is built. Otherwise the order pi (candidates by
// z descending, ties to the lower id) is built lazily: SortedPrefix sorts only as far as a filter or the draw looks, in
// doubling chunks (nth_element, then sort of the chunk), so a peaked
// distribution costs O(V) instead of O(V log V).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>

#include "core/cpu_ops.hpp"
#include "core/gumbel.hpp"
#include "core/philox.hpp"
#include "core/try.hpp"

namespace photon::cpu {
namespace {

std::string row_str(int64_t r) { return "sample: row " + std::to_string(r) + ": "; }

Result<void> check_params(int64_t r, const SamplingParams& p, int32_t max_logprobs, int64_t V) {
  auto bad = [r](const std::string& what) { return fail(Errc::invalid_argument, row_str(r) + what); };
  if (!std::isfinite(p.temperature) || p.temperature < 0) return bad("temperature must be finite and >= 0");
  if (p.top_k < 0) return bad("top_k must be >= 0");
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) return bad("top_p must be in (0, 1]");
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) return bad("min_p must be in [0, 1]");
  if (!std::isfinite(p.repetition_penalty) || p.repetition_penalty <= 0) return bad("repetition_penalty must be > 0");
  if (!std::isfinite(p.presence_penalty) || !std::isfinite(p.frequency_penalty))
    return bad("presence_penalty and frequency_penalty must be finite");
  if (p.num_logprobs < 0 || p.num_logprobs > max_logprobs || p.num_logprobs > V)
    return bad("num_logprobs " + std::to_string(p.num_logprobs) + " outside [0, min(max_logprobs = " +
               std::to_string(max_logprobs) + ", V = " + std::to_string(V) + ")]");
  return {};
}

// The Gumbel noise of ids 4 quad .. 4 quad + 3 (docs/sampling.md, section 5): one Philox call. On
// x86-64 CPUs with FMA the logarithm's fmaf calls compile to instructions (the same IEEE results as
// libm's fmaf, ~4x faster than calling it); elsewhere the plain version calls fmaf.
using GumbelQuadFn = void (*)(uint64_t seed, uint64_t step, uint32_t quad, float* out);
void gumbel_quad_plain(uint64_t seed, uint64_t step, uint32_t quad, float* out) {
  const Philox4x32 r = gumbel_bits(seed, step, quad);
  for (int k = 0; k < 4; ++k) out[k] = gumbel_from_bits(r.v[k]);
}
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("fma"))) void gumbel_quad_fma(uint64_t seed, uint64_t step, uint32_t quad, float* out) {
  const Philox4x32 r = gumbel_bits(seed, step, quad);
  for (int k = 0; k < 4; ++k) out[k] = gumbel_from_bits(r.v[k]);
}
#endif
GumbelQuadFn gumbel_quad() {
  static const GumbelQuadFn fn = [] {
#if defined(__x86_64__) && defined(__GNUC__)
    if (__builtin_cpu_supports("fma")) return &gumbel_quad_fma;
#endif
    return &gumbel_quad_plain;
  }();
  return fn;
}

// Candidate ids ordered lazily by (z descending, id ascending).
class SortedPrefix {
 public:
  SortedPrefix(int32_t* ids, int64_t n, const float* z) : ids_(ids), n_(n), z_(z) {}
  int64_t size() const noexcept { return n_; }
  // The j-th token of pi (j < size()).
  int32_t at(int64_t j) {
    while (sorted_ <= j) extend();
    return ids_[j];
  }

 private:
  void extend() {
    const auto before = [z = z_](int32_t a, int32_t b) { return z[a] > z[b] || (z[a] == z[b] && a < b); };
    const int64_t end = std::min(n_, sorted_ + std::max<int64_t>(64, sorted_));
    if (end < n_) std::nth_element(ids_ + sorted_, ids_ + end, ids_ + n_, before);
    std::sort(ids_ + sorted_, ids_ + end, before);
    sorted_ = end;
  }
  int32_t* ids_;
  int64_t n_;
  const float* z_;
  int64_t sorted_ = 0;
};

// Gumbel-max over the kept ids (w > 0, w >= min_p) among ids[0 .. n), ascending, or every id of
// [0, V) when ids is null: the largest z + G, ties to the lower id (docs/sampling.md, section 5).
// z: the row's scaled logits, m their maximum (finite). Ids too far below m to win get no noise and
// no exp; -1 when none is kept (impossible: the maximum has w == 1).
int32_t gumbel_draw(const float* z, int64_t V, const int32_t* ids, int64_t n, float m, const SamplingParams& p,
                    uint64_t step) {
  const float skip_below = gumbel_skip_below(m);
  const bool need_w = p.min_p > 0.0f || skip_below == -std::numeric_limits<float>::infinity();
  const GumbelQuadFn quad_noise = gumbel_quad();
  float noise[4];
  uint32_t quad = UINT32_MAX;  // the quad whose noise is in `noise`
  int32_t best = -1;
  float best_score = -std::numeric_limits<float>::infinity();
  const int64_t count = ids != nullptr ? n : V;
  for (int64_t j = 0; j < count; ++j) {
    const int32_t i = ids != nullptr ? ids[j] : int32_t(j);
    if (z[i] < skip_below) continue;  // cannot win (and w > 0 holds above the bound)
    if (need_w) {
      const float wi = std::exp(z[i] - m);
      if (!(wi > 0.0f) || wi < p.min_p) continue;  // w_max == 1
    }
    if (uint32_t(i) >> 2 != quad) {
      quad = uint32_t(i) >> 2;
      quad_noise(p.seed, step, quad, noise);
    }
    const float score = z[i] + noise[i & 3];
    if (best < 0 || score > best_score) {
      best = i;
      best_score = score;
    }
  }
  return best;
}

struct RowInput {
  int64_t row;
  const float* l;  // [V] raw logits
  float* z;        // [V] scratch: penalized logits, then divided by the temperature
  int64_t V;
  const SamplingParams& p;
  uint64_t step;
  const int32_t* hist_tokens;
  const int32_t* hist_counts;
  int64_t hist_len;
};

// Step 1: raw logprobs (chosen token's later) and the top-n. Returns lse.
double raw_logprobs(const RowInput& in, int32_t* ids, int32_t* top_ids, float* top_logprobs, int32_t max_logprobs) {
  const float* l = in.l;
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < in.V; ++i) m = std::max(m, l[i]);
  double sum = 0;
  for (int64_t i = 0; i < in.V; ++i) sum += double(std::exp(l[i] - m));
  const double lse = double(m) + std::log(sum);
  if (top_ids != nullptr && max_logprobs > 0) {
    const int64_t n = in.p.num_logprobs;
    std::iota(ids, ids + in.V, 0);
    const auto before = [l](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); };
    std::partial_sort(ids, ids + n, ids + in.V, before);
    for (int64_t j = 0; j < max_logprobs; ++j) {
      top_ids[j] = j < n ? ids[j] : -1;
      top_logprobs[j] = j < n ? float(double(l[ids[j]]) - lse) : -std::numeric_limits<float>::infinity();
    }
  }
  return lse;
}

// Step 2: z = the penalized logits.
void apply_penalties(const RowInput& in) {
  const SamplingParams& p = in.p;
  float* l = in.z;
  std::copy(in.l, in.l + in.V, l);
  for (int64_t h = 0; h < in.hist_len; ++h) {
    const int32_t t = in.hist_tokens[h];
    if (p.repetition_penalty != 1.0f) l[t] = l[t] > 0 ? l[t] / p.repetition_penalty : l[t] * p.repetition_penalty;
    const int32_t c = in.hist_counts[h];
    if (c > 0) {
      l[t] = l[t] - p.frequency_penalty * float(c);
      l[t] = l[t] - p.presence_penalty;
    }
  }
}

// Steps 3-5: the token id.
Result<int32_t> choose(const RowInput& in, int32_t* ids) {
  const SamplingParams& p = in.p;
  float* l = in.z;
  const int64_t V = in.V;
  if (p.temperature == 0.0f) {
    int64_t best = 0;
    for (int64_t i = 1; i < V; ++i)
      if (l[i] > l[best]) best = i;
    if (l[best] == -std::numeric_limits<float>::infinity())
      return fail(Errc::invalid_argument, row_str(in.row) + "every logit is -inf after penalties");
    return int32_t(best);
  }
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < V; ++i) {
    l[i] = l[i] / p.temperature;
    m = std::max(m, l[i]);
  }
  if (m == -std::numeric_limits<float>::infinity())
    return fail(Errc::invalid_argument, row_str(in.row) + "every logit is -inf after penalties");
  if (!std::isfinite(m))  // finite logits (checked) divided by a small temperature: no weight is defined
    return fail(Errc::invalid_argument,
                row_str(in.row) + "logits / temperature " + std::to_string(p.temperature) + " overflow fp32");
  const float* z = l;
  // No top-k below V and no top-p: no rule can cut, and the draw needs no candidate list.
  if ((p.top_k == 0 || int64_t(p.top_k) >= V) && p.top_p >= 1.0f) return gumbel_draw(z, V, nullptr, 0, m, p, in.step);
  const auto w = [z, m](int32_t i) { return std::exp(z[i] - m); };
  int64_t n = 0;
  double total = 0;  // mass of all candidates
  for (int64_t i = 0; i < V; ++i) {
    const float wi = w(int32_t(i));
    if (wi > 0.0f) {
      ids[n++] = int32_t(i);
      total += double(wi);
    }
  }
  // No prefix rule cuts pi (top_k counts only past the n candidates): Gumbel-max over the kept ids.
  if ((p.top_k == 0 || p.top_k >= n) && p.top_p >= 1.0f) return gumbel_draw(z, V, ids, n, m, p, in.step);
  const double u = philox_uniform(p.seed, in.step);
  SortedPrefix pi(ids, n, z);

  int64_t kept = n;
  double mass = total;
  if (p.top_k > 0 && p.top_k < kept) {
    kept = p.top_k;
    mass = 0;
    for (int64_t j = 0; j < kept; ++j) mass += double(w(pi.at(j)));
  }
  if (p.top_p < 1.0f) {
    const double target = double(p.top_p) * mass;
    double cum = 0;
    int64_t j = 0;
    while (j < kept) {
      cum += double(w(pi.at(j++)));
      if (cum >= target) break;
    }
    if (j < kept) {
      kept = j;
      mass = cum;
    }
  }
  if (p.min_p > 0.0f) {
    int64_t j = 0;
    double cum = 0;
    while (j < kept) {
      const float wj = w(pi.at(j));
      if (wj < p.min_p) break;  // w_max == 1
      cum += double(wj);
      ++j;
    }
    if (j < kept) {
      kept = j;
      mass = cum;
    }
  }
  const double target = u * mass;
  double cum = 0;
  for (int64_t j = 0; j < kept; ++j) {
    cum += double(w(pi.at(j)));
    if (cum > target) return pi.at(j);
  }
  return pi.at(kept - 1);
}

}  // namespace

Result<void> sample(ThreadPool& pool, CpuScratch& scratch, Tensor logits, const SampleBatch& batch,
                    const SampleOutput& out) {
  const char* op = "sample";
  PHOTON_TRY(expect_f32(op, "logits", logits));
  const int64_t R = batch.num_rows;
  if (R < 0) return fail(Errc::invalid_argument, "sample: negative row count");
  if (R == 0) return {};
  if (logits.rank != 2 || logits.dim(0) != R || logits.dim(1) <= 0)
    return fail(Errc::shape_mismatch, "sample: logits must be f32 [R = " + std::to_string(R) + ", V], got " +
                                          shape_string(logits));
  const int64_t V = logits.dim(1);
  if (batch.params == nullptr || batch.steps == nullptr || out.token_ids == nullptr)
    return fail(Errc::invalid_argument, "sample: params, steps and token_ids are required");
  if (batch.max_logprobs < 0) return fail(Errc::invalid_argument, "sample: max_logprobs must be >= 0");
  if (batch.max_logprobs > 0 && (out.top_ids == nullptr || out.top_logprobs == nullptr))
    return fail(Errc::invalid_argument, "sample: max_logprobs > 0 needs top_ids and top_logprobs");
  const bool has_history = batch.history_offsets != nullptr;
  if (has_history && (batch.history_tokens == nullptr || batch.history_output_counts == nullptr) &&
      batch.history_offsets[R] > batch.history_offsets[0])
    return fail(Errc::invalid_argument, "sample: history_offsets without history_tokens or counts");
  const float* all = logits.as<const float>();
  for (int64_t r = 0; r < R; ++r) {
    PHOTON_TRY(check_params(r, batch.params[r], batch.max_logprobs, V));
    const float* l = all + r * V;
    for (int64_t i = 0; i < V; ++i)
      if (std::isnan(l[i]) || l[i] == std::numeric_limits<float>::infinity())
        return fail(Errc::invalid_argument, row_str(r) + "logit of token " + std::to_string(i) + " is " +
                                                (std::isnan(l[i]) ? "NaN" : "+inf"));
    if (has_history) {
      const int32_t h0 = batch.history_offsets[r], h1 = batch.history_offsets[r + 1];
      if (h0 < 0 || h1 < h0) return fail(Errc::invalid_argument, row_str(r) + "history_offsets not increasing");
      for (int32_t h = h0; h < h1; ++h) {
        if (batch.history_tokens[h] < 0 || batch.history_tokens[h] >= V)
          return fail(Errc::out_of_range, row_str(r) + "history token " + std::to_string(batch.history_tokens[h]) +
                                              " outside the vocabulary of " + std::to_string(V));
        if (batch.history_output_counts[h] < 0)
          return fail(Errc::invalid_argument, row_str(r) + "negative history count");
      }
    }
  }

  scratch.sample_ids.reserve(pool.max_concurrency(), V);
  scratch.sample_z.reserve(pool.max_concurrency(), V);
  // Rows are independent; the first failing row's error is reported.
  std::vector<Result<void>> row_results(static_cast<size_t>(R));
  pool.parallel_for_indexed(
      0, R,
      [&](int32_t worker, int64_t begin, int64_t end) {
        int32_t* ids = scratch.sample_ids.of(worker);
        float* z = scratch.sample_z.of(worker);
        for (int64_t r = begin; r < end; ++r) {
          const int32_t h0 = has_history ? batch.history_offsets[r] : 0;
          const int32_t h1 = has_history ? batch.history_offsets[r + 1] : 0;
          const RowInput in{r,
                            all + r * V,
                            z,
                            V,
                            batch.params[r],
                            batch.steps[r],
                            h1 > h0 ? batch.history_tokens + h0 : nullptr,
                            h1 > h0 ? batch.history_output_counts + h0 : nullptr,
                            h1 - h0};
          const int32_t M = batch.max_logprobs;
          const double lse = raw_logprobs(in, ids, M > 0 ? out.top_ids + r * M : nullptr,
                                          M > 0 ? out.top_logprobs + r * M : nullptr, M);
          apply_penalties(in);
          Result<int32_t> token = choose(in, ids);
          if (!token.has_value()) {
            row_results[size_t(r)] = Unexpected{token.error()};
            continue;
          }
          out.token_ids[r] = *token;
          if (out.logprobs != nullptr) out.logprobs[r] = float(double(in.l[*token]) - lse);
        }
      },
      1);
  for (auto& rr : row_results) PHOTON_TRY(rr);
  return {};
}

}  // namespace photon::cpu
