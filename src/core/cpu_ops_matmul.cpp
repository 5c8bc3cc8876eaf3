// out[M, N] = x[M, K] @ W[N, K]^T on the CPU, fp32 accumulation.
//
// Work is split into (M tile) x (block of N rows) items handed out
// dynamically: decode-shaped calls (small M) become one M tile split over N;
// prefill-shaped calls tile M so that a tile of x stays in cache while each
// weight row is widened once per tile into a per-worker f32 row and dotted
// with every x row of the tile. Each output element is one dot product in a
// fixed order, so results do not depend on the thread count.
#include <algorithm>
#include <cstring>
#include <string>

#include "core/cpu_ops.hpp"
#include "core/try.hpp"

namespace photon::cpu {
namespace {

constexpr int64_t kTileBytes = 256 * 1024;  // x rows per M tile: about this many bytes
constexpr int64_t kRowsPerItem = 16;        // weight rows per work item

// One work item: out[m0..m1, n0..n1) of out [M, N]; `row` is K floats of
// scratch for widening a weight row (unused for f32 weights).
PHOTON_CPU_CLONES void matmul_item(const Weight& W, const float* xs, int64_t m0, int64_t m1, int64_t n0, int64_t n1,
                                   int64_t N, float* row, float* o) {
  const int64_t K = W.w.dim(1);
  const bool direct = W.w.dtype == DType::f32;
  for (int64_t n = n0; n < n1; ++n) {
    const float* w = direct ? W.w.as<const float>() + n * K : row;
    if (!direct) widen_weight_row(W, n, row);
    int64_t m = m0;
    for (; m + 4 <= m1; m += 4) {
      float r[4];
      dot4(xs + m * K, xs + (m + 1) * K, xs + (m + 2) * K, xs + (m + 3) * K, w, K, r);
      for (int i = 0; i < 4; ++i) o[(m + i) * N + n] = r[i];
    }
    for (; m < m1; ++m) o[m * N + n] = dot_f32(xs + m * K, w, K);
  }
}

}  // namespace

Result<void> matmul(ThreadPool& pool, CpuScratch& scratch, Tensor out, Tensor x, const Weight& W) {
  const char* op = "matmul";
  PHOTON_TRY(check_weight(op, "W", W));
  PHOTON_TRY(expect_f32(op, "x", x));
  PHOTON_TRY(expect_f32(op, "out", out));
  const int64_t N = W.w.dim(0), K = W.w.dim(1);
  const int64_t M = x.rank >= 1 ? x.dim(0) : 0;
  if (x.rank < 1 || x.numel() != M * K || out.rank < 1 || out.dim(0) != M || out.numel() != M * N)
    return fail(Errc::shape_mismatch, "matmul: need x [M, K = " + std::to_string(K) + "] and out [M, N = " +
                                          std::to_string(N) + "], got x " + shape_string(x) + ", out " +
                                          shape_string(out));
  if (M == 0 || N == 0) return {};
  float* o = out.as<float>();
  if (K == 0) {
    std::memset(o, 0, size_t(M * N) * sizeof(float));
    return {};
  }
  const float* xs = x.as<const float>();
  const bool direct = W.w.dtype == DType::f32;  // f32 rows are used in place
  if (!direct) scratch.matmul.reserve(pool.max_concurrency(), K);

  const int64_t tile_m = std::clamp<int64_t>(kTileBytes / (K * int64_t(sizeof(float))), 4, 256);
  const int64_t m_tiles = (M + tile_m - 1) / tile_m;
  const int64_t n_blocks = (N + kRowsPerItem - 1) / kRowsPerItem;
  pool.parallel_for_indexed(
      0, m_tiles * n_blocks,
      [&](int32_t worker, int64_t begin, int64_t end) {
        float* row = direct ? nullptr : scratch.matmul.of(worker);
        for (int64_t item = begin; item < end; ++item) {
          const int64_t m0 = (item / n_blocks) * tile_m, n0 = (item % n_blocks) * kRowsPerItem;
          matmul_item(W, xs, m0, std::min(M, m0 + tile_m), n0, std::min(N, n0 + kRowsPerItem), N, row, o);
        }
      },
      1);
  return {};
}

}  // namespace photon::cpu
