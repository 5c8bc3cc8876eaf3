#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "core/batch_plan.hpp"
#include "core/cpu_backend.hpp"
#include "core/cpu_test_util.hpp"

using namespace photon;
using namespace photon::test;

namespace {

// One sequence of a ragged batch: `ctx` tokens in the cache after the step,
// the last `q_len` of them new in this step.
struct SeqSpec {
  int32_t ctx;
  int32_t q_len;
};

struct Cache {
  int64_t num_blocks, block_size, nkv, hd;
  std::vector<float> k, v;
  KvLayer layer() {
    return KvLayer{view_of(k, {num_blocks, block_size, nkv, hd}), view_of(v, {num_blocks, block_size, nkv, hd})};
  }
};

// A plan over `seqs` whose blocks are a shuffled subset of the pool, so block
// tables are scattered and not in order.
BatchPlan scattered_plan(const std::vector<SeqSpec>& seqs, int32_t block_size, int32_t num_blocks, std::mt19937& rng,
                         std::vector<std::vector<int32_t>>& tables) {
  std::vector<int32_t> pool(static_cast<size_t>(num_blocks));
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  size_t next = 0;
  BatchPlan plan;
  tables.clear();
  for (const SeqSpec& s : seqs) {
    std::vector<int32_t> table;
    for (int32_t b = 0; b * block_size < s.ctx; ++b) table.push_back(pool.at(next++));
    std::vector<int32_t> ids(size_t(s.q_len), 1);
    plan.add_sequence(ids.data(), s.q_len, s.ctx - s.q_len, table.data(), int32_t(table.size()), block_size, true);
    tables.push_back(table);
  }
  plan.finalize();
  REQUIRE(plan.validate(block_size, num_blocks).has_value());
  return plan;
}

void rmsnorm_ref(const double* x, const std::vector<float>& w, int64_t n, float eps, double* out) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const double inv = 1.0 / std::sqrt(ss / double(n) + double(eps));
  for (int64_t i = 0; i < n; ++i) out[i] = double(w[size_t(i)]) * x[i] * inv;
}

// Rotate-half RoPE of x[hd] at `pos`, angle computed in fp32 as transformers does.
void rope_ref(double* x, int32_t pos, const std::vector<float>& inv_freq, int64_t hd) {
  const int64_t half = hd / 2;
  for (int64_t i = 0; i < half; ++i) {
    const float angle = float(pos) * inv_freq[size_t(i)];
    const double c = std::cos(double(angle)), s = std::sin(double(angle));
    const double a = x[i], b = x[i + half];
    x[i] = a * c - b * s;
    x[i + half] = b * c + a * s;
  }
}

}  // namespace

TEST_CASE("cpu rope_qkv: q/k norm, rotate-half RoPE, K/V into scattered cache slots", "[core]") {
  std::mt19937 rng(31);
  const int64_t hd = 10, half = hd / 2, block_size = 5, num_blocks = 23;
  const float eps = 1e-6f;
  for (auto [nq, nkv] : {std::pair<int64_t, int64_t>{6, 2}, {3, 1}, {2, 2}}) {
    for (bool norms : {false, true}) {
      const std::vector<SeqSpec> seqs = {{1, 1}, {13, 13}, {31, 1}, {17, 6}, {9, 0}};
      std::vector<std::vector<int32_t>> tables;
      const BatchPlan plan = scattered_plan(seqs, int32_t(block_size), int32_t(num_blocks), rng, tables);
      const int64_t T = plan.num_tokens(), width = (nq + 2 * nkv) * hd;
      const auto qkv = random_floats(rng, size_t(T * width), -2.0f, 2.0f);
      std::vector<float> inv_freq(static_cast<size_t>(half));
      for (int64_t i = 0; i < half; ++i) inv_freq[size_t(i)] = std::pow(10000.0f, -2.0f * float(i) / float(hd));
      const auto qn = random_floats(rng, size_t(hd), 0.5f, 1.5f), kn = random_floats(rng, size_t(hd), 0.5f, 1.5f);
      const HostTensor qn_bf16 = host_tensor(qn, DType::bf16, {hd});

      for (int32_t threads : thread_counts()) {
        auto be = cpu_backend(threads);
        auto view = be->stage_plan(plan);
        REQUIRE(view.has_value());
        Cache cache{num_blocks,
                    block_size,
                    nkv,
                    hd,
                    std::vector<float>(size_t(num_blocks * block_size * nkv * hd), NAN),
                    std::vector<float>(size_t(num_blocks * block_size * nkv * hd), NAN)};
        std::vector<float> in = qkv, q_out(size_t(T * nq * hd), NAN), kn_copy = kn, freq = inv_freq;
        Tensor q_norm = norms ? qn_bf16.t : Tensor{};
        Tensor k_norm = norms ? view_of(kn_copy, {hd}) : Tensor{};
        REQUIRE(be->rope_qkv(view_of(q_out, {T, nq, hd}), view_of(in, {T, width}), *view, view_of(freq, {half}),
                             q_norm, k_norm, eps, cache.layer())
                    .has_value());
        double worst = 0;
        for (int64_t t = 0; t < T; ++t) {
          const int32_t pos = plan.positions[size_t(t)];
          const int64_t slot = plan.slot_mapping[size_t(t)];
          for (int64_t h = 0; h < nq + 2 * nkv; ++h) {
            std::vector<double> x(static_cast<size_t>(hd)), y(static_cast<size_t>(hd));
            for (int64_t i = 0; i < hd; ++i) x[size_t(i)] = qkv[size_t(t * width + h * hd + i)];
            const float* got;
            if (h < nq) {
              if (norms) rmsnorm_ref(x.data(), qn_bf16.values, hd, eps, x.data());
              rope_ref(x.data(), pos, inv_freq, hd);
              got = &q_out[size_t((t * nq + h) * hd)];
            } else if (h < nq + nkv) {
              if (norms) rmsnorm_ref(x.data(), kn, hd, eps, x.data());
              rope_ref(x.data(), pos, inv_freq, hd);
              got = &cache.k[size_t((slot * nkv + (h - nq)) * hd)];
            } else {
              got = &cache.v[size_t((slot * nkv + (h - nq - nkv)) * hd)];
            }
            for (int64_t i = 0; i < hd; ++i) worst = std::max(worst, std::fabs(double(got[i]) - x[size_t(i)]));
          }
        }
        INFO("nq " << nq << " nkv " << nkv << " norms " << norms << " threads " << threads);
        CHECK(worst <= 2e-6);
      }
    }
  }
}

TEST_CASE("cpu attention over a paged cache matches dense attention on contiguous K/V", "[core]") {
  std::mt19937 rng(32);
  const int64_t hd = 10, block_size = 5, num_blocks = 40;
  for (auto [nq, nkv] : {std::pair<int64_t, int64_t>{6, 2}, {3, 1}, {4, 4}}) {
    // prefill from 0, decode, chunk in the middle, single token, a sequence with no new tokens
    const std::vector<SeqSpec> seqs = {{37, 37}, {50, 1}, {23, 5}, {1, 1}, {8, 0}, {16, 3}};
    std::vector<std::vector<int32_t>> tables;
    const BatchPlan plan = scattered_plan(seqs, int32_t(block_size), int32_t(num_blocks), rng, tables);
    const int64_t T = plan.num_tokens();
    Cache cache{num_blocks, block_size, nkv, hd, random_floats(rng, size_t(num_blocks * block_size * nkv * hd)),
                random_floats(rng, size_t(num_blocks * block_size * nkv * hd))};
    // Dense per-sequence K/V [ctx, nkv, hd], scattered into the cache through the block tables.
    std::vector<std::vector<float>> dense_k, dense_v;
    for (size_t s = 0; s < seqs.size(); ++s) {
      dense_k.push_back(random_floats(rng, size_t(seqs[s].ctx * nkv * hd), -2.0f, 2.0f));
      dense_v.push_back(random_floats(rng, size_t(seqs[s].ctx * nkv * hd)));
      for (int32_t j = 0; j < seqs[s].ctx; ++j) {
        const int64_t slot = int64_t(tables[s][size_t(j / block_size)]) * block_size + j % block_size;
        std::copy_n(&dense_k[s][size_t(j * nkv * hd)], nkv * hd, &cache.k[size_t(slot * nkv * hd)]);
        std::copy_n(&dense_v[s][size_t(j * nkv * hd)], nkv * hd, &cache.v[size_t(slot * nkv * hd)]);
      }
    }
    auto q = random_floats(rng, size_t(T * nq * hd), -2.0f, 2.0f);
    const float scale = 1.0f / std::sqrt(float(hd));

    std::vector<double> ref(size_t(T * nq * hd));
    for (size_t s = 0; s < seqs.size(); ++s)
      for (int32_t t = plan.query_start[s]; t < plan.query_start[s + 1]; ++t) {
        const int32_t pos = plan.positions[size_t(t)];
        for (int64_t h = 0; h < nq; ++h) {
          const int64_t kvh = h / (nq / nkv);
          std::vector<double> sc(size_t(pos + 1));
          double mx = -INFINITY, sum = 0;
          for (int32_t j = 0; j <= pos; ++j) {
            double d = 0;
            for (int64_t i = 0; i < hd; ++i)
              d += double(q[size_t((t * nq + h) * hd + i)]) * dense_k[s][size_t((j * nkv + kvh) * hd + i)];
            sc[size_t(j)] = d * scale;
            mx = std::max(mx, sc[size_t(j)]);
          }
          for (double& v : sc) sum += (v = std::exp(v - mx));
          for (int64_t i = 0; i < hd; ++i) {
            double o = 0;
            for (int32_t j = 0; j <= pos; ++j) o += sc[size_t(j)] / sum * dense_v[s][size_t((j * nkv + kvh) * hd + i)];
            ref[size_t((t * nq + h) * hd + i)] = o;
          }
        }
      }

    std::vector<float> first;
    for (int32_t threads : thread_counts()) {
      auto be = cpu_backend(threads);
      auto view = be->stage_plan(plan);
      REQUIRE(view.has_value());
      std::vector<float> out(q.size(), NAN);
      REQUIRE(be->attention(view_of(out, {T, nq, hd}), view_of(q, {T, nq, hd}), cache.layer(), *view, scale)
                  .has_value());
      INFO("nq " << nq << " nkv " << nkv << " threads " << threads);
      CHECK(max_abs_diff(out, ref) <= 2e-6);
      if (first.empty()) first = out;
      else CHECK(out == first);
    }
  }
}

TEST_CASE("cpu attention and rope_qkv reject inconsistent shapes and plans", "[core]") {
  std::mt19937 rng(33);
  const int64_t hd = 4, bs = 4, nb = 3, nkv = 1, nq = 2;
  std::vector<std::vector<int32_t>> tables;
  BatchPlan plan = scattered_plan({{6, 2}}, int32_t(bs), int32_t(nb), rng, tables);
  auto be = cpu_backend(0);
  Cache cache{
      nb, bs, nkv, hd, std::vector<float>(size_t(nb * bs * nkv * hd)), std::vector<float>(size_t(nb * bs * nkv * hd))};
  std::vector<float> q(2 * nq * hd), out(2 * nq * hd), qkv(2 * (nq + 2 * nkv) * hd), freq(hd / 2);
  auto view = be->stage_plan(plan);
  REQUIRE(view.has_value());
  CHECK(be->attention(view_of(out, {2, nq, hd}), view_of(q, {2, nq, hd}), cache.layer(), *view, 0.5f).has_value());
  CHECK(be->rope_qkv(view_of(out, {2, nq, hd}), view_of(qkv, {2, (nq + 2 * nkv) * hd}), *view, view_of(freq, {hd / 2}),
                     {}, {}, 1e-6f, cache.layer())
            .has_value());
  // q with 3 heads over 2 kv heads: not a multiple
  Cache cache2{nb, bs, 2, 2, std::vector<float>(size_t(nb * bs * 2 * 2)), std::vector<float>(size_t(nb * bs * 2 * 2))};
  std::vector<float> q3(2 * 3 * 2);
  CHECK(be->attention(view_of(q3, {2, 3, 2}), view_of(q3, {2, 3, 2}), cache2.layer(), *view, 0.5f).error().code ==
        Errc::shape_mismatch);
  // wrong inv_freq length
  std::vector<float> freq3(3);
  CHECK(be->rope_qkv(view_of(out, {2, nq, hd}), view_of(qkv, {2, (nq + 2 * nkv) * hd}), *view, view_of(freq3, {3}),
                     {}, {}, 1e-6f, cache.layer())
            .error()
            .code == Errc::shape_mismatch);
  // a block id outside the pool
  StepPlanView broken = *view;
  std::vector<int32_t> bad_table(size_t(view->max_blocks_per_seq), 7);
  broken.block_tables = bad_table.data();
  CHECK(be->attention(view_of(out, {2, nq, hd}), view_of(q, {2, nq, hd}), cache.layer(), broken, 0.5f).error().code ==
        Errc::out_of_range);
  // a slot outside the cache
  std::vector<int32_t> bad_slots = {0, int32_t(nb * bs)};
  broken = *view;
  broken.slot_mapping = bad_slots.data();
  CHECK(be->rope_qkv(view_of(out, {2, nq, hd}), view_of(qkv, {2, (nq + 2 * nkv) * hd}), broken, view_of(freq, {hd / 2}),
                     {}, {}, 1e-6f, cache.layer())
            .error()
            .code == Errc::out_of_range);
  // a position at or past the context
  std::vector<int32_t> bad_pos = {4, 6};
  broken = *view;
  broken.positions = bad_pos.data();
  CHECK(be->attention(view_of(out, {2, nq, hd}), view_of(q, {2, nq, hd}), cache.layer(), broken, 0.5f).error().code ==
        Errc::out_of_range);
  // a block stride shorter than a block would overlap blocks
  KvLayer overlapping = cache.layer();
  overlapping.block_stride = bs - 1;
  CHECK(be->attention(view_of(out, {2, nq, hd}), view_of(q, {2, nq, hd}), overlapping, *view, 0.5f).error().code ==
        Errc::invalid_argument);
  CHECK(be->rope_qkv(view_of(out, {2, nq, hd}), view_of(qkv, {2, (nq + 2 * nkv) * hd}), *view, view_of(freq, {hd / 2}),
                     {}, {}, 1e-6f, overlapping)
            .error()
            .code == Errc::invalid_argument);
  // a bf16 cache is not this backend's kv dtype
  KvLayer wrong = cache.layer();
  wrong.k.dtype = DType::bf16;
  CHECK(be->attention(view_of(out, {2, nq, hd}), view_of(q, {2, nq, hd}), wrong, *view, 0.5f).error().code ==
        Errc::shape_mismatch);
}

TEST_CASE("cpu attention and rope_qkv over a layer of a block-major pool match the packed cache", "[core]") {
  // The decoder's layout (docs/kv-cache-layout.md): [num_blocks][layer][k | v][bs][nkv][hd]. Layer `layer`
  // of `L` is a strided view; writing through it must touch only its own rows, and reading it must
  // give bit for bit what the same values in a packed cache give.
  std::mt19937 rng(34);
  const int64_t hd = 8, bs = 4, nb = 12, nkv = 2, nq = 4, L = 3, width = (nq + 2 * nkv) * hd;
  const std::vector<SeqSpec> seqs = {{9, 9}, {14, 1}, {7, 3}};
  std::vector<std::vector<int32_t>> tables;
  const BatchPlan plan = scattered_plan(seqs, int32_t(bs), int32_t(nb), rng, tables);
  const int64_t T = plan.num_tokens(), row = nkv * hd, stride = 2 * L * bs;
  const auto qkv = random_floats(rng, size_t(T * width), -2.0f, 2.0f);
  std::vector<float> freq(size_t(hd / 2));
  for (int64_t i = 0; i < hd / 2; ++i) freq[size_t(i)] = std::pow(10000.0f, -2.0f * float(i) / float(hd));
  for (int64_t layer : {int64_t(0), L - 1}) {
    INFO("layer " << layer);
    auto be = cpu_backend(2);
    auto view = be->stage_plan(plan);
    REQUIRE(view.has_value());
    // Both caches start from the same random history so attention reads values rope_qkv did not write.
    Cache packed{nb, bs, nkv, hd, random_floats(rng, size_t(nb * bs * row)), random_floats(rng, size_t(nb * bs * row))};
    std::vector<float> pool(size_t(nb * stride * row), NAN);
    for (int64_t b = 0; b < nb; ++b)
      for (int64_t r = 0; r < bs; ++r) {
        const size_t src = size_t((b * bs + r) * row);
        std::copy_n(&packed.k[src], row, &pool[size_t((b * stride + 2 * layer * bs + r) * row)]);
        std::copy_n(&packed.v[src], row, &pool[size_t((b * stride + (2 * layer + 1) * bs + r) * row)]);
      }
    KvLayer strided{view_of(pool, {nb, bs, nkv, hd}), view_of(pool, {nb, bs, nkv, hd}), stride};
    strided.k.data = pool.data() + 2 * layer * bs * row;
    strided.v.data = pool.data() + (2 * layer + 1) * bs * row;

    std::vector<float> in_a = qkv, in_b = qkv, q_a(size_t(T * nq * hd)), q_b(q_a.size());
    REQUIRE(be->rope_qkv(view_of(q_a, {T, nq, hd}), view_of(in_a, {T, width}), *view, view_of(freq, {hd / 2}), {}, {},
                         1e-6f, packed.layer())
                .has_value());
    REQUIRE(be->rope_qkv(view_of(q_b, {T, nq, hd}), view_of(in_b, {T, width}), *view, view_of(freq, {hd / 2}), {}, {},
                         1e-6f, strided)
                .has_value());
    CHECK(q_a == q_b);
    // Every row of the pool equals the packed cache's row for this layer, and every other layer's rows are untouched.
    int64_t mismatched = 0, clobbered = 0;
    for (int64_t b = 0; b < nb; ++b)
      for (int64_t part = 0; part < 2 * L; ++part)
        for (int64_t r = 0; r < bs; ++r)
          for (int64_t i = 0; i < row; ++i) {
            const size_t at = size_t(((b * stride) + part * bs + r) * row + i);
            if (part / 2 == layer) {
              const std::vector<float>& src = part % 2 == 0 ? packed.k : packed.v;
              mismatched += pool[at] != src[size_t((b * bs + r) * row + i)];
            } else {
              clobbered += !std::isnan(pool[at]);
            }
          }
    CHECK(mismatched == 0);
    CHECK(clobbered == 0);

    std::vector<float> out_a(q_a.size(), NAN), out_b(q_a.size(), NAN);
    REQUIRE(be->attention(view_of(out_a, {T, nq, hd}), view_of(q_a, {T, nq, hd}), packed.layer(), *view, 0.35f)
                .has_value());
    REQUIRE(be->attention(view_of(out_b, {T, nq, hd}), view_of(q_b, {T, nq, hd}), strided, *view, 0.35f).has_value());
    CHECK(out_a == out_b);
    CHECK(std::none_of(out_b.begin(), out_b.end(), [](float x) { return std::isnan(x); }));
  }
}
