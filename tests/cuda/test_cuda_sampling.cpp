// GPU sampling against the CPU sampler (docs/sampling.md): the same tokens
// for the same (logits, params, seed, step), the same logprobs, the same
// errors; and the draw's distribution by chi-square.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/philox.hpp"
#include "cuda_test_util.hpp"

using namespace photon;
using namespace photon::test;

namespace {

struct SampleRun {
  std::vector<int32_t> ids;
  std::vector<float> logprobs;
  std::vector<int32_t> top_ids;
  std::vector<float> top_logprobs;
};

struct History {
  std::vector<int32_t> offsets, tokens, counts;
};

Result<void> run_sampler(Backend& b, const std::vector<float>& logits, int64_t R, int64_t V,
                         const std::vector<SamplingParams>& params, const std::vector<uint64_t>& steps,
                         const History* hist, int32_t max_logprobs, SampleRun& out, bool chosen_logprob = true) {
  DeviceTensor l = upload(b, logits, DType::f32, {R, V});
  SampleBatch batch;
  batch.num_rows = int32_t(R);
  batch.params = params.data();
  batch.steps = steps.data();
  if (hist != nullptr) {
    batch.history_offsets = hist->offsets.data();
    batch.history_tokens = hist->tokens.data();
    batch.history_output_counts = hist->counts.data();
  }
  batch.max_logprobs = max_logprobs;
  out.ids.assign(size_t(R), -7);
  out.logprobs.assign(size_t(R), 0.f);
  out.top_ids.assign(size_t(R * max_logprobs), -7);
  out.top_logprobs.assign(size_t(R * max_logprobs), 0.f);
  SampleOutput o;
  o.token_ids = out.ids.data();
  o.logprobs = chosen_logprob ? out.logprobs.data() : nullptr;
  o.top_ids = max_logprobs > 0 ? out.top_ids.data() : nullptr;
  o.top_logprobs = max_logprobs > 0 ? out.top_logprobs.data() : nullptr;
  return b.sample(l.t, batch, o);
}

// Logits shaped like a model's: a few large values over a broad base, some ties and masked entries.
std::vector<float> model_like_logits(std::mt19937& rng, int64_t R, int64_t V) {
  std::normal_distribution<float> base(0.f, 2.f);
  std::vector<float> l(size_t(R * V));
  for (float& x : l) x = base(rng);
  std::uniform_int_distribution<int64_t> pick(0, V - 1);
  for (int64_t r = 0; r < R; ++r) {
    float* row = l.data() + r * V;
    for (int i = 0; i < 8; ++i) row[pick(rng)] = 6.f + base(rng);
    row[pick(rng)] = row[pick(rng)];  // a tie
    row[pick(rng)] = -INFINITY;       // a masked token
  }
  return l;
}

// Whether the Gumbel-max draw (docs/sampling.md, section 5) of row r may pick either a or b: their
// scores z + G (noise from the spec, in double) lie within 1e-5 of each other (the penalized logits
// may differ in the last bit between the devices), or either one's w sits within rounding of min-p.
bool near_gumbel_tie(const float* raw, int64_t V, const SamplingParams& p, uint64_t step, const History* hist,
                     int64_t r, int32_t a, int32_t b) {
  std::vector<float> l(raw, raw + V);
  if (hist != nullptr)
    for (int32_t j = hist->offsets[size_t(r)]; j < hist->offsets[size_t(r) + 1]; ++j) {
      float& x = l[size_t(hist->tokens[size_t(j)])];
      if (p.repetition_penalty != 1.f) x = x > 0 ? x / p.repetition_penalty : x * p.repetition_penalty;
      if (hist->counts[size_t(j)] > 0) {
        x = x - p.frequency_penalty * float(hist->counts[size_t(j)]);
        x = x - p.presence_penalty;
      }
    }
  float m = -INFINITY;
  for (float& x : l) m = std::max(m, x = x / p.temperature);
  auto score = [&](int32_t i) {
    const Philox4x32 x = philox4x32_10(Philox4x32{{uint32_t(step), uint32_t(step >> 32), uint32_t(i) / 4, 1u}},
                                       uint32_t(p.seed), uint32_t(p.seed >> 32));
    const double u = (double(x.v[i % 4] >> 9) + 0.5) * std::ldexp(1.0, -23);
    return double(l[size_t(i)]) - std::log(-std::log(u));
  };
  auto near_min_p = [&](int32_t i) {
    return p.min_p > 0.f && std::abs(std::exp(double(l[size_t(i)]) - m) - p.min_p) <= 1e-5 * p.min_p;
  };
  return std::abs(score(a) - score(b)) <= 1e-5 * std::max(1.0, std::abs(score(a))) || near_min_p(a) || near_min_p(b);
}

// GPU against CPU on one batch: the same tokens (a Gumbel-max draw may differ
// only at a near tie or min-p boundary), top-n ids, and logprobs within 1e-4.
void expect_same_draws(Backend& gpu, Backend& cpu, const std::vector<float>& logits, int64_t R, int64_t V,
                       const std::vector<SamplingParams>& params, const std::vector<uint64_t>& steps,
                       const History* hist, int32_t max_lp, bool chosen_logprob) {
  SampleRun g, c;
  REQUIRE(run_sampler(gpu, logits, R, V, params, steps, hist, max_lp, g, chosen_logprob).has_value());
  REQUIRE(run_sampler(cpu, logits, R, V, params, steps, hist, max_lp, c, chosen_logprob).has_value());
  int64_t boundary = 0;
  for (int64_t r = 0; r < R; ++r) {
    const SamplingParams& p = params[size_t(r)];
    CAPTURE(r, p.temperature, p.top_k, p.top_p, p.min_p, p.num_logprobs);
    if (g.ids[size_t(r)] != c.ids[size_t(r)]) {
      const bool gumbel = p.temperature > 0.f && p.top_p >= 1.f && (p.top_k == 0 || p.top_k >= V);
      CHECK(gumbel);
      CHECK(near_gumbel_tie(logits.data() + r * V, V, p, steps[size_t(r)], hist, r, g.ids[size_t(r)],
                            c.ids[size_t(r)]));
      ++boundary;
    }
    if (chosen_logprob) CHECK(g.logprobs[size_t(r)] == Approx(c.logprobs[size_t(r)]).margin(1e-4));
    for (int32_t j = 0; j < max_lp; ++j) {
      const size_t k = size_t(r * max_lp + j);
      CHECK(g.top_ids[k] == c.top_ids[k]);
      if (std::isinf(c.top_logprobs[k])) CHECK(g.top_logprobs[k] == c.top_logprobs[k]);
      else CHECK(g.top_logprobs[k] == Approx(c.top_logprobs[k]).margin(1e-4));
    }
  }
  CHECK(boundary <= std::max<int64_t>(1, R / 50));  // rare: two scores within rounding of each other
}

// The sampler's paths: greedy and temperature-only draws (Gumbel-max, with
// the log-sum-exp fused or not), min-p, top-k that keeps everything,
// penalties, and the sorted-order rules.
struct Mode {
  const char* name;
  SamplingParams p;
  bool penalties;       // gets a penalty history
  bool chosen_logprob;  // asks for the chosen token's logprob
};
std::vector<Mode> sampling_modes(int64_t V) {
  auto P = [](float t, int32_t k, float top_p, float min_p, int32_t n) {
    SamplingParams p;
    p.temperature = t;
    p.top_k = k;
    p.top_p = top_p;
    p.min_p = min_p;
    p.num_logprobs = n;
    return p;
  };
  SamplingParams pen = P(0.9f, 0, 1.f, 0.f, 1);
  pen.repetition_penalty = 1.3f;
  pen.presence_penalty = 0.4f;
  pen.frequency_penalty = 0.2f;
  SamplingParams pen_greedy = pen;
  pen_greedy.temperature = 0.f;
  return {
      {"greedy, no logprob", P(0.f, 0, 1.f, 0.f, 0), false, false},
      {"greedy, chosen logprob", P(0.f, 0, 1.f, 0.f, 0), false, true},
      {"greedy, top-5", P(0.f, 0, 1.f, 0.f, 5), false, true},
      {"temperature 1, no logprob", P(1.f, 0, 1.f, 0.f, 0), false, false},
      {"temperature 1, chosen logprob", P(1.f, 0, 1.f, 0.f, 0), false, true},
      {"temperature 1, top-1", P(1.f, 0, 1.f, 0.f, 1), false, true},
      {"temperature 0.7, top-5", P(0.7f, 0, 1.f, 0.f, 5), false, true},
      {"temperature 1.2, min-p 0.05", P(1.2f, 0, 1.f, 0.05f, 0), false, true},
      {"top-k = V keeps everything", P(1.f, int32_t(V), 1.f, 0.f, 1), false, true},
      {"penalties, temperature 0.9", pen, true, true},
      {"penalties, greedy", pen_greedy, true, true},
      {"top-k 50", P(0.8f, 50, 1.f, 0.f, 0), false, true},
      {"top-p 0.9", P(1.1f, 0, 0.9f, 0.f, 1), false, true},
      {"top-k 40, top-p 0.95, min-p 0.02", P(0.8f, 40, 0.95f, 0.02f, 5), false, true},
  };
}

// Seeds, steps and (for rows that take penalties) a history of up to 20 distinct tokens.
void fill_rows(std::mt19937& rng, int64_t V, const std::vector<const Mode*>& row_modes,
               std::vector<SamplingParams>& params, std::vector<uint64_t>& steps, History& hist) {
  std::uniform_int_distribution<int64_t> tok(0, V - 1);
  params.clear();
  steps.clear();
  hist = History{};
  hist.offsets.push_back(0);
  for (const Mode* m : row_modes) {
    SamplingParams p = m->p;
    p.seed = rng();
    params.push_back(p);
    steps.push_back(rng() % 1000);
    if (m->penalties)
      for (int i = 0; i < 20; ++i) {
        const int32_t t = int32_t(tok(rng));
        if (std::find(hist.tokens.begin() + hist.offsets.back(), hist.tokens.end(), t) != hist.tokens.end()) continue;
        hist.tokens.push_back(t);
        hist.counts.push_back(i % 3);
      }
    hist.offsets.push_back(int32_t(hist.tokens.size()));
  }
}

}  // namespace

TEST_CASE("cuda sampling: every path agrees with the CPU, vocabularies 1000..151936, 1..300 rows", "[cuda]") {
  auto gpu = cuda_backend();
  auto cpu = cpu_reference();
  std::mt19937 rng(57);
  std::vector<SamplingParams> params;
  std::vector<uint64_t> steps;
  History hist;
  for (int64_t V : {1000, 1001, 32000, 128256, 151936}) {
    const auto modes = sampling_modes(V);
    // One mode per call, 1 and 3 rows (the cluster kernel on sm_90).
    for (const Mode& m : modes)
      for (int64_t R : {1, 3}) {
        INFO(m.name << ", V " << V << ", R " << R);
        const auto logits = model_like_logits(rng, R, V);
        fill_rows(rng, V, std::vector<const Mode*>(size_t(R), &m), params, steps, hist);
        expect_same_draws(*gpu, *cpu, logits, R, V, params, steps, &hist, m.p.num_logprobs, m.chosen_logprob);
      }
    // Mixed batches around the cluster / block switch and large.
    for (int64_t R : {16, 17, 64, 300}) {
      INFO("mixed modes, V " << V << ", R " << R);
      std::vector<const Mode*> row_modes;
      for (int64_t r = 0; r < R; ++r) row_modes.push_back(&modes[size_t((r * 5 + R) % int64_t(modes.size()))]);
      const auto logits = model_like_logits(rng, R, V);
      fill_rows(rng, V, row_modes, params, steps, hist);
      expect_same_draws(*gpu, *cpu, logits, R, V, params, steps, &hist, 5, true);
    }
  }
}

TEST_CASE("cuda sampling draws the CPU sampler's tokens and logprobs", "[cuda]") {
  auto gpu = cuda_backend();
  auto cpu = cpu_reference();
  std::mt19937 rng(31);
  for (int64_t V : {1000, 151936}) {
    const int64_t R = 96;
    const int32_t max_lp = 5;
    const auto logits = model_like_logits(rng, R, V);
    std::vector<SamplingParams> params(static_cast<size_t>(R));
    std::vector<uint64_t> steps(static_cast<size_t>(R));
    History hist;
    hist.offsets.push_back(0);
    std::uniform_int_distribution<int64_t> tok(0, V - 1);
    for (int64_t r = 0; r < R; ++r) {
      SamplingParams& p = params[size_t(r)];
      switch (r % 8) {
        case 0: p.temperature = 0.f; break;
        case 1: p.temperature = 1.f; break;
        case 2: p.temperature = 0.7f; p.top_k = 50; break;
        case 3: p.temperature = 1.3f; p.top_p = 0.9f; break;
        case 4: p.temperature = 1.f; p.min_p = 0.05f; break;
        case 5: p.temperature = 0.8f; p.top_k = 40; p.top_p = 0.95f; p.min_p = 0.02f; break;
        case 6: p.temperature = 0.f; p.repetition_penalty = 1.3f; p.presence_penalty = 0.5f; p.frequency_penalty = 0.3f; break;
        case 7: p.temperature = 1.f; p.top_k = 1; break;
      }
      p.seed = rng();
      p.num_logprobs = int32_t(r % (max_lp + 1));
      steps[size_t(r)] = rng() % 1000;
      if (r % 3 == 0) {  // penalty history: prompt-only and generated tokens
        if (p.repetition_penalty == 1.f) p.repetition_penalty = 1.2f;
        p.frequency_penalty = 0.2f;
        for (int i = 0; i < 20; ++i) {
          const int32_t t = int32_t(tok(rng));
          if (std::find(hist.tokens.begin() + hist.offsets.back(), hist.tokens.end(), t) != hist.tokens.end()) continue;
          hist.tokens.push_back(t);
          hist.counts.push_back(i % 3);
        }
      }
      hist.offsets.push_back(int32_t(hist.tokens.size()));
    }
    SampleRun g, c;
    REQUIRE(run_sampler(*gpu, logits, R, V, params, steps, &hist, max_lp, g).has_value());
    REQUIRE(run_sampler(*cpu, logits, R, V, params, steps, &hist, max_lp, c).has_value());
    CAPTURE(V);
    CHECK(g.ids == c.ids);
    CHECK(g.top_ids == c.top_ids);
    for (size_t i = 0; i < g.logprobs.size(); ++i) CHECK(g.logprobs[i] == Approx(c.logprobs[i]).margin(1e-4));
    for (size_t i = 0; i < g.top_logprobs.size(); ++i) {
      if (std::isinf(c.top_logprobs[i])) CHECK(g.top_logprobs[i] == c.top_logprobs[i]);
      else CHECK(g.top_logprobs[i] == Approx(c.top_logprobs[i]).margin(1e-4));
    }
  }
}

TEST_CASE("cuda sampling: many seeded draws agree with the CPU and follow the distribution", "[cuda]") {
  auto gpu = cuda_backend();
  auto cpu = cpu_reference();
  const int64_t V = 12, R = 20000;
  std::vector<float> row = {2.f, 1.5f, 1.5f, 0.f, -1.f, 3.f, -INFINITY, 0.5f, 2.5f, -3.f, 1.f, 0.25f};
  std::vector<float> logits;
  for (int64_t r = 0; r < R; ++r) logits.insert(logits.end(), row.begin(), row.end());
  std::vector<SamplingParams> params(static_cast<size_t>(R));
  std::vector<uint64_t> steps(static_cast<size_t>(R));
  for (int64_t r = 0; r < R; ++r) {
    params[size_t(r)].seed = 1234567;
    steps[size_t(r)] = uint64_t(r);
  }
  SampleRun g, c;
  REQUIRE(run_sampler(*gpu, logits, R, V, params, steps, nullptr, 0, g).has_value());
  REQUIRE(run_sampler(*cpu, logits, R, V, params, steps, nullptr, 0, c).has_value());
  CHECK(g.ids == c.ids);
  // chi-square against softmax(row) with 10 degrees of freedom (11 finite tokens): p < 0.001 at 29.6
  double z = 0;
  for (int64_t i = 0; i < V; ++i) z += std::exp(double(row[size_t(i)]));
  std::vector<int64_t> counts(size_t(V), 0);
  for (int32_t id : g.ids) {
    REQUIRE(id >= 0);
    REQUIRE(id < V);
    ++counts[size_t(id)];
  }
  double chi2 = 0;
  for (int64_t i = 0; i < V; ++i) {
    const double e = double(R) * std::exp(double(row[size_t(i)])) / z;
    if (e > 0) chi2 += (double(counts[size_t(i)]) - e) * (double(counts[size_t(i)]) - e) / e;
    else CHECK(counts[size_t(i)] == 0);
  }
  CHECK(chi2 < 29.6);
}

TEST_CASE("cuda sampling reports bad logits and parameters like the CPU", "[cuda]") {
  auto gpu = cuda_backend();
  const int64_t V = 16;
  std::vector<float> logits(size_t(2 * V), 0.5f);
  std::vector<SamplingParams> params(2);
  std::vector<uint64_t> steps(2, 0);
  SampleRun out;
  logits[size_t(V + 3)] = NAN;
  auto r = run_sampler(*gpu, logits, 2, V, params, steps, nullptr, 0, out);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code == Errc::invalid_argument);
  CHECK(r.error().message.find("row 1") != std::string::npos);

  std::vector<float> masked(size_t(2 * V), -INFINITY);
  masked[0] = 1.f;
  r = run_sampler(*gpu, masked, 2, V, params, steps, nullptr, 0, out);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code == Errc::invalid_argument);

  std::vector<float> fine(size_t(2 * V), 0.25f);
  params[0].top_p = 0.f;
  r = run_sampler(*gpu, fine, 2, V, params, steps, nullptr, 0, out);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code == Errc::invalid_argument);
  params[0].top_p = 1.f;

  History h{{0, 1, 1}, {int32_t(V)}, {1}};
  r = run_sampler(*gpu, fine, 2, V, params, steps, &h, 0, out);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code == Errc::out_of_range);
}

// Peaked logits (most ids more than 20 below the largest z): the general kernel skips those ids'
// noise (gumbel_skip_below), as the CPU sampler does; the tokens must still be the CPU's. Rows with
// min-p, top-n logprobs or penalties, and batches past the one-pass kernel's 64 rows.
TEST_CASE("cuda sampling: peaked logits (noise skipped for hopeless ids) agree with the CPU", "[cuda]") {
  auto gpu = cuda_backend();
  auto cpu = cpu_reference();
  std::mt19937 rng(19);
  const int64_t V = 128256;
  std::normal_distribution<float> base(0.f, 6.f);
  std::uniform_int_distribution<int64_t> pick(0, V - 1);
  for (int64_t R : {3, 100}) {
    std::vector<float> logits(size_t(R * V));
    for (float& x : logits) x = base(rng);
    for (int64_t r = 0; r < R; ++r)
      for (int k = 0; k < 12; ++k) logits[size_t(r * V + pick(rng))] = 28.f + float(k % 4);
    const auto modes = sampling_modes(V);
    std::vector<const Mode*> row_modes;
    for (int64_t r = 0; r < R; ++r) row_modes.push_back(&modes[size_t(r % int64_t(modes.size()))]);
    std::vector<SamplingParams> params;
    std::vector<uint64_t> steps;
    History hist;
    fill_rows(rng, V, row_modes, params, steps, hist);
    INFO("R " << R);
    expect_same_draws(*gpu, *cpu, logits, R, V, params, steps, &hist, 5, true);
  }
}

// Batches of up to 64 greedy and Gumbel-max rows without min-p, penalties or top-n take the one-pass
// kernel (sampling_gumbel.cu): one quad of ids per thread, then chunks of 4 as the batch grows,
// vocabularies that are not a multiple of 4 (scalar loads) and smaller than one slice; with and
// without the chosen logprob, with max_logprobs > 0 (its slots filled as empty); greedy rows ignore
// top-k / min-p. Larger batches (65..300 rows) check the same draws on the general kernel.
TEST_CASE("cuda sampling: greedy and Gumbel-max batches (the one-pass kernel to 64 rows) agree with the CPU, 1..300 rows", "[cuda]") {
  auto gpu = cuda_backend();
  auto cpu = cpu_reference();
  std::mt19937 rng(91);
  auto P = [](float t, int32_t k, float min_p) {
    SamplingParams p;
    p.temperature = t;
    p.top_k = k;
    p.min_p = min_p;
    return p;
  };
  for (int64_t V : {7, 1000, 4097, 32000, 128256, 151936}) {
    const std::vector<SamplingParams> kinds = {P(0.f, 0, 0.f), P(1.f, 0, 0.f),       P(0.7f, 0, 0.f),
                                               P(0.f, 0, 0.1f), P(1.f, int32_t(V), 0.f), P(0.f, 5, 0.f)};
    for (int64_t R : {1, 2, 5, 16, 17, 33, 64, 65, 128, 256, 300}) {
      if (V > 40000 && R > 64 && R != 256) continue;  // keeps the CPU reference's time down
      for (int variant = 0; variant < 2; ++variant) {
        const bool chosen_logprob = variant == 0;
        const int32_t max_lp = variant == 0 ? 0 : 3;
        INFO("V " << V << ", R " << R << ", chosen logprob " << chosen_logprob << ", max_logprobs " << max_lp);
        const auto logits = model_like_logits(rng, R, V);
        std::vector<SamplingParams> params;
        std::vector<uint64_t> steps;
        for (int64_t r = 0; r < R; ++r) {
          SamplingParams p = kinds[size_t((r + R + variant) % int64_t(kinds.size()))];
          p.seed = rng();
          params.push_back(p);
          steps.push_back(rng() % 1000);
        }
        expect_same_draws(*gpu, *cpu, logits, R, V, params, steps, nullptr, max_lp, chosen_logprob);
      }
    }
  }
}

// The one-pass kernel's row checks, on rows that span many slices: a NaN (first, middle and last
// slice), a row of -inf, and logits / temperature past fp32; the batch fails with the row named, as
// on the CPU.
TEST_CASE("cuda sampling: the one-pass kernel reports bad rows across slices", "[cuda]") {
  auto gpu = cuda_backend();
  auto cpu = cpu_reference();
  const int64_t V = 128256, R = 3;
  std::mt19937 rng(5);
  std::vector<SamplingParams> params(static_cast<size_t>(R));
  std::vector<uint64_t> steps(static_cast<size_t>(R), 1);
  // The GPU and the CPU both refuse the batch, with the same code, the GPU naming `row`.
  auto both_refuse = [&](const std::vector<float>& logits, const std::vector<SamplingParams>& p, const char* row) {
    SampleRun g, c;
    auto rg = run_sampler(*gpu, logits, R, V, p, steps, nullptr, 0, g);
    auto rc = run_sampler(*cpu, logits, R, V, p, steps, nullptr, 0, c);
    REQUIRE_FALSE(rg.has_value());
    REQUIRE_FALSE(rc.has_value());
    CHECK(rg.error().code == rc.error().code);
    CHECK(rg.error().message.find(row) != std::string::npos);
  };
  for (int64_t bad_col : {int64_t(7), V / 2 + 3, V - 1}) {
    auto logits = model_like_logits(rng, R, V);
    logits[size_t(V + bad_col)] = NAN;
    both_refuse(logits, params, "row 1");

    logits = model_like_logits(rng, R, V);
    std::fill(logits.begin() + 2 * V, logits.end(), -INFINITY);
    both_refuse(logits, params, "row 2");

    logits = model_like_logits(rng, R, V);
    logits[size_t(bad_col)] = 3e38f;
    std::vector<SamplingParams> cold = params;
    cold[0].temperature = 0.25f;
    both_refuse(logits, cold, "row 0");
  }
}
