#include "cuda/common.cuh"
#include "cuda/gemv.cuh"
#include "cuda/gemv_row.cuh"
#include "cuda/launch.cuh"

namespace photon::cuda {

namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
// 16-byte weight loads per lane per round, at most (a round's loads are all in flight before the
// lane consumes them). Early staged launches take GemvArgs::unroll (2, 4 or 8) instead: see U.
constexpr int kUnroll = 8;

// Where the loop reads x from: global memory (L1), or rows staged in shared memory by the block
// right after pdl_wait(): x itself (GemvArgs::stage_x), or x * norm_w with x's sums of squares
// (GemvArgs::norm_w). Staged rows take M * K * 2 bytes of shared memory per block, at most
// kGemvMaxStagedBytes.
enum class XRows { global, staged, normed };

// Block of kWarps warps serving kWarps / KS output columns; the KS warps of a
// column split its K range (interleaved 16-byte chunks) and meet in shared
// memory. KS > 1 when N alone gives too few warps to keep DRAM busy.
// silu: a column's warps stream its gate row, then its up row (2K weights per
// column), and finish the output in registers.
// U: the loads of one round per lane (kUnroll, or GemvArgs::unroll for the early staged
// launches). Rounds of 4 put half as many bytes in flight over the grid as rounds of 8 (~8.6 MB
// at 4 blocks per SM), still above what the H200's bandwidth needs, and measured 1.5-2% faster per
// Llama-3.2-1B token (docs/performance.md, row 78; not traced: the likely cause is that dependent
// reads, x and the kernel before's release, queue behind fewer requests). Registers are the same
// (64) and the summation order is the same for every U.
// EARLY: each lane's first round of weight loads (U chunks of its
// column's first row) is issued before pdl_wait() into the registers the loop
// uses anyway; otherwise everything is read after pdl_wait(). Earlier attempts
// at starting the weight stream early measured slower through extra registers
// (fused prologues) and L2 prefetches, and no faster through shared-memory
// copies (docs/performance.md rows 16, 18, 21 and 26; rows 51 and 54 for this
// one).
// XR == normed: x is the residual stream, normed on the fly (gemv.cuh): right
// after pdl_wait() the block stages x * norm_w (bf16) in shared memory and
// forms x's sum of squares (one barrier; the first weights are in flight
// meanwhile), the loop reads the staged row, and the epilogue scales by
// rsqrt(mean + eps). A first version read x and norm_w through L1 in the loop
// and formed the squares after it: an L2 round trip at the end of every block,
// 5% (Llama-3.2-1B) to 11% (Qwen3-8B) slower per step (docs/performance.md,
// row 57).
// XR == staged: x staged the same way, without the norm (row 58).
// A second round copied into shared memory with cp.async before pdl_wait() (32 KiB per block, so
// that a first-wave block has all its weights in flight across the wait) measured 4-5% slower
// at Llama-3.2-1B and Qwen3-8B (row 59).
// ROPE (GemvArgs::rope; M = 1, plain mode, bf16 out): block b's kCols columns are rotation pairs
// b * kCols / 2 ... (rope_column); its epilogue meets the pairs' bf16 values in shared memory and
// rope_store writes them.

// Rotation pair p of the packed qkv row (head p / (hd / 2), dimension j = p % (hd / 2)): its low
// (hi = 0: j) or high (hi = 1: j + hd / 2) column.
__device__ __forceinline__ int rope_column(int hd, int p, int hi) {
  const int half = hd / 2;
  return (p / half) * hd + p % half + hi * half;
}

// What rope_store needs besides the pair's values: the rotation's sine and cosine and the cache
// row of the token's slot (-1: no K/V write). They depend only on the step's plan (staged by a
// copy before the step's first kernel) and the model's inv_freq, so a block reads and computes
// them before pdl_wait(); read in the epilogue, they put an L2 round trip behind the block's weight
// stream at the end of every qkv block.
struct RopePair {
  float s = 0.f, c = 0.f;
  int64_t row = -1;
};
__device__ __forceinline__ RopePair rope_pair(const GemvRope& r, int p) {
  RopePair q;
  const int64_t slot = *r.slot;
  if (slot >= 0 && slot < r.num_slots)
    q.row = r.kv_block_stride > 0 ? kv_slot_row(slot, r.block_size, r.kv_block_stride) : slot;
  sincosf(float(*r.position) * r.inv_freq[p % (r.head_dim / 2)], &q.s, &q.c);
  return q;
}

// rope_qkv's work for rotation pair p of the one decode token, from the pair's bf16-rounded
// values x1 (dimension j) and x2 (j + hd / 2): q and k rotated by position * inv_freq[j] (rp), v copied.
__device__ __forceinline__ void rope_store(const GemvRope& r, int p, float x1, float x2, const RopePair& rp) {
  const int hd = r.head_dim, half = hd / 2, h = p / half, j = p % half;
  const int nq = r.num_q_heads, nkv = r.num_kv_heads;
  const int64_t row = rp.row;
  bf16* dst;
  if (h < nq) dst = r.q_out + int64_t(h) * hd;
  else if (row < 0) return;
  else if (h < nq + nkv) dst = r.k_cache + (row * nkv + (h - nq)) * hd;
  else {
    bf16* v = r.v_cache + (row * nkv + (h - nq - nkv)) * hd;
    v[j] = to_bf16(x1);
    v[j + half] = to_bf16(x2);
    return;
  }
  dst[j] = to_bf16(x1 * rp.c - x2 * rp.s);
  dst[j + half] = to_bf16(x2 * rp.c + x1 * rp.s);
}

// NORM's staging of row m of x (gemv_row::stage_normed_row): lane 0 of each warp writes the warp's
// share of x's sum of squares into `square`.
__device__ __forceinline__ void stage_normed_row(const GemvArgs& a, int m, uint4* staged, float& square) {
  const float ss = gemv_row::stage_normed_row<kThreads>(a.x + int64_t(m) * a.K, a.norm_w, a.K, staged + m * (a.K / 8));
  if ((threadIdx.x & 31) == 0) square = ss;
}

using gemv_row::chunk_accumulate;

// I8: group-wise int8 weights (GemvArgs::w8): a chunk is 16 codes of one group, dotted with the
// staged x chunks 2c and 2c + 1 and scaled by its group's scale.
template <int M, int KS, class Out, GemvMode MODE, bool EARLY, XRows XR, bool ROPE = false, int U = kUnroll,
          bool I8 = false>
__device__ __forceinline__ void gemv_body(const GemvArgs& a) {
  constexpr bool NORM = XR == XRows::normed;
  constexpr bool kStaged = XR != XRows::global;
  constexpr int kCols = kWarps / KS;
  constexpr int kStep = 32 * KS;
  constexpr bool kSilu = MODE == GemvMode::silu;
  constexpr int kRows = kSilu ? 2 : 1;  // weight rows per column: silu streams the gate row, then the up row
  constexpr int kSums = kRows * M;
  __shared__ float partial[kWarps][kSums];
  __shared__ float squares[NORM ? kWarps : 1][M];  // NORM: each warp's share of x's sums of squares
  extern __shared__ uint4 staged[];                 // kStaged: [M][K / 8] chunks of x (NORM: x * norm_w)
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int col = warp / KS, slice = warp % KS;
  static_assert(!ROPE || (M == 1 && kCols % 2 == 0 && MODE == GemvMode::plain));
  static_assert(!I8 || (kStaged && KS == 1));
  const int n = ROPE ? rope_column(a.rope.head_dim, blockIdx.x * (kCols / 2) + col / 2, col & 1)
                     : blockIdx.x * kCols + col;
  const bool active = n < a.N;
  const int chunks = a.K / (I8 ? 16 : 8);  // 16-byte weight chunks per row
  const int xchunks = a.K / 8;              // 16-byte chunks of an x row
  const uint4* w = I8 ? reinterpret_cast<const uint4*>(a.w8) + int64_t(active ? n : 0) * chunks
                      : reinterpret_cast<const uint4*>(a.w + int64_t(active ? n : 0) * a.K);
  // I8: the row's scales (the up row's are N rows further), and chunk c's group c >> gshift.
  const int groups = I8 ? a.K / a.group : 0;
  const float* scale_row = I8 ? a.scales + int64_t(active ? n : 0) * groups : nullptr;
  const int gshift = I8 ? __ffs(a.group / 16) - 1 : 0;
  const int c0 = slice * 32 + lane;

  // EARLY: the lane's first full round of row 0 (the gate row in silu mode), loaded before
  // pdl_wait() and in flight across it.
  const bool early = EARLY && active && c0 + kStep * (U - 1) < chunks;
  // ROPE: this thread's rotation pair (threads below kCols / 2), read before pdl_wait() (RopePair).
  const int rope_p = int(blockIdx.x) * (kCols / 2) + int(threadIdx.x);
  const bool rope_live = ROPE && threadIdx.x < kCols / 2 && 2 * rope_p < a.N;
  RopePair rope_rp;
  if constexpr (ROPE) {
    if (rope_live) rope_rp = rope_pair(a.rope, rope_p);
  }
  // I8: each chunk's scale is loaded with it; read when its chunk is consumed, it added an L2
  // round trip behind the weight stream to every round (docs/performance.md, row 91: -3%).
  uint4 first[U];
  float first_sc[I8 ? U : 1];
  if (early) {
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (u < a.early_chunks) {
        first[u] = __ldcs(w + c0 + kStep * u);
        if constexpr (I8) first_sc[u] = __ldg(scale_row + ((c0 + kStep * u) >> gshift));
      }
  }
  pdl_wait();
  pdl_launch_dependents();
  if (early) {  // the rest of the round (GemvArgs::early_chunks)
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (u >= a.early_chunks) {
        first[u] = __ldcs(w + c0 + kStep * u);
        if constexpr (I8) first_sc[u] = __ldg(scale_row + ((c0 + kStep * u) >> gshift));
      }
  }

  // add: the residual value this column adds to, loaded now so its latency hides under the weight
  // stream (only this column's epilogue writes it).
  Out* out = static_cast<Out*>(a.out);
  float res[M];
#pragma unroll
  for (int m = 0; m < M; ++m)
    res[m] = MODE == GemvMode::add && active && lane == 0 && slice == 0 ? to_f32(out[int64_t(m) * a.N + n]) : 0.f;

  const uint4* x = reinterpret_cast<const uint4*>(a.x);
  if constexpr (NORM) {
#pragma unroll
    for (int m = 0; m < M; ++m) stage_normed_row(a, m, staged, squares[warp][m]);
    __syncthreads();
  } else if constexpr (kStaged) {
    for (int c = threadIdx.x; c < M * xchunks; c += kThreads) staged[c] = __ldg(x + c);
    __syncthreads();
  }
  step_trace_mark(0);  // x is staged (or, read through L1, about to be)
  float acc[kSums];  // [row r][m]: r = 0 the column's (gate) row, r = 1 its up row
#pragma unroll
  for (int i = 0; i < kSums; ++i) acc[i] = 0.f;
  if (active) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const uint4* wr = w + int64_t(r) * a.N * chunks;  // silu: up row n is row N + n
      const float* sr = I8 ? scale_row + int64_t(r) * a.N * groups : nullptr;
      // sc: chunk c's scale (I8; loaded with the chunk), else unused.
      auto accumulate = [&](const uint4& wv, int c, float sc) {
        if constexpr (kStaged) {
#pragma unroll
          for (int m = 0; m < M; ++m) chunk_accumulate<I8>(acc[r * M + m], wv, staged + m * xchunks, c, sc);
        } else {
          float wf[8];
          unpack_bf16x8(wv, wf);
#pragma unroll
          for (int m = 0; m < M; ++m) {
            float xf[8];
            unpack_bf16x8(__ldg(x + int64_t(m) * xchunks + c), xf);
#pragma unroll
            for (int e = 0; e < 8; ++e) acc[r * M + m] += wf[e] * xf[e];
          }
        }
      };
      int c = c0;
      if constexpr (EARLY) {
        bool loaded = r == 0 && early;  // this round's weights are in `first` already
#pragma unroll 1
        for (; c + kStep * (U - 1) < chunks; c += kStep * U) {
          if (!loaded) {
#pragma unroll
            for (int u = 0; u < U; ++u) {
              first[u] = __ldcs(wr + c + kStep * u);
              if constexpr (I8) first_sc[u] = __ldg(sr + ((c + kStep * u) >> gshift));
            }
          }
          loaded = false;
#pragma unroll
          for (int u = 0; u < U; ++u) accumulate(first[u], c + kStep * u, I8 ? first_sc[u] : 0.f);
        }
      } else {
        for (; c + kStep * (U - 1) < chunks; c += kStep * U) {
          uint4 wv[U];
          float sv[I8 ? U : 1];
#pragma unroll
          for (int u = 0; u < U; ++u) {
            wv[u] = __ldcs(wr + c + kStep * u);
            if constexpr (I8) sv[u] = __ldg(sr + ((c + kStep * u) >> gshift));
          }
#pragma unroll
          for (int u = 0; u < U; ++u) accumulate(wv[u], c + kStep * u, I8 ? sv[u] : 0.f);
        }
      }
#pragma unroll 4
      for (; c < chunks; c += kStep) accumulate(__ldcs(wr + c), c, I8 ? __ldg(sr + (c >> gshift)) : 0.f);
    }
  }
  step_trace_mark(1);  // thread 0's weights are consumed
#pragma unroll
  for (int i = 0; i < kSums; ++i) acc[i] = warp_sum(acc[i]);
  // NORM: rsqrt(mean(x_m^2) + eps) from the warps' shares of the squares.
  auto norm_scale = [&](int m) {
    float ss = 0.f;
    if constexpr (NORM)
#pragma unroll
      for (int k = 0; k < kWarps; ++k) ss += squares[k][m];
    return NORM ? rsqrtf(ss / float(a.K) + a.eps) : 1.f;
  };
  if constexpr (ROPE) {  // every thread reaches both barriers
    __shared__ float pair_values[kCols];  // column c's bf16-rounded output
    if constexpr (KS > 1) {
      if (lane == 0) partial[warp][0] = acc[0];
      __syncthreads();
      if (slice == 0)
        for (int k = 1; k < KS; ++k) acc[0] += partial[warp + k][0];
    }
    if (lane == 0 && slice == 0) pair_values[col] = to_f32(to_bf16(acc[0] * norm_scale(0)));
    __syncthreads();
    step_trace_mark(2);  // the pairs' values are met
    if (rope_live) rope_store(a.rope, rope_p, pair_values[2 * threadIdx.x], pair_values[2 * threadIdx.x + 1], rope_rp);
    return;
  }
  if constexpr (KS > 1) {
    if (lane == 0)
#pragma unroll
      for (int i = 0; i < kSums; ++i) partial[warp][i] = acc[i];
    __syncthreads();
    if (slice != 0) return;
#pragma unroll
    for (int i = 0; i < kSums; ++i)
      for (int k = 1; k < KS; ++k) acc[i] += partial[warp + k][i];
  }
  if (lane == 0 && active) {
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const float scale = norm_scale(m);
      float v = acc[m] * scale;
      if constexpr (MODE == GemvMode::add) v += res[m];
      // silu: gate and up rounded to bf16 first, as the plain product would store them.
      if constexpr (kSilu) v = silu_times(to_f32(to_bf16(v)), to_f32(to_bf16(acc[M + m] * scale)));
      if constexpr (sizeof(Out) == 4) out[int64_t(m) * a.N + n] = v;
      else out[int64_t(m) * a.N + n] = to_bf16(v);
    }
  }
}

// x read from global memory: no minimum of blocks per SM (a minimum of 1 raises the early variants
// from 64 to 80-88 registers). Staged: at least 4 blocks per SM, so the early variants hold 64
// registers (69 unbounded with the norm: 3 blocks per SM) without spilling.
template <int M, int KS, class Out, GemvMode MODE, bool EARLY>
__global__ void __launch_bounds__(kThreads) gemv_kernel(GemvArgs a) {
  const StepTraceScope step_trace_scope(step_trace_tag(kTraceGemv, unsigned(MODE) | (EARLY ? 4u : 0u), a.N, a.K));
  gemv_body<M, KS, Out, MODE, EARLY, XRows::global>(a);
}
template <int M, int KS, class Out, GemvMode MODE, bool EARLY, XRows XR, bool ROPE = false, int U = kUnroll,
          bool I8 = false>
__global__ void __launch_bounds__(kThreads, 4) gemv_staged_kernel(GemvArgs a) {
  const StepTraceScope step_trace_scope(step_trace_tag(kTraceGemv, unsigned(MODE) | (EARLY ? 4u : 0u) | (unsigned(XR) << 3) | (ROPE ? 32u : 0u) | (I8 ? 64u : 0u), a.N, a.K));
  gemv_body<M, KS, Out, MODE, EARLY, XR, ROPE, U, I8>(a);
}

// Passes (GemvArgs::passes_grid; gemv_passes_applies: one row, a norm, plain mode, a row of a
// multiple of 64 chunks): a grid of at most passes_grid blocks; block b stages x * norm_w once and
// streams the column groups b, b + grid, ... (kWarps columns each, one warp per column). A warp's
// weight loads form a chain of tiles of P 16-byte loads per lane (4 where a row is a multiple of 128
// chunks, else 2: a column of 128 chunks is one tile of 4, bf16 K = 1024 or int8 K = 2048; of 64
// chunks one tile of 2, int8 K = 1024), tile t + 1 issued before tile t is consumed, so that P to
// 2P loads per lane stay in flight through every column's warp sum and store; tile 0 is issued
// before pdl_wait(). Per column the lane's chunk order and the warp sum are gemv_body's at KS = 1
// and rounds of 4: results bit-identical to a plain launch with one warp per column (N >= 8192).
// Why: a block of gemv_body serves 8 columns; where a column is 2 KB (Qwen3-0.6B's bf16 LM head,
// the int8 LM head at K = 2048) that is 16 KB of weights per block against x and the norm weights
// staged from L2 and a block's start and end, and the product streams at ~2.6-3.0 TB/s (rows 90, 97).
// Bytes as the plain launch, less x and norm_w re-read from L2 by every group (K * 4 per group).
// BOUND (GemvArgs::bound; I8, f32 out): the LM head screen's product (gemv.cuh): the block also
// quantizes the staged row y to int16 at one scale sx = max|y| / 32767 (qx, after staged, with each
// 16-value chunk's sum of |qx|), each 16-byte chunk of codes is dotted with its 16 x values in
// eight __dp2a (exact int32), scaled by its group's scale and summed in fp32, and the column's bound
// is formed from its scales, the chunks' |qx| sums and row_abs (each lane loads it with the
// column's tiles). Per 16 bytes of codes: 8 integer dot instructions against the float path's 16
// conversions and 16 FMAs; int8 x (__dp4a) would halve them again but its rounding (sx / 2 per
// element, at 127 steps) made the bound ~3x looser.
template <class Out, bool I8, int P, bool BOUND = false>
__global__ void __launch_bounds__(kThreads, 4) gemv_passes_kernel(GemvArgs a) {
  constexpr int kPassU = P;
  static_assert(!BOUND || I8);
  const StepTraceScope step_trace_scope(step_trace_tag(kTraceGemv, 4u | (unsigned(XRows::normed) << 3) | (I8 ? 64u : 0u) | 128u | (BOUND ? 256u : 0u), a.N, a.K));
  __shared__ float squares[kWarps];
  __shared__ float maxes[BOUND ? kWarps : 1];
  // [K / 8] chunks of y = x * norm_w; BOUND: then qx [K / 8] chunks of 8 int16, then [K / 16] f32
  // sums of |qx| over each 16 values.
  extern __shared__ uint4 staged[];
  uint4* qx = staged + a.K / 8;
  float* qabs = reinterpret_cast<float*>(qx + a.K / 8);
  const int warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31;
  const int chunks = a.K / (I8 ? 16 : 8), tiles_per_col = chunks / (32 * kPassU);
  const int groups = ceil_div(a.N, kWarps), grid = int(gridDim.x), b = int(blockIdx.x);
  const int tiles = (b < groups ? (groups - 1 - b) / grid + 1 : 0) * tiles_per_col;
  const int gshift = I8 ? __ffs(a.group / 16) - 1 : 0;
  const int row_groups = I8 ? a.K / a.group : 0;
  auto column = [&](int t) { return (b + (t / tiles_per_col) * grid) * kWarps + warp; };
  // Tile t's loads into buf (and, I8, their chunks' scales into sc; BOUND, the column's row_abs
  // into wabs).
  auto load_tile = [&](uint4 (&buf)[kPassU], float (&sc)[kPassU], float& wabs, int t) {
    const int n = column(t), nn = n < a.N ? n : 0;
    const int c0 = (t % tiles_per_col) * 32 * kPassU + lane;
    const uint4* w = I8 ? reinterpret_cast<const uint4*>(a.w8) + int64_t(nn) * chunks
                        : reinterpret_cast<const uint4*>(a.w) + int64_t(nn) * chunks;
#pragma unroll
    for (int u = 0; u < kPassU; ++u) {
      buf[u] = n < a.N ? __ldcs(w + c0 + 32 * u) : make_uint4(0u, 0u, 0u, 0u);
      if constexpr (I8) sc[u] = n < a.N ? __ldg(a.scales + int64_t(nn) * row_groups + ((c0 + 32 * u) >> gshift)) : 0.f;
    }
    if constexpr (BOUND) wabs = __ldg(a.row_abs + nn);
  };
  uint4 A[kPassU], B[kPassU];
  float sa[kPassU] = {}, sb[kPassU] = {};
  float wa = 0.f, wb = 0.f;
  if (tiles > 0) load_tile(A, sa, wa, 0);
  pdl_wait();
  pdl_launch_dependents();
  stage_normed_row(a, 0, staged, squares[warp]);
  float sx = 0.f, ymax = 0.f;  // BOUND: x's int8 scale and max |y|
  if constexpr (BOUND) {
    __syncthreads();
    float m = 0.f;
    for (int c = threadIdx.x; c < a.K / 8; c += kThreads) {
      float yf[8];
      unpack_bf16x8(staged[c], yf);
#pragma unroll
      for (int e = 0; e < 8; ++e) m = fmaxf(m, fabsf(yf[e]));
    }
    m = warp_max(m);
    if (lane == 0) maxes[warp] = m;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kWarps; ++k) ymax = fmaxf(ymax, maxes[k]);
    sx = ymax / 32767.f;
    const float inv = ymax > 0.f ? 32767.f / ymax : 0.f;
    for (int c = threadIdx.x; c < a.K / 16; c += kThreads) {
      float yf[8], yg[8];
      unpack_bf16x8(staged[2 * c], yf);
      unpack_bf16x8(staged[2 * c + 1], yg);
      uint32_t packed[8] = {0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u};
      int sum = 0;
#pragma unroll
      for (int e = 0; e < 16; ++e) {
        const int q = max(-32767, min(32767, __float2int_rn((e < 8 ? yf[e] : yg[e - 8]) * inv)));
        sum += abs(q);
        packed[e / 2] |= uint32_t(q & 0xffff) << (16 * (e % 2));
      }
      qx[2 * c] = make_uint4(packed[0], packed[1], packed[2], packed[3]);
      qx[2 * c + 1] = make_uint4(packed[4], packed[5], packed[6], packed[7]);
      qabs[c] = float(sum);
    }
  }
  __syncthreads();
  const float scale = gemv_row::norm_scale<kWarps>(squares, a.K, a.eps);
  Out* out = static_cast<Out*>(a.out);
  float acc = 0.f, err = 0.f;  // err (BOUND): sum over the column's chunks of scale * sum |qx|
  auto consume = [&](const uint4 (&buf)[kPassU], const float (&sc)[kPassU], float wabs, int t) {
    const int c0 = (t % tiles_per_col) * 32 * kPassU + lane;
#pragma unroll
    for (int u = 0; u < kPassU; ++u) {
      if constexpr (BOUND) {
        const int c = c0 + 32 * u;
        const uint4 q0 = qx[2 * c], q1 = qx[2 * c + 1];  // x values 16c .. 16c + 15, two per word
        int d = __dp2a_lo(int(q0.x), int(buf[u].x), 0);
        d = __dp2a_hi(int(q0.y), int(buf[u].x), d);
        d = __dp2a_lo(int(q0.z), int(buf[u].y), d);
        d = __dp2a_hi(int(q0.w), int(buf[u].y), d);
        d = __dp2a_lo(int(q1.x), int(buf[u].z), d);
        d = __dp2a_hi(int(q1.y), int(buf[u].z), d);
        d = __dp2a_lo(int(q1.z), int(buf[u].w), d);
        d = __dp2a_hi(int(q1.w), int(buf[u].w), d);
        acc += float(d) * sc[u];
        err += sc[u] * qabs[c];
      } else {
        chunk_accumulate<I8>(acc, buf[u], staged, c0 + 32 * u, I8 ? sc[u] : 0.f);
      }
    }
    if (t % tiles_per_col == tiles_per_col - 1) {  // the column's last tile
      acc = warp_sum(acc);
      if constexpr (BOUND) err = warp_sum(err);
      const int n = column(t);
      if (lane == 0 && n < a.N) {
        if constexpr (BOUND) {
          out[n] = acc * sx * scale;
          a.bound[n] = screen_bound(scale, sx, ymax, err, wabs);
        } else if constexpr (sizeof(Out) == 4) {
          out[n] = acc * scale;
        } else {
          out[n] = to_bf16(acc * scale);
        }
      }
      acc = 0.f;
      err = 0.f;
    }
  };
#pragma unroll 1
  for (int t = 0; t < tiles; t += 2) {
    if (t + 1 < tiles) load_tile(B, sb, wb, t + 1);
    consume(A, sa, wa, t);
    if (t + 2 < tiles) load_tile(A, sa, wa, t + 2);
    if (t + 1 < tiles) consume(B, sb, wb, t + 1);
  }
}

using GemvKernel = void (*)(GemvArgs);

// The kernel of a launch: plain (bf16 or f32 out), add or silu mode, or the RoPE epilogue.
template <int M, int KS, bool EARLY, XRows XR, int U = kUnroll, bool I8 = false>
GemvKernel pick_kernel(const GemvArgs& a) {
  if constexpr (I8) {  // x staged, one warp per column, rounds of 4 (gemv_applies, launch_m)
    if constexpr (XR == XRows::global || KS != 1 || U != 4) {
      return nullptr;
    } else {
      if (a.rope.q_out != nullptr) {
        if constexpr (XR == XRows::normed) return gemv_staged_kernel<M, 1, bf16, GemvMode::plain, EARLY, XR, true, 4, true>;
        else return nullptr;
      }
      switch (a.mode) {
        case GemvMode::add:
          if constexpr (XR == XRows::normed) return nullptr;
          else return gemv_staged_kernel<M, 1, bf16, GemvMode::add, EARLY, XR, false, 4, true>;
        case GemvMode::silu: return gemv_staged_kernel<M, 1, bf16, GemvMode::silu, EARLY, XR, false, 4, true>;
        case GemvMode::plain: break;
      }
      return a.out_f32 ? gemv_staged_kernel<M, 1, float, GemvMode::plain, EARLY, XR, false, 4, true>
                       : gemv_staged_kernel<M, 1, bf16, GemvMode::plain, EARLY, XR, false, 4, true>;
    }
  } else if constexpr (XR == XRows::global) {
    switch (a.mode) {
      case GemvMode::add: return gemv_kernel<M, KS, bf16, GemvMode::add, EARLY>;
      case GemvMode::silu: return gemv_kernel<M, KS, bf16, GemvMode::silu, EARLY>;
      case GemvMode::plain: break;
    }
    return a.out_f32 ? gemv_kernel<M, KS, float, GemvMode::plain, EARLY>
                     : gemv_kernel<M, KS, bf16, GemvMode::plain, EARLY>;
  } else {
    if (a.rope.q_out != nullptr) {  // gemv_applies: plain mode, bf16 out, a norm
      if constexpr (XR == XRows::normed && KS <= 4)
        return gemv_staged_kernel<M, KS, bf16, GemvMode::plain, EARLY, XR, true, U>;
      else return nullptr;
    }
    switch (a.mode) {
      case GemvMode::add:
        if constexpr (XR == XRows::normed) return nullptr;  // gemv_applies refuses it
        else return gemv_staged_kernel<M, KS, bf16, GemvMode::add, EARLY, XR, false, U>;
      case GemvMode::silu: return gemv_staged_kernel<M, KS, bf16, GemvMode::silu, EARLY, XR, false, U>;
      case GemvMode::plain: break;
    }
    return a.out_f32 ? gemv_staged_kernel<M, KS, float, GemvMode::plain, EARLY, XR, false, U>
                     : gemv_staged_kernel<M, KS, bf16, GemvMode::plain, EARLY, XR, false, U>;
  }
}

template <int M, int KS, bool EARLY, XRows XR>
cudaError_t launch_mkex(const GemvArgs& a, cudaStream_t stream) {
  // Early staged products: U = GemvArgs::unroll loads per lane per round (2, 4 or 8).
  GemvKernel kernel = nullptr;
  if (a.w8 != nullptr) {  // int8 weights: the I8 instantiations only
    if constexpr (KS == 1 && XR != XRows::global) kernel = pick_kernel<M, 1, EARLY, XR, 4, true>(a);
  } else if constexpr (EARLY && XR != XRows::global) {
    switch (a.unroll) {
      case 2: kernel = pick_kernel<M, KS, EARLY, XR, 2>(a); break;
      case 4: kernel = pick_kernel<M, KS, EARLY, XR, 4>(a); break;
      default: kernel = pick_kernel<M, KS, EARLY, XR>(a); break;
    }
  } else {
    kernel = pick_kernel<M, KS, EARLY, XR>(a);
  }
  if (kernel == nullptr) return cudaErrorInvalidValue;
  // Staged rows fit the default 48 KiB of shared memory (gemv_applies bounds them).
  static_assert(kGemvMaxStagedBytes <= 46 * 1024);
  const size_t smem = XR == XRows::global ? 0 : size_t(M) * size_t(a.K) * 2;
  return launch_kernel(kernel, dim3(unsigned(ceil_div(a.N, kWarps / KS))), dim3(kThreads), smem, stream, a);
}

template <int M, int KS, bool EARLY>
cudaError_t launch_mke(const GemvArgs& a, cudaStream_t stream) {
  if (a.norm_w != nullptr) return launch_mkex<M, KS, EARLY, XRows::normed>(a, stream);
  if (a.stage_x) return launch_mkex<M, KS, EARLY, XRows::staged>(a, stream);
  return launch_mkex<M, KS, EARLY, XRows::global>(a, stream);
}

// The early-weights variant holds a round across pdl_wait() in 64 registers (4 blocks per SM)
// against the plain variant's 36 (7 blocks per SM): a separate instantiation.
template <int M, int KS>
cudaError_t launch_mk(const GemvArgs& a, cudaStream_t stream) {
  return a.early_weights ? launch_mke<M, KS, true>(a, stream) : launch_mke<M, KS, false>(a, stream);
}

template <int M>
cudaError_t launch_m(const GemvArgs& a, cudaStream_t stream) {
  // About 8192 warps in flight fill an H100/H200's DRAM pipe; split K until N * KS gets there.
  int ks = a.N >= 8192 || a.K < 2048 ? 1 : a.N >= 4096 ? 2 : a.N >= 2048 ? 4 : 8;
  if (a.w8 != nullptr) ks = 1;  // int8: one warp per column (a K = 2048 row is one round of 4 per lane)
  if (a.early_weights && a.early_half_ks && ks > 1) ks /= 2;
  // Early weights load a lane's first full round only: split K no further than leaves each lane one
  // (Llama-3.2-1B's K = 2048 products: one warp per column).
  if (a.early_weights)
    while (ks > 1 && a.K / 8 < 32 * ks * kUnroll) ks /= 2;
  if (a.rope.q_out != nullptr && ks > 4) ks = 4;  // blocks of whole rotation pairs: an even column count
  switch (ks) {
    case 1: return launch_mk<M, 1>(a, stream);
    case 2: return launch_mk<M, 2>(a, stream);
    case 4: return launch_mk<M, 4>(a, stream);
    default: return launch_mk<M, 8>(a, stream);
  }
}

}  // namespace

PHOTON_STEP_TRACE_UNIT(gemv)
PHOTON_PRELOAD_UNIT(gemv, gemv_kernel<1, 1, bf16, GemvMode::plain, false>)

bool gemv_applies(const GemvArgs& a) {
  if (a.bound != nullptr && !gemv_passes_applies(a)) return false;
  if (!(a.M >= 1 && a.M <= kGemvMaxRows && a.K > 0 && a.K % 8 == 0 && a.N > 0 && is_aligned(a.x, 16) &&
        is_aligned(a.w, 16)))
    return false;
  if ((a.norm_w != nullptr || a.stage_x) && int64_t(a.M) * a.K * 2 > kGemvMaxStagedBytes) return false;
  if (a.early_chunks < 1 || a.early_chunks > kUnroll) return false;
  if (a.unroll != 2 && a.unroll != 4 && a.unroll != kUnroll) return false;
  if (a.w8 != nullptr) {
    const int32_t cpg = a.group / 16;
    if (a.scales == nullptr || a.K % 16 != 0 || a.group < 16 || a.group % 16 != 0 || (cpg & (cpg - 1)) != 0 ||
        a.K % a.group != 0 || !is_aligned(a.w8, 16) || (a.norm_w == nullptr && !a.stage_x) || a.w != nullptr)
      return false;
  } else if (a.scales != nullptr) {
    return false;
  }
  const bool norm_ok = a.norm_w == nullptr || is_aligned(a.norm_w, 16);
  if (a.rope.q_out != nullptr) {
    const GemvRope& r = a.rope;
    return a.mode == GemvMode::plain && !a.out_f32 && a.M == 1 && a.norm_w != nullptr && norm_ok &&
           r.head_dim > 0 && r.head_dim % 2 == 0 && r.num_q_heads > 0 && r.num_kv_heads > 0 &&
           int64_t(r.num_q_heads + 2 * r.num_kv_heads) * r.head_dim == a.N && r.k_cache != nullptr &&
           r.v_cache != nullptr && r.position != nullptr && r.slot != nullptr && r.inv_freq != nullptr &&
           (r.kv_block_stride == 0 || (r.block_size > 0 && r.kv_block_stride >= r.block_size));
  }
  switch (a.mode) {
    case GemvMode::plain: return norm_ok;
    case GemvMode::add: return !a.out_f32 && a.norm_w == nullptr;
    case GemvMode::silu: return !a.out_f32 && norm_ok;
  }
  return false;
}

// 16-byte chunks of a passes launch's rows.
int64_t gemv_passes_chunks(const GemvArgs& a) { return a.w8 != nullptr ? a.K / 16 : a.K / 8; }

// The passes kernel writing Out, for int8 or bf16 weights, in tiles of 4 or 2 loads per lane.
template <class Out>
GemvKernel passes_kernel(bool int8_weights, bool tiles_of_4) {
  if (int8_weights) return tiles_of_4 ? gemv_passes_kernel<Out, true, 4> : gemv_passes_kernel<Out, true, 2>;
  return tiles_of_4 ? gemv_passes_kernel<Out, false, 4> : gemv_passes_kernel<Out, false, 2>;
}

bool gemv_passes_applies(const GemvArgs& a) {
  if (a.bound != nullptr && (a.w8 == nullptr || !a.out_f32 || a.row_abs == nullptr ||
                             int64_t(a.K) * 2 > kScreenMaxStagedBytes))
    return false;
  return a.passes_grid > 0 && a.M == 1 && a.norm_w != nullptr && a.mode == GemvMode::plain &&
         a.rope.q_out == nullptr && gemv_passes_chunks(a) % 64 == 0 && int64_t(a.K) * 2 <= kGemvMaxStagedBytes;
}

Status launch_gemv(const GemvArgs& a, cudaStream_t stream) {
  if (a.bound != nullptr && !gemv_passes_applies(a))
    return bad_launch("gemv", "a screen bound needs the passes launch: one row, a norm, plain mode, int8 weights "
                              "of a multiple of 1024 per row (K <= 8192), row_abs, f32 out and passes_grid > 0");
  if (!gemv_applies(a))
    return bad_launch("gemv", "needs M = 1, K % 8 == 0, 16-byte aligned x and w (and norm weights), a bf16 output "
                              "to add into or apply SwiGLU to, no norm in add mode, and for RoPE a norm, plain mode "
                              "and N = (nq + 2 nkv) * hd with hd even (a KV block stride >= block_size)");
  static_assert(kGemvMaxRows == 1, "instantiate the kernel for every dispatched row count");
  if (gemv_passes_applies(a)) {
    const int groups = ceil_div(a.N, kWarps);
    const dim3 grid(unsigned(groups < a.passes_grid ? groups : a.passes_grid));
    const bool i8 = a.w8 != nullptr, p4 = gemv_passes_chunks(a) % 128 == 0, bound = a.bound != nullptr;
    const size_t smem = size_t(a.K) * 2 + (bound ? size_t(a.K) * 2 + size_t(a.K) / 4 : 0);
    const GemvKernel k = bound      ? (p4 ? gemv_passes_kernel<float, true, 4, true> : gemv_passes_kernel<float, true, 2, true>)
                         : a.out_f32 ? passes_kernel<float>(i8, p4)
                                     : passes_kernel<bf16>(i8, p4);
    PHOTON_CUDA_TRY(launch_kernel(k, grid, dim3(kThreads), smem, stream, a));
    return {};
  }
  PHOTON_CUDA_TRY(launch_m<1>(a, stream));
  return {};
}

}  // namespace photon::cuda
