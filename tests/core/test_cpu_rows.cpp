#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/batch_plan.hpp"
#include "core/cpu_backend.hpp"
#include "core/cpu_test_util.hpp"

using namespace photon;
using namespace photon::test;

namespace {

std::vector<double> naive_rmsnorm(const std::vector<float>& x, const std::vector<float>& w, float eps) {
  const size_t H = w.size(), rows = x.size() / H;
  std::vector<double> out(x.size());
  for (size_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (size_t i = 0; i < H; ++i) ss += double(x[r * H + i]) * x[r * H + i];
    const double inv = 1.0 / std::sqrt(ss / double(H) + double(eps));
    for (size_t i = 0; i < H; ++i) out[r * H + i] = double(w[i]) * double(x[r * H + i]) * inv;
  }
  return out;
}

// A plan of `n` decode-like tokens with the given ids (one sequence each).
BatchPlan plan_of_ids(const std::vector<int32_t>& ids, std::vector<int32_t> logits_rows = {}) {
  BatchPlan p;
  const int32_t block = 0;
  for (int32_t id : ids) p.add_sequence(&id, 1, 0, &block, 1, 16, false);
  p.finalize();
  p.logits_rows = std::move(logits_rows);
  return p;
}

}  // namespace

TEST_CASE("cpu embed copies and widens table rows", "[core]") {
  std::mt19937 rng(21);
  const int64_t V = 37, H = 19;
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
    const HostTensor table = host_tensor(random_floats(rng, size_t(V * H)), dt, {V, H});
    const std::vector<int32_t> ids = {5, 0, 36, 5, 17, 2, 9};
    const int64_t T = int64_t(ids.size());
    for (int32_t threads : thread_counts()) {
      auto be = cpu_backend(threads);
      auto plan = be->stage_plan(plan_of_ids(ids));
      REQUIRE(plan.has_value());
      std::vector<float> out(size_t(T * H), NAN);
      REQUIRE(be->embed(view_of(out, {T, H}), Weight{table.t, {}, 0}, *plan).has_value());
      for (int64_t t = 0; t < T; ++t)
        for (int64_t i = 0; i < H; ++i) CHECK(out[size_t(t * H + i)] == table.values[size_t(ids[size_t(t)] * H + i)]);
    }
  }
}

TEST_CASE("cpu embed rejects token ids outside the vocabulary", "[core]") {
  auto be = cpu_backend(0);
  std::vector<float> table(10 * 4), out(2 * 4);
  auto plan = be->stage_plan(plan_of_ids({3, 10}));
  REQUIRE(plan.has_value());
  auto r = be->embed(view_of(out, {2, 4}), Weight{view_of(table, {10, 4}), {}, 0}, *plan);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code == Errc::out_of_range);
  CHECK(be->embed(view_of(out, {2, 4}), Weight{view_of(table, {10, 3}), {}, 0}, *plan).error().code ==
        Errc::shape_mismatch);
}

TEST_CASE("cpu rmsnorm matches a naive loop", "[core]") {
  std::mt19937 rng(22);
  const int64_t rows = 13, H = 71;
  const float eps = 1e-5f;
  for (DType dt : {DType::f32, DType::bf16}) {
    const HostTensor w = host_tensor(random_floats(rng, size_t(H), 0.5f, 1.5f), dt, {H});
    const auto x = random_floats(rng, size_t(rows * H), -3.0f, 3.0f);
    for (int32_t threads : thread_counts()) {
      auto be = cpu_backend(threads);
      std::vector<float> xin = x, out(x.size(), NAN);
      REQUIRE(be->rmsnorm(view_of(out, {rows, H}), view_of(xin, {rows, H}), w.t, eps).has_value());
      CHECK(max_abs_diff(out, naive_rmsnorm(x, w.values, eps)) <= 1e-5);
      // in place (out aliases x)
      REQUIRE(be->rmsnorm(view_of(xin, {rows, H}), view_of(xin, {rows, H}), w.t, eps).has_value());
      CHECK(xin == out);
    }
  }
}

TEST_CASE("cpu rmsnorm over heads: x of T x heads x hd rows with w of hd", "[core]") {
  std::mt19937 rng(23);
  const int64_t T = 5, heads = 3, hd = 10;
  auto w = random_floats(rng, size_t(hd));
  auto x = random_floats(rng, size_t(T * heads * hd));
  std::vector<float> out(x.size());
  auto be = cpu_backend(1);
  REQUIRE(be->rmsnorm(view_of(out, {T, heads, hd}), view_of(x, {T, heads, hd}), view_of(w, {hd}), 1e-6f).has_value());
  CHECK(max_abs_diff(out, naive_rmsnorm(x, w, 1e-6f)) <= 1e-5);
  std::vector<float> w7(7);
  CHECK(be->rmsnorm(view_of(out, {T, heads, hd}), view_of(x, {T, heads, hd}), view_of(w7, {7}), 1e-6f)
            .error()
            .code == Errc::shape_mismatch);
}

TEST_CASE("cpu silu_mul matches a naive loop", "[core]") {
  std::mt19937 rng(24);
  const int64_t T = 9, I = 53;
  auto gu = random_floats(rng, size_t(T * 2 * I), -6.0f, 6.0f);
  for (int32_t threads : thread_counts()) {
    auto be = cpu_backend(threads);
    std::vector<float> out(size_t(T * I), NAN);
    REQUIRE(be->silu_mul(view_of(out, {T, I}), view_of(gu, {T, 2 * I})).has_value());
    std::vector<double> ref(out.size());
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < I; ++i) {
        const double g = gu[size_t(t * 2 * I + i)], u = gu[size_t(t * 2 * I + I + i)];
        ref[size_t(t * I + i)] = g / (1.0 + std::exp(-g)) * u;
      }
    CHECK(max_abs_diff(out, ref) <= 1e-5);
  }
  auto be = cpu_backend(0);
  std::vector<float> out(size_t(T * I));
  CHECK(be->silu_mul(view_of(out, {T, I + 1}), view_of(gu, {T, 2 * I})).error().code == Errc::shape_mismatch);
}

TEST_CASE("cpu gather_logit_rows picks the plan's rows", "[core]") {
  std::mt19937 rng(25);
  const int64_t T = 6, H = 11;
  auto x = random_floats(rng, size_t(T * H));
  auto be = cpu_backend(3);
  auto plan = be->stage_plan(plan_of_ids({1, 2, 3, 4, 5, 6}, {5, 0, 3}));
  REQUIRE(plan.has_value());
  std::vector<float> out(3 * H);
  REQUIRE(be->gather_logit_rows(view_of(out, {3, H}), view_of(x, {T, H}), *plan).has_value());
  const int rows[] = {5, 0, 3};
  for (int r = 0; r < 3; ++r)
    for (int64_t i = 0; i < H; ++i) CHECK(out[size_t(r * H + i)] == x[size_t(rows[r] * H + i)]);
  auto bad = be->stage_plan(plan_of_ids({1, 2}, {2}));
  REQUIRE(bad.has_value());
  CHECK(be->gather_logit_rows(view_of(out, {1, H}), view_of(x, {2, H}), *bad).error().code == Errc::out_of_range);
}

TEST_CASE("cpu backend memory: allocate, copy, fill_zero", "[core]") {
  auto be = cpu_backend(0);
  CHECK(be->name() == "cpu");
  CHECK(be->weight_dtype(DType::bf16) == DType::bf16);
  CHECK(be->kv_dtype() == DType::f32);
  CHECK(be->free_memory() > 0);
  auto buf = be->allocate(37 * sizeof(float));
  REQUIRE(buf.has_value());
  CHECK(reinterpret_cast<uintptr_t>(buf->data()) % 64 == 0);
  std::vector<float> src(37), back(37);
  for (int i = 0; i < 37; ++i) src[size_t(i)] = float(i) * 0.5f;
  REQUIRE(be->copy_to_device(buf->data(), src.data(), 37 * sizeof(float)).has_value());
  REQUIRE(be->copy_to_host(back.data(), buf->data(), 37 * sizeof(float)).has_value());
  CHECK(back == src);
  REQUIRE(be->fill_zero(buf->tensor(DType::f32, {37})).has_value());
  REQUIRE(be->copy_to_host(back.data(), buf->data(), 37 * sizeof(float)).has_value());
  CHECK(back == std::vector<float>(37, 0.0f));
  CHECK(be->copy_to_host(nullptr, buf->data(), 4).error().code == Errc::invalid_argument);
  CHECK(be->synchronize().has_value());
}

TEST_CASE("cpu stage_plan keeps its own copy and rejects unfinalized plans", "[core]") {
  auto be = cpu_backend(0);
  BatchPlan p;
  const std::vector<int32_t> ids = {4, 5, 6}, blocks = {2, 0};
  p.add_sequence(ids.data(), 3, 15, blocks.data(), 2, 16, true);
  p.add_sequence(ids.data(), 1, 0, blocks.data() + 1, 1, 16, true);
  auto unfinished = be->stage_plan(p);
  REQUIRE_FALSE(unfinished.has_value());
  CHECK(unfinished.error().code == Errc::invalid_argument);
  p.finalize();
  auto v = be->stage_plan(p);
  REQUIRE(v.has_value());
  p.clear();  // the view must not depend on the plan any more
  CHECK(v->num_tokens == 4);
  CHECK(v->num_seqs == 2);
  CHECK(v->num_logits == 2);
  CHECK(v->max_query_len == 3);
  CHECK(v->max_context_len == 18);
  CHECK(v->positions[0] == 15);
  CHECK(v->slot_mapping[1] == 0);  // position 16 -> block 0, offset 0
  CHECK(v->logits_rows[1] == 3);
}
