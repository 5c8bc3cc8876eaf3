#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "core/cpu_backend.hpp"
#include "core/cpu_test_util.hpp"
#include "core/gumbel.hpp"
#include "core/philox.hpp"
#include "core/sampling.hpp"

using namespace photon;
using namespace photon::test;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// One row's penalty history: (token, output count), count 0 = prompt only.
using History = std::vector<std::pair<int32_t, int32_t>>;

// Rows with their own params, steps and histories; runs the backend sampler.
struct Batch {
  std::vector<float> logits;  // [R, V]
  int64_t V = 0;
  std::vector<SamplingParams> params;
  std::vector<uint64_t> steps;
  std::vector<History> histories;

  void add(const std::vector<float>& row, const SamplingParams& p, uint64_t step, History h = {}) {
    REQUIRE((V == 0 || V == int64_t(row.size())));
    V = int64_t(row.size());
    logits.insert(logits.end(), row.begin(), row.end());
    params.push_back(p);
    steps.push_back(step);
    histories.push_back(std::move(h));
  }
  int64_t rows() const { return int64_t(params.size()); }

  struct Out {
    std::vector<int32_t> tokens;
    std::vector<float> logprobs;
    std::vector<int32_t> top_ids;
    std::vector<float> top_logprobs;
  };
  Result<Out> run(Backend& be, int32_t max_logprobs = 0) const {
    std::vector<int32_t> offsets = {0}, tokens, counts;
    for (const History& h : histories) {
      for (auto [t, c] : h) {
        tokens.push_back(t);
        counts.push_back(c);
      }
      offsets.push_back(int32_t(tokens.size()));
    }
    const int64_t R = rows();
    SampleBatch b;
    b.num_rows = int32_t(R);
    b.params = params.data();
    b.steps = steps.data();
    b.history_offsets = offsets.data();
    b.history_tokens = tokens.data();
    b.history_output_counts = counts.data();
    b.max_logprobs = max_logprobs;
    Out o;
    o.tokens.assign(size_t(R), -7);
    o.logprobs.assign(size_t(R), NAN);
    o.top_ids.assign(size_t(R * max_logprobs) + 1, -7);
    o.top_logprobs.assign(size_t(R * max_logprobs) + 1, NAN);
    SampleOutput so{o.tokens.data(), o.logprobs.data(), o.top_ids.data(), o.top_logprobs.data()};
    std::vector<float> scratch = logits;
    auto r = be.sample(Tensor::of(scratch.data(), DType::f32, {R, V}), b, so);
    if (!r.has_value()) return Unexpected{r.error()};
    return o;
  }
};

// The exact distribution docs/sampling.md defines, computed independently
// (full sort, double probabilities): the probability of each token.
std::vector<double> reference_distribution(std::vector<float> l, const SamplingParams& p, const History& h) {
  const size_t V = l.size();
  for (auto [t, c] : h) {
    float& x = l[size_t(t)];
    if (p.repetition_penalty != 1.0f) x = x > 0 ? x / p.repetition_penalty : x * p.repetition_penalty;
    if (c > 0) {
      x = x - p.frequency_penalty * float(c);
      x = x - p.presence_penalty;
    }
  }
  std::vector<double> prob(V, 0.0);
  if (p.temperature == 0.0f) {
    prob[size_t(std::max_element(l.begin(), l.end()) - l.begin())] = 1.0;  // first maximum = lowest id
    return prob;
  }
  std::vector<float> z(V);
  for (size_t i = 0; i < V; ++i) z[i] = l[i] / p.temperature;
  std::vector<int32_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return z[size_t(a)] > z[size_t(b)] || (z[size_t(a)] == z[size_t(b)] && a < b);
  });
  const double m = z[size_t(order[0])];
  std::vector<double> w(V);
  for (size_t i = 0; i < V; ++i) w[i] = std::exp(double(z[i]) - m);
  size_t kept = V;
  if (p.top_k > 0) kept = std::min(kept, size_t(p.top_k));
  if (p.top_p < 1.0f) {
    double mass = 0, cum = 0;
    for (size_t j = 0; j < kept; ++j) mass += w[size_t(order[j])];
    size_t j = 0;
    while (j < kept && cum < double(p.top_p) * mass) cum += w[size_t(order[j++])];
    kept = j;
  }
  size_t j = 0;
  while (j < kept && w[size_t(order[j])] >= double(p.min_p)) ++j;
  kept = j;
  double total = 0;
  for (size_t i = 0; i < kept; ++i) total += w[size_t(order[i])];
  for (size_t i = 0; i < kept; ++i) prob[size_t(order[i])] = w[size_t(order[i])] / total;
  return prob;
}

// Chi-square upper critical value for `df` degrees of freedom at p = 1e-6
// (Wilson-Hilferty approximation; z = 4.753).
double chi2_critical(int df) {
  const double k = df, z = 4.753;
  const double a = 1.0 - 2.0 / (9.0 * k) + z * std::sqrt(2.0 / (9.0 * k));
  return k * a * a * a;
}

// Pearson chi-square of counts against probabilities; bins with an expected
// count below 5 are pooled. Tokens of probability 0 must never be drawn.
struct ChiSquare {
  double stat = 0;
  int df = 0;
  int64_t impossible_draws = 0;
};
ChiSquare chi_square(const std::vector<int64_t>& counts, const std::vector<double>& prob, int64_t n) {
  ChiSquare c;
  double pooled_exp = 0, pooled_obs = 0;
  int bins = 0;
  for (size_t i = 0; i < prob.size(); ++i) {
    if (prob[i] == 0.0) {
      c.impossible_draws += counts[i];
      continue;
    }
    const double e = prob[i] * double(n);
    if (e < 5.0) {
      pooled_exp += e;
      pooled_obs += double(counts[i]);
      continue;
    }
    c.stat += (double(counts[i]) - e) * (double(counts[i]) - e) / e;
    ++bins;
  }
  if (pooled_exp > 0) {
    c.stat += (pooled_obs - pooled_exp) * (pooled_obs - pooled_exp) / pooled_exp;
    ++bins;
  }
  c.df = std::max(1, bins - 1);
  return c;
}

// Draws n tokens of one row (steps 0..n-1, in batches of 256 rows) and counts them.
std::vector<int64_t> draw_counts(Backend& be, const std::vector<float>& row, const SamplingParams& p, const History& h,
                                 int64_t n) {
  std::vector<int64_t> counts(row.size(), 0);
  for (int64_t s0 = 0; s0 < n; s0 += 256) {
    Batch b;
    for (int64_t s = s0; s < std::min(n, s0 + 256); ++s) b.add(row, p, uint64_t(s), h);
    auto out = b.run(be);
    REQUIRE(out.has_value());
    for (int32_t t : out->tokens) ++counts[size_t(t)];
  }
  return counts;
}

std::vector<float> normal_logits(std::mt19937& rng, size_t V, float sd) {
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<float> v(V);
  for (float& x : v) x = d(rng);
  return v;
}

SamplingParams params(float temperature, int32_t top_k = 0, float top_p = 1.0f, float min_p = 0.0f, uint64_t seed = 1) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.seed = seed;
  return p;
}

}  // namespace

TEST_CASE("greedy sampling: argmax of the penalized logits, ties to the lowest id", "[core]") {
  auto be = cpu_backend(0);
  Batch b;
  b.add({0.5f, 2.0f, -1.0f, 2.0f, 2.0f}, params(0.0f), 0);       // tie between 1, 3, 4 -> 1
  b.add({3.0f, 3.0f, 3.0f, 3.0f, 3.0f}, params(0.0f), 9);          // all equal -> 0
  b.add({-kInf, -kInf, 1.0f, -kInf, -kInf}, params(0.0f), 0);      // masked tokens
  SamplingParams rep = params(0.0f);
  rep.repetition_penalty = 2.0f;
  b.add({4.0f, 3.0f, -1.0f, -kInf, -kInf}, rep, 0, {{0, 0}});      // 4 / 2 = 2 < 3 -> 1
  SamplingParams pres = params(0.0f);
  pres.presence_penalty = 0.5f;
  pres.frequency_penalty = 0.25f;
  b.add({1.0f, 0.0f, 0.2f, -kInf, -kInf}, pres, 0, {{0, 2}, {2, 0}});  // 1 - 0.5 - 0.5 = 0 < 0.2 -> 2
  auto out = b.run(*be);
  REQUIRE(out.has_value());
  CHECK(out->tokens == std::vector<int32_t>{1, 0, 2, 1, 2});
}

TEST_CASE("seeded sampling: the same seed and step give the same token wherever the row sits", "[core]") {
  std::mt19937 rng(41);
  const size_t V = 301;
  std::vector<std::vector<float>> rows;
  std::vector<SamplingParams> ps;
  for (int i = 0; i < 6; ++i) {
    rows.push_back(normal_logits(rng, V, 2.0f));
    SamplingParams p = params(0.5f + 0.3f * float(i), i % 3 == 0 ? 0 : 20 + i, i % 2 ? 0.9f : 1.0f,
                              i == 4 ? 0.05f : 0.0f, 1000 + uint64_t(i));
    p.repetition_penalty = i == 5 ? 1.2f : 1.0f;
    p.num_logprobs = i % 4;
    ps.push_back(p);
  }
  const History hist = {{3, 0}, {17, 2}};
  // Alone, one row per call, on a single thread.
  std::vector<Batch::Out> alone;
  auto be0 = cpu_backend(0);
  for (int i = 0; i < 6; ++i) {
    Batch b;
    b.add(rows[size_t(i)], ps[size_t(i)], 77 + uint64_t(i), hist);
    auto o = b.run(*be0, 4);
    REQUIRE(o.has_value());
    alone.push_back(*o);
  }
  // Together, in shuffled orders, with extra rows around them, on 3 threads.
  auto be3 = cpu_backend(3);
  std::vector<int> perm = {0, 1, 2, 3, 4, 5};
  for (int rep = 0; rep < 5; ++rep) {
    std::shuffle(perm.begin(), perm.end(), rng);
    Batch b;
    std::vector<int64_t> where(6);
    for (int i : perm) {
      b.add(normal_logits(rng, V, 1.0f), params(1.0f, 0, 1.0f, 0.0f, 5), uint64_t(rep));  // a neighbour
      where[size_t(i)] = b.rows();
      b.add(rows[size_t(i)], ps[size_t(i)], 77 + uint64_t(i), hist);
    }
    auto o = b.run(*be3, 4);
    REQUIRE(o.has_value());
    for (int i = 0; i < 6; ++i) {
      const size_t r = size_t(where[size_t(i)]);
      CHECK(o->tokens[r] == alone[size_t(i)].tokens[0]);
      CHECK(o->logprobs[r] == alone[size_t(i)].logprobs[0]);
      for (size_t j = 0; j < 4; ++j) {
        CHECK(o->top_ids[r * 4 + j] == alone[size_t(i)].top_ids[j]);
        CHECK(o->top_logprobs[r * 4 + j] == alone[size_t(i)].top_logprobs[j]);
      }
    }
  }
}

// docs/sampling.md, section 5, Gumbel-max: u_i from Philox with counter {step, i / 4, 1}, output
// i mod 4, u = ((x >> 9) + 1/2) 2^-23; the noise here in double with the standard library's log.
double reference_gumbel(uint64_t seed, uint64_t step, uint32_t id) {
  const Philox4x32 r = philox4x32_10(Philox4x32{{uint32_t(step), uint32_t(step >> 32), id / 4, 1u}},
                                     uint32_t(seed), uint32_t(seed >> 32));
  const double u = (double(r.v[id % 4] >> 9) + 0.5) * std::ldexp(1.0, -23);
  return -std::log(-std::log(u));
}

TEST_CASE("seeded sampling draws by docs/sampling.md section 5 (Gumbel-max, or the inverse CDF along pi), large vocabularies", "[core]") {
  // Flat logits over a large vocabulary make the kept set long, so the lazily
  // sorted order is walked far; every draw must equal the reference's: the
  // kept id with the largest z + G (noise computed here from the spec), or
  // the inverse CDF at Philox's u along pi.
  std::mt19937 rng(42);
  auto be = cpu_backend(3);
  const size_t V = 5003;
  for (const SamplingParams& base : {params(1.0f), params(2.0f, 0, 0.97f), params(1.5f, 2500),
                                     params(1.0f, 0, 1.0f, 0.3f), params(0.7f, 4000, 0.9f, 0.01f),
                                     params(0.8f, int32_t(V), 1.0f, 0.02f)}) {
    const auto row = normal_logits(rng, V, 0.5f);
    const auto prob = reference_distribution(row, base, {});
    std::vector<int32_t> order(V);
    std::iota(order.begin(), order.end(), 0);
    std::vector<float> z(V);
    for (size_t i = 0; i < V; ++i) z[i] = row[i] / base.temperature;
    const bool gumbel = (base.top_k == 0 || size_t(base.top_k) >= V) && base.top_p >= 1.0f;
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return z[size_t(a)] > z[size_t(b)] || (z[size_t(a)] == z[size_t(b)] && a < b);
    });
    Batch b;
    for (uint64_t step = 0; step < 200; ++step) b.add(row, base, step);
    auto out = b.run(*be);
    REQUIRE(out.has_value());
    int64_t mismatches = 0, near_ties = 0;
    for (uint64_t step = 0; step < 200; ++step) {
      int32_t want = -1;
      if (gumbel) {
        double best = -INFINITY, second = -INFINITY;
        for (size_t i = 0; i < V; ++i) {
          if (prob[i] == 0.0) continue;
          const double score = double(z[i]) + reference_gumbel(base.seed, step, uint32_t(i));
          if (score > best) {
            second = best;
            best = score;
            want = int32_t(i);
          } else {
            second = std::max(second, score);
          }
        }
        // photon's float noise (gumbel.hpp, the same bits on every backend and CPU path) picks exactly:
        int32_t exact = -1;
        float exact_score = -INFINITY;
        for (size_t i = 0; i < V; ++i) {
          if (prob[i] == 0.0) continue;
          const float score = z[i] + gumbel_noise(base.seed, step, uint32_t(i));
          if (exact < 0 || score > exact_score) {
            exact = int32_t(i);
            exact_score = score;
          }
        }
        CHECK(out->tokens[step] == exact);
        if (best - second < 1e-5) {  // the double-precision reference may order a near tie either way
          ++near_ties;
          continue;
        }
      } else {
        const double u = philox_uniform(base.seed, step);
        double cum = 0;
        for (int32_t id : order) {
          if (prob[size_t(id)] == 0.0) continue;
          want = id;
          cum += prob[size_t(id)];
          if (cum > u) break;
        }
      }
      mismatches += out->tokens[step] != want;
    }
    INFO("temperature " << base.temperature << ", top-k " << base.top_k << ", top-p " << base.top_p << ", min-p "
                        << base.min_p);
    CHECK(mismatches == 0);
    CHECK(near_ties <= 2);
  }
}

TEST_CASE("Gumbel-max on peaked logits: skipping the noise of hopeless ids never changes the token", "[core]") {
  // Most ids lie more than 20 below the largest z here, so the sampler skips their noise
  // (gumbel_skip_below); the reference scores every kept id.
  std::mt19937 rng(44);
  auto be = cpu_backend(2);
  const size_t V = 6007;
  for (const SamplingParams& base : {params(1.0f), params(0.5f), params(1.0f, 0, 1.0f, 1e-4f), params(0.8f, int32_t(V))}) {
    auto row = normal_logits(rng, V, 6.0f);
    std::uniform_int_distribution<size_t> pick(0, V - 1);
    for (int k = 0; k < 12; ++k) row[pick(rng)] = 28.0f + float(k % 4);
    Batch b;
    for (uint64_t step = 0; step < 300; ++step) b.add(row, base, step);
    auto out = b.run(*be);
    REQUIRE(out.has_value());
    const auto prob = reference_distribution(row, base, {});
    int64_t skippable = 0;
    for (size_t i = 0; i < V; ++i) skippable += double(row[i]) / base.temperature < 31.0 / base.temperature - 20.0;
    CHECK(skippable > int64_t(V) / 2);  // the case exercises the skip
    int64_t mismatches = 0;
    for (uint64_t step = 0; step < 300; ++step) {
      double best = -INFINITY;
      int32_t want = -1;
      for (size_t i = 0; i < V; ++i) {
        if (prob[i] == 0.0) continue;
        const double score = double(row[i] / base.temperature) + reference_gumbel(base.seed, step, uint32_t(i));
        if (score > best) {
          best = score;
          want = int32_t(i);
        }
      }
      mismatches += out->tokens[step] != want;
    }
    INFO("temperature " << base.temperature << ", top-k " << base.top_k << ", min-p " << base.min_p);
    CHECK(mismatches == 0);
  }
}

TEST_CASE("photon's Gumbel noise: its logarithm within 2.5e-7 of the standard library's, G in its stated range", "[core]") {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  for (int k = 0; k < 200000; ++k) {
    // Positive normal floats across every exponent.
    const uint32_t b = (bits(rng) & 0x007fffffu) | (uint32_t(1 + k % 254) << 23);
    float x;
    std::memcpy(&x, &b, 4);
    const double want = std::log(double(x));
    const float got = gumbel_log(x);
    INFO("x " << x);
    CHECK(std::fabs(double(got) - want) <= 2.5e-7 * std::fabs(want) + 1e-30);
  }
  for (uint32_t x : {0u, 1u, 511u, 512u, 0x80000000u, 0xfffffdffu, 0xffffffffu}) {
    const double u = (double(x >> 9) + 0.5) * std::ldexp(1.0, -23);
    CHECK(gumbel_from_bits(x) == Approx(-std::log(-std::log(u))).epsilon(1e-6));
    CHECK(gumbel_from_bits(x) >= -2.85f);
    CHECK(gumbel_from_bits(x) <= kGumbelMax);
  }
  double sum = 0;
  for (uint32_t i = 0; i < 400000; ++i) sum += gumbel_noise(99, 3, i);
  CHECK(sum / 400000 == Approx(0.5772156649).margin(0.006));  // Euler's constant; sd 1.28 / sqrt(n) = 0.002
}

TEST_CASE("each sampling transform matches its exact distribution (chi-square)", "[core]") {
  std::mt19937 rng(43);
  auto be = cpu_backend(3);
  const int64_t n = 20000;
  struct Case {
    const char* name;
    SamplingParams p;
    History hist;
  };
  SamplingParams pen = params(1.0f, 0, 1.0f, 0.0f, 9);
  pen.repetition_penalty = 1.6f;
  pen.presence_penalty = 0.7f;
  pen.frequency_penalty = 0.4f;
  const std::vector<Case> cases = {
      {"temperature 1", params(1.0f, 0, 1.0f, 0.0f, 2), {}},
      {"temperature 0.6", params(0.6f, 0, 1.0f, 0.0f, 3), {}},
      {"temperature 1.7", params(1.7f, 0, 1.0f, 0.0f, 4), {}},
      {"top-k 4", params(1.0f, 4, 1.0f, 0.0f, 5), {}},
      {"top-p 0.8", params(1.0f, 0, 0.8f, 0.0f, 6), {}},
      {"min-p 0.1", params(1.0f, 0, 1.0f, 0.1f, 7), {}},
      {"top-k 7, top-p 0.9, min-p 0.05, temperature 1.3", params(1.3f, 7, 0.9f, 0.05f, 8), {}},
      {"repetition, presence, frequency penalties", pen, {{0, 0}, {1, 1}, {2, 3}, {5, 0}, {8, 2}}},
  };
  const auto row = normal_logits(rng, 13, 1.5f);
  for (const Case& c : cases) {
    INFO(c.name);
    const auto prob = reference_distribution(row, c.p, c.hist);
    const auto counts = draw_counts(*be, row, c.p, c.hist, n);
    const ChiSquare x = chi_square(counts, prob, n);
    CHECK(x.impossible_draws == 0);
    CHECK(x.stat < chi2_critical(x.df));
    // The test has power: the plain temperature-1 distribution is rejected for
    // every case whose transform changes it.
    if (c.p.top_k > 0 || c.p.top_p < 1.0f || c.p.min_p > 0.0f || c.p.temperature != 1.0f || !c.hist.empty()) {
      const ChiSquare plain = chi_square(counts, reference_distribution(row, params(1.0f), {}), n);
      CHECK((plain.impossible_draws > 0 || plain.stat > chi2_critical(plain.df)));
    }
  }
}

TEST_CASE("logprobs are the log-softmax of the raw logits, chosen token and top-n", "[core]") {
  auto be = cpu_backend(1);
  const std::vector<float> row = {1.0f, 3.0f, -2.0f, 3.0f, 0.5f, -kInf, 2.0f};
  double lse = 0;
  for (float x : row) lse += std::exp(double(x));
  lse = std::log(lse);
  SamplingParams p = params(0.0f);
  p.repetition_penalty = 3.0f;  // changes the choice, not the reported logprobs
  p.num_logprobs = 3;
  SamplingParams q = params(0.8f, 2, 1.0f, 0.0f, 3);
  q.num_logprobs = 1;
  Batch b;
  b.add(row, p, 0, {{1, 1}, {3, 0}});  // 3 / 3 = 1 < 2 -> token 6
  b.add(row, q, 5);
  auto out = b.run(*be, 4);
  REQUIRE(out.has_value());
  CHECK(out->tokens[0] == 6);
  CHECK(out->logprobs[0] == Approx(2.0 - lse).margin(1e-6));
  CHECK(std::vector<int32_t>(out->top_ids.begin(), out->top_ids.begin() + 4) == std::vector<int32_t>{1, 3, 6, -1});
  CHECK(out->top_logprobs[0] == Approx(3.0 - lse).margin(1e-6));
  CHECK(out->top_logprobs[1] == Approx(3.0 - lse).margin(1e-6));
  CHECK(out->top_logprobs[2] == Approx(2.0 - lse).margin(1e-6));
  CHECK(out->top_logprobs[3] == -kInf);
  CHECK((out->tokens[1] == 1 || out->tokens[1] == 3));  // top-k 2 keeps the two tied maxima
  CHECK(out->logprobs[1] == Approx(3.0 - lse).margin(1e-6));
  CHECK(out->top_ids[4] == 1);
  CHECK(out->top_ids[5] == -1);
}

TEST_CASE("sample rejects bad parameters and logits with a message naming the row", "[core]") {
  auto be = cpu_backend(0);
  const std::vector<float> row = {0.1f, 0.2f, 0.3f};
  auto fails = [&](const SamplingParams& p, std::vector<float> r, History h, Errc code, int32_t max_lp = 0) {
    Batch b;
    b.add(row, params(1.0f), 0);
    b.add(r, p, 0, std::move(h));
    auto out = b.run(*be, max_lp);
    REQUIRE_FALSE(out.has_value());
    CHECK(out.error().code == code);
    CHECK(out.error().message.find("row 1") != std::string::npos);
  };
  fails(params(-1.0f), row, {}, Errc::invalid_argument);
  fails(params(1.0f, -2), row, {}, Errc::invalid_argument);
  fails(params(1.0f, 0, 0.0f), row, {}, Errc::invalid_argument);
  fails(params(1.0f, 0, 1.0f, 1.5f), row, {}, Errc::invalid_argument);
  SamplingParams rp = params(1.0f);
  rp.repetition_penalty = 0.0f;
  fails(rp, row, {}, Errc::invalid_argument);
  SamplingParams lp = params(1.0f);
  lp.num_logprobs = 3;
  fails(lp, row, {}, Errc::invalid_argument, 2);
  fails(params(1.0f), {0.1f, NAN, 0.3f}, {}, Errc::invalid_argument);
  fails(params(1.0f), {0.1f, kInf, 0.3f}, {}, Errc::invalid_argument);
  fails(params(1.0f), {-kInf, -kInf, -kInf}, {}, Errc::invalid_argument);
  fails(params(0.25f), {0.1f, 3e38f, 0.3f}, {}, Errc::invalid_argument);  // logits / temperature overflow fp32
  fails(params(1.0f), row, {{3, 1}}, Errc::out_of_range);
}
