#include "cuda/common.cuh"
#include "cuda/decode_layers.cuh"
#include "cuda/launch.cuh"

namespace photon::cuda {

namespace {

constexpr int kConsumerWarps = 8;
constexpr int kConsumers = kConsumerWarps * 32;  // threads 0..255; the producer warp is threads 256..287
constexpr int kThreads = kConsumers + 32;
constexpr int kHeadsPerPass = 4;      // query heads an attention item serves at once (GQA > 4: more passes)
constexpr int kMaxStages = 32;
constexpr int kMinStages = 4;
constexpr int kMinStageBytes = 16384;
constexpr int kBarrierBytes = 2 * kMaxStages * 8;  // full[kMaxStages], empty[kMaxStages]
constexpr int kRedBytes = 128;                     // consumer block reductions

// Where the kernel's dynamic shared memory goes (bytes; offsets 128-aligned):
// [mbarriers][reduction scratch][x rows of this CTA, bf16][act: the phase's input vector (bf16) or the
// attention partials of the 8 warps (f32)][stages: the weight ring]
struct SmemPlan {
  int32_t xs_off = 0, act_off = 0, stage_off = 0;
  int32_t stage_bytes = 0, stages = 0, total = 0;
};

// Device code for sm_90+ only (mbarriers, bulk copies); the sm_80 pass compiles the kernel as a trap.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900

constexpr int kKeysPerSplit = 32;  // a context split holds at least this many keys (one round at hd 64)
constexpr float kLog2e = 1.4426950408889634f;

enum Phase : int { kQkv = 0, kO = 1, kGateUp = 2, kDown = 3 };

// This CTA's share of one GEMV phase's weights: units [u0, u1) of N (a unit is one row, or for
// gate_up the pair (gate row i, up row i), up rows N rows below), per_chunk units per ring stage.
struct Slice {
  const bf16* w;
  int N, K, u0, u1, per_chunk;
  bool pair;
};

__device__ __forceinline__ Slice slice_of(const DecodeLayersArgs& a, const DecodeLayerPtrs& L, int phase,
                                          int stage_bytes) {
  Slice s{};
  const int hd = a.head_dim, q_dim = a.num_q_heads * hd;
  switch (phase) {
    case kQkv: s.w = L.qkv_w, s.N = q_dim + 2 * a.num_kv_heads * hd, s.K = a.hidden; break;
    case kO: s.w = L.o_w, s.N = a.hidden, s.K = q_dim; break;
    case kGateUp: s.w = L.gate_up_w, s.N = a.intermediate, s.K = a.hidden, s.pair = true; break;
    default: s.w = L.down_w, s.N = a.hidden, s.K = a.intermediate; break;
  }
  s.u0 = int(int64_t(s.N) * blockIdx.x / gridDim.x);
  s.u1 = int(int64_t(s.N) * (blockIdx.x + 1) / gridDim.x);
  s.per_chunk = stage_bytes / (s.K * 2 * (s.pair ? 2 : 1));
  return s;
}


// ---- mbarriers and bulk copies (sm_90) ----------------------------------------------------------
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(uint64_t* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, unsigned parity) {
  unsigned done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
  } while (!done);
}
// bytes (a multiple of 16) from global src to shared dst, completing on bar's transaction count.
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, unsigned bytes, uint64_t* bar, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(
          smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(bar)), "l"(policy)
      : "memory");
}

__device__ __forceinline__ long long global_ns() {
  long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}

// ---- consumer-only synchronization ----------------------------------------------------------------
// The producer warp never joins these: barrier 1 counts the kConsumers threads only.
__device__ __forceinline__ void consumers_sync() { asm volatile("bar.sync 1, %0;" ::"n"(kConsumers) : "memory"); }

__device__ __forceinline__ float consumers_sum(float v, float* red) {
  v = warp_sum(v);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  consumers_sync();
  float t = 0.f;
#pragma unroll
  for (int w = 0; w < kConsumerWarps; ++w) t += red[w];
  consumers_sync();  // red may be reused right after
  return t;
}

__device__ __forceinline__ unsigned load_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Grid barrier of the consumers of every CTA: counter counts arrivals over the whole launch; thread
// 0 keeps the running target. Writes before it (any consumer thread; bar.sync orders them before
// thread 0's release, which is cumulative) are visible after it to loads that bypass L1 (__ldcg).
__device__ __forceinline__ void grid_sync(unsigned* counter, unsigned& target) {
  consumers_sync();
  if (threadIdx.x == 0) {
    target += gridDim.x;
    asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(counter) : "memory");
    while (load_acquire(counter) < target) {
    }
  }
  consumers_sync();
}

// ---- phase inputs ----------------------------------------------------------------------------------
// act[0, H) = bf16(x * rsqrt(mean(x^2) + eps) * w), as rmsnorm_kernel rounds it. x is read from L2
// (other CTAs wrote it before the last grid barrier).
__device__ void norm_into(bf16* act, const bf16* x, const bf16* w, int H, float eps, float* red) {
  float ss = 0.f;
  for (int i = threadIdx.x * 8; i < H; i += kConsumers * 8) {
    const uint4 u = __ldcg(reinterpret_cast<const uint4*>(x + i));
    *reinterpret_cast<uint4*>(act + i) = u;
    float v[8];
    unpack_bf16x8(u, v);
#pragma unroll
    for (int k = 0; k < 8; ++k) ss += v[k] * v[k];
  }
  const float inv = rsqrtf(consumers_sum(ss, red) / float(H) + eps);
  for (int i = threadIdx.x * 8; i < H; i += kConsumers * 8) {
    float v[8], g[8];
    load_bf16x8(act + i, v);  // this thread's own store above
    load_bf16x8(w + i, g);
#pragma unroll
    for (int k = 0; k < 8; ++k) v[k] = v[k] * inv * g[k];
    store_bf16x8(act + i, v);
  }
  consumers_sync();
}

// act[0, n) = src[0, n) (bf16, from L2).
__device__ void copy_into(bf16* act, const bf16* src, int n) {
  for (int i = threadIdx.x * 8; i < n; i += kConsumers * 8)
    *reinterpret_cast<uint4*>(act + i) = __ldcg(reinterpret_cast<const uint4*>(src + i));
  consumers_sync();
}

// Context splits of the attention phase: each holds >= kKeysPerSplit keys, and the items
// (KV head, split) fit in one wave of CTAs.
__device__ __forceinline__ int num_splits(int ctx, int nkv) {
  const int by_grid = max(1, min(kDecodeLayersMaxSplits, int(gridDim.x) / nkv));
  return max(1, min(by_grid, (ctx + kKeysPerSplit - 1) / kKeysPerSplit));
}

// act[h * hd + d] = bf16(attention output of query head h): the splits' partials merged. Two load
// rounds (every split's max and denominator, then every split's outputs), whatever S.
template <int HD>
__device__ void merge_into(bf16* act, const DecodeLayersArgs& a, int S) {
  constexpr int kStride = HD + 4;
  for (int idx = threadIdx.x; idx < a.num_q_heads * (HD / 8); idx += kConsumers) {
    const int h = idx / (HD / 8), d8 = idx % (HD / 8);
    const float* base = a.partials + int64_t(h) * kDecodeLayersMaxSplits * kStride;
    float m[kDecodeLayersMaxSplits], l[kDecodeLayersMaxSplits];
    float M = -INFINITY;
#pragma unroll
    for (int s = 0; s < kDecodeLayersMaxSplits; ++s) {
      m[s] = s < S ? __ldcg(base + s * kStride + HD) : -INFINITY;
      l[s] = s < S ? __ldcg(base + s * kStride + HD + 1) : 0.f;
    }
#pragma unroll
    for (int s = 0; s < kDecodeLayersMaxSplits; ++s) M = fmaxf(M, m[s]);
    float L = 0.f, o[8] = {};
#pragma unroll
    for (int s = 0; s < kDecodeLayersMaxSplits; ++s) {
      if (s < S && m[s] != -INFINITY) {  // a split without keys has max -inf
        const float* p = base + s * kStride + 8 * d8;
        const float4 o0 = __ldcg(reinterpret_cast<const float4*>(p));
        const float4 o1 = __ldcg(reinterpret_cast<const float4*>(p + 4));
        const float c = exp2f(m[s] - M);
        L += l[s] * c;
        o[0] += o0.x * c, o[1] += o0.y * c, o[2] += o0.z * c, o[3] += o0.w * c;
        o[4] += o1.x * c, o[5] += o1.y * c, o[6] += o1.z * c, o[7] += o1.w * c;
      }
    }
    const float inv = L > 0.f ? 1.f / L : 0.f;
#pragma unroll
    for (int e = 0; e < 8; ++e) o[e] *= inv;
    store_bf16x8(act + h * HD + 8 * d8, o);
  }
  consumers_sync();
}

// ---- attention ----------------------------------------------------------------------------------------
// Lanes are grouped by LPK = HD / 8 per key (or head); lane dl of a group holds dims [8 dl, 8 dl + 8),
// its rotation partner dims 8 (dl ^ LPK/2). A round is the kConsumerWarps * KPW keys (KPW = 32 / LPK)
// the CTA's warps take at once.
constexpr int kPrefetchRounds = 2;

// What an attention item loads before the barrier that publishes qkv: nothing of it depends on
// this step's earlier phases (the cache rows of every key but the current token's are final; the
// rotation angles depend on the position only).
template <int HD>
struct AttentionPrefetch {
  uint4 k[kPrefetchRounds], v[kPrefetchRounds];  // this lane's key of the first rounds (raw bf16)
  float cs[8], sn[8];                             // cos / sin of this lane's 8 dims' rotation angles
};

struct ItemRange {
  int k0, k1, cur;  // keys [k0, k1) of the context; cur = ctx - 1, the current token
};
__device__ __forceinline__ ItemRange item_range(int split, int S, int ctx) {
  const int chunk = (ctx + S - 1) / S;
  const int k0 = split * chunk;
  return ItemRange{k0, min(ctx, k0 + chunk), ctx - 1};
}

// This lane's key j of KV head g (raw), or zeros past the range and for the current token.
template <int HD>
__device__ __forceinline__ void load_key(const DecodeLayersArgs& a, const DecodeLayerPtrs& L, int g, int j,
                                         const ItemRange& r, uint4& k, uint4& v) {
  k = v = make_uint4(0, 0, 0, 0);
  if (j >= r.k1 || j == r.cur) return;
  const int dl = (threadIdx.x & 31) % (HD / 8);
  const int64_t idx = int64_t(__ldg(a.block_tables + j / a.block_size)) * kv_stride_rows(a.block_size, a.kv_block_stride) +
                      j % a.block_size;
  const int64_t off = (idx * a.num_kv_heads + g) * HD + 8 * dl;
  k = __ldg(reinterpret_cast<const uint4*>(L.k_cache + off));
  v = __ldg(reinterpret_cast<const uint4*>(L.v_cache + off));
}

template <int HD>
__device__ void attention_prefetch(const DecodeLayersArgs& a, const DecodeLayerPtrs& L, int g, const ItemRange& r,
                                   AttentionPrefetch<HD>& pf) {
  constexpr int LPK = HD / 8, KPW = 32 / LPK, kRound = kConsumerWarps * KPW, kHalf = HD / 2;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, sub = lane / LPK, dl = lane % LPK;
  const int j0 = r.k0 + warp * KPW + sub;
#pragma unroll
  for (int i = 0; i < kPrefetchRounds; ++i) load_key<HD>(a, L, g, j0 + i * kRound, r, pf.k[i], pf.v[i]);
  const float fpos = float(a.positions[0]);
#pragma unroll
  for (int e = 0; e < 8; ++e) sincosf(fpos * a.inv_freq[(8 * dl + e) % kHalf], &pf.sn[e], &pf.cs[e]);
}

// The 8 dims of this lane of one head of the packed qkv row after the optional per-head RMSNorm and
// rotate-half RoPE (angles precomputed), rounded to bf16 as rope_qkv stores them.
template <int HD>
__device__ __forceinline__ void rope8(const bf16* head, const bf16* norm, const AttentionPrefetch<HD>& pf, int dl,
                                      float eps, float (&out)[8]) {
  constexpr int LPK = HD / 8;
  const int pdl = dl ^ (LPK / 2);
  float x[8], y[8];
  unpack_bf16x8(__ldcg(reinterpret_cast<const uint4*>(head + 8 * dl)), x);
  unpack_bf16x8(__ldcg(reinterpret_cast<const uint4*>(head + 8 * pdl)), y);
  if (norm != nullptr) {
    float ss = 0.f;
#pragma unroll
    for (int e = 0; e < 8; ++e) ss += x[e] * x[e];
    const float inv = rsqrtf(group_sum<LPK>(ss) / float(HD) + eps);
    float wx[8], wy[8];
    load_bf16x8(norm + 8 * dl, wx);
    load_bf16x8(norm + 8 * pdl, wy);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      x[e] *= inv * wx[e];
      y[e] *= inv * wy[e];
    }
  }
  const bool first = dl < LPK / 2;
#pragma unroll
  for (int e = 0; e < 8; ++e)  // first half: x1 c - x2 s; second half: x2 c + x1 s (own = x, partner = y)
    out[e] = to_f32(to_bf16(first ? x[e] * pf.cs[e] - y[e] * pf.sn[e] : x[e] * pf.cs[e] + y[e] * pf.sn[e]));
}

// One attention item: KV head g, keys [r.k0, r.k1), for its query heads (passes of up to
// kHeadsPerPass). Each lane group takes one key per round with an online softmax; the groups, then
// the warps (through shared memory `sm`) are merged, and the item's partial per query head goes to
// a.partials[h][split]: the unnormalized output, the max (log2 units) and the denominator. The
// current token comes from qkv, and the item that holds it writes its K and V into the cache.
template <int HD>
__device__ void attention_item(const DecodeLayersArgs& a, const DecodeLayerPtrs& L, int g, int split,
                               const ItemRange& r, const AttentionPrefetch<HD>& pf, float* sm) {
  constexpr int LPK = HD / 8, KPW = 32 / LPK, kStride = HD + 4, kRound = kConsumerWarps * KPW;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, sub = lane / LPK, dl = lane % LPK;
  const int nq = a.num_q_heads, nkv = a.num_kv_heads, group = nq / nkv;
  const bool has_cur = r.k0 <= r.cur && r.cur < r.k1;
  const bf16* row = a.qkv;

  float kc[8] = {}, vc[8] = {};
  if (has_cur) {
    rope8<HD>(row + int64_t(nq + g) * HD, L.k_norm, pf, dl, a.eps, kc);
    unpack_bf16x8(__ldcg(reinterpret_cast<const uint4*>(row + int64_t(nq + nkv + g) * HD + 8 * dl)), vc);
    const int64_t slot = a.slot_mapping[0];
    if (warp == 0 && sub == 0 && slot >= 0 && slot < a.num_slots) {
      const int64_t row = kv_slot_row(slot, a.block_size, a.kv_block_stride);
      store_bf16x8(L.k_cache + (row * nkv + g) * HD + 8 * dl, kc);
      store_bf16x8(L.v_cache + (row * nkv + g) * HD + 8 * dl, vc);
    }
  }

  for (int p0 = 0; p0 < group; p0 += kHeadsPerPass) {
    const int np = min(kHeadsPerPass, group - p0);
    float q[kHeadsPerPass][8];
#pragma unroll
    for (int h = 0; h < kHeadsPerPass; ++h) {
      if (h < np) {
        rope8<HD>(row + int64_t(g * group + p0 + h) * HD, L.q_norm, pf, dl, a.eps, q[h]);
#pragma unroll
        for (int e = 0; e < 8; ++e) q[h][e] *= a.scale * kLog2e;
      }
    }
    float m[kHeadsPerPass], l[kHeadsPerPass], o[kHeadsPerPass][8];
#pragma unroll
    for (int h = 0; h < kHeadsPerPass; ++h) {
      m[h] = -INFINITY;
      l[h] = 0.f;
#pragma unroll
      for (int e = 0; e < 8; ++e) o[h][e] = 0.f;
    }
    // Round i's key comes from the prefetch (i < kPrefetchRounds) or is loaded during round i - 1.
    int j = r.k0 + warp * KPW + sub;
    uint4 kr = pf.k[0], vr = pf.v[0];
    int round = 0;
    for (int base = r.k0 + warp * KPW; base < r.k1; base += kRound, j += kRound, ++round) {
      uint4 kn = make_uint4(0, 0, 0, 0), vn = kn;
      if (base + kRound < r.k1) {
        if (round + 1 < kPrefetchRounds) kn = pf.k[1], vn = pf.v[1];
        else load_key<HD>(a, L, g, j + kRound, r, kn, vn);
      }
      float kf[8], vf[8];
      if (j == r.cur) {
#pragma unroll
        for (int e = 0; e < 8; ++e) kf[e] = kc[e], vf[e] = vc[e];
      } else {
        unpack_bf16x8(kr, kf);
        unpack_bf16x8(vr, vf);
      }
      const bool valid = j < r.k1;
#pragma unroll
      for (int h = 0; h < kHeadsPerPass; ++h) {
        if (h >= np) break;
        float s = 0.f;
#pragma unroll
        for (int e = 0; e < 8; ++e) s += q[h][e] * kf[e];
        s = group_sum<LPK>(s);
        if (valid) {
          const float mn = fmaxf(m[h], s);
          const float c = exp2f(m[h] - mn), pr = exp2f(s - mn);
          l[h] = l[h] * c + pr;
#pragma unroll
          for (int e = 0; e < 8; ++e) o[h][e] = o[h][e] * c + pr * vf[e];
          m[h] = mn;
        }
      }
      kr = kn, vr = vn;
    }
    // Merge the KPW lane groups of the warp.
#pragma unroll
    for (int h = 0; h < kHeadsPerPass; ++h) {
#pragma unroll
      for (int off = LPK; off < 32; off <<= 1) {
        const float mo = __shfl_xor_sync(kFullMask, m[h], off);
        const float lo = __shfl_xor_sync(kFullMask, l[h], off);
        const float mn = fmaxf(m[h], mo);
        const float c1 = m[h] == -INFINITY ? 0.f : exp2f(m[h] - mn);
        const float c2 = mo == -INFINITY ? 0.f : exp2f(mo - mn);
        l[h] = l[h] * c1 + lo * c2;
#pragma unroll
        for (int e = 0; e < 8; ++e) o[h][e] = o[h][e] * c1 + __shfl_xor_sync(kFullMask, o[h][e], off) * c2;
        m[h] = mn;
      }
    }
    // Warps' partials: sm[(warp * kHeadsPerPass + h) * (HD + 2) + ...]: o[HD], m, l.
    if (sub == 0) {
#pragma unroll
      for (int h = 0; h < kHeadsPerPass; ++h) {
        float* w = sm + (warp * kHeadsPerPass + h) * (HD + 2);
#pragma unroll
        for (int e = 0; e < 8; ++e) w[8 * dl + e] = o[h][e];
        if (dl == 0) w[HD] = m[h], w[HD + 1] = l[h];
      }
    }
    consumers_sync();
    for (int t = threadIdx.x; t < np * (HD / 8); t += kConsumers) {
      const int h = t / (HD / 8), d8 = t % (HD / 8);
      float M = -INFINITY;
#pragma unroll
      for (int w = 0; w < kConsumerWarps; ++w) M = fmaxf(M, sm[(w * kHeadsPerPass + h) * (HD + 2) + HD]);
      float Ls = 0.f, acc[8] = {};
      if (M != -INFINITY) {
#pragma unroll
        for (int w = 0; w < kConsumerWarps; ++w) {
          const float* src = sm + (w * kHeadsPerPass + h) * (HD + 2);
          const float c = src[HD] == -INFINITY ? 0.f : exp2f(src[HD] - M);
          Ls += src[HD + 1] * c;
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[e] += src[8 * d8 + e] * c;
        }
      }
      float* dst = a.partials + (int64_t(g * group + p0 + h) * kDecodeLayersMaxSplits + split) * kStride;
      *reinterpret_cast<float4*>(dst + 8 * d8) = make_float4(acc[0], acc[1], acc[2], acc[3]);
      *reinterpret_cast<float4*>(dst + 8 * d8 + 4) = make_float4(acc[4], acc[5], acc[6], acc[7]);
      if (d8 == 0) dst[HD] = M, dst[HD + 1] = Ls;
    }
    consumers_sync();  // sm is reused by the next pass or item
  }
}

// ---- GEMV phases --------------------------------------------------------------------------------------
// Consumer warp `warp` owns the chunks whose sequence number is warp mod kConsumerWarps: it waits
// for the chunk's stage, forms each unit's dot product(s) with act, hands them to epi(n, dot,
// up_dot) on lane 0, and frees the stage.
template <class Epi>
__device__ __forceinline__ void consume(const Slice& s, unsigned& seq, const SmemPlan& p, uint8_t* stages,
                                        uint64_t* full, uint64_t* empty, const bf16* act, bool skip_dot, Epi epi) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int chunks8 = s.K / 8;
  const uint4* av = reinterpret_cast<const uint4*>(act);
  for (int u = s.u0; u < s.u1; u += s.per_chunk, ++seq) {
    if (int(seq % kConsumerWarps) != warp) continue;
    const int n = min(s.per_chunk, s.u1 - u);
    const unsigned st = seq % unsigned(p.stages);
    mbar_wait(&full[st], (seq / unsigned(p.stages)) & 1u);
    const uint4* rows = reinterpret_cast<const uint4*>(stages + size_t(st) * p.stage_bytes);
    for (int i = 0; i < (skip_dot ? 0 : n); ++i) {
      const uint4* wr = rows + size_t(i) * chunks8;
      const uint4* ur = rows + size_t(n + i) * chunks8;  // pair: the up rows follow the chunk's gate rows
      float acc8[8] = {}, up8[8] = {};  // one chain per element: no serial FMA dependence
#pragma unroll 4
      for (int c = lane; c < chunks8; c += 32) {
        float wf[8], xf[8];
        unpack_bf16x8(av[c], xf);
        unpack_bf16x8(wr[c], wf);
#pragma unroll
        for (int e = 0; e < 8; ++e) acc8[e] += wf[e] * xf[e];
        if (s.pair) {
          unpack_bf16x8(ur[c], wf);
#pragma unroll
          for (int e = 0; e < 8; ++e) up8[e] += wf[e] * xf[e];
        }
      }
      float acc = 0.f, acc_up = 0.f;
#pragma unroll
      for (int e = 0; e < 8; ++e) acc += acc8[e], acc_up += up8[e];
      acc = warp_sum(acc);
      if (s.pair) acc_up = warp_sum(acc_up);
      if (lane == 0) epi(u + i, acc, acc_up);
    }
    __syncwarp();
    if (lane == 0) mbar_arrive(&empty[st]);
  }
}

// The producer (one lane): every layer's four weight slices of this CTA, chunk after chunk, into
// the ring in the consumers' sequence order.
__device__ void produce(const DecodeLayersArgs& a, const SmemPlan& p, uint8_t* stages, uint64_t* full,
                        uint64_t* empty) {
  const uint64_t policy = evict_first_policy();
  unsigned seq = 0;
  for (int l = 0; l < a.num_layers; ++l) {
    const DecodeLayerPtrs& L = a.layers[l];
    for (int ph = kQkv; ph <= kDown; ++ph) {
      const Slice s = slice_of(a, L, ph, p.stage_bytes);
      const unsigned row_bytes = unsigned(s.K) * 2u;
      for (int u = s.u0; u < s.u1; u += s.per_chunk, ++seq) {
        const int n = min(s.per_chunk, s.u1 - u);
        const unsigned st = seq % unsigned(p.stages), use = seq / unsigned(p.stages);
        if (use > 0) mbar_wait(&empty[st], (use - 1u) & 1u);
        if (a.max_in_flight > 0 && seq >= unsigned(a.max_in_flight)) {
          // Load seq - max_in_flight's phase of its full barrier: no later phase of that stage can
          // complete before this lane issues it, so the parity names exactly that load.
          const unsigned older = seq - unsigned(a.max_in_flight);
          mbar_wait(&full[older % unsigned(p.stages)], (older / unsigned(p.stages)) & 1u);
        }
        if (a.trace != nullptr && u == s.u0)
          a.trace[(int64_t(blockIdx.x) * a.num_layers + l) * kDecodeLayersTraceEvents + 16 + ph] = global_ns();
        const unsigned bytes = unsigned(n) * row_bytes;
        mbar_arrive_expect_tx(&full[st], s.pair ? 2u * bytes : bytes);
        uint8_t* dst = stages + size_t(st) * p.stage_bytes;
        bulk_copy(dst, s.w + int64_t(u) * s.K, bytes, &full[st], policy);
        if (s.pair) bulk_copy(dst + bytes, s.w + (int64_t(s.N) + u) * s.K, bytes, &full[st], policy);
      }
    }
  }
}

#endif  // sm_90+

template <int HD>
__global__ void __launch_bounds__(kThreads, 1) decode_layers_kernel(const __grid_constant__ DecodeLayersArgs a,
                                                                     const SmemPlan p) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) uint8_t smem[];
  uint64_t* full = reinterpret_cast<uint64_t*>(smem);
  uint64_t* empty = full + kMaxStages;
  float* red = reinterpret_cast<float*>(smem + kBarrierBytes);
  bf16* xs = reinterpret_cast<bf16*>(smem + p.xs_off);
  bf16* act = reinterpret_cast<bf16*>(smem + p.act_off);
  uint8_t* stages = smem + p.stage_off;

  if (threadIdx.x == 0) {
    for (int i = 0; i < p.stages; ++i) {
      mbar_init(&full[i], 1);
      mbar_init(&empty[i], 1);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (threadIdx.x >= kConsumers) {  // the producer warp: weights are never written by kernels, so no pdl_wait
    if (threadIdx.x == kConsumers) produce(a, p, stages, full, empty);
    return;
  }

  pdl_wait();
  const int H = a.hidden, I = a.intermediate;
  const int r0 = int(int64_t(H) * blockIdx.x / gridDim.x), r1 = int(int64_t(H) * (blockIdx.x + 1) / gridDim.x);
  for (int i = threadIdx.x; i < r1 - r0; i += kConsumers) xs[i] = a.x[r0 + i];  // this CTA's x rows (o, down)
  const int ctx = a.context_lens[0];
  const int S = num_splits(ctx, a.num_kv_heads);
  unsigned seq = 0, target = 0;

  auto add_rows = [&](int n, float v, float) {  // o and down: x[n] += dot, rounded once
    const bf16 r = to_bf16(v + to_f32(xs[n - r0]));
    xs[n - r0] = r;
    a.x[n] = r;
  };
  const bool skip_dot = (a.flags & kDecodeLayersSkipDot) != 0;
  const bool skip_attention = (a.flags & kDecodeLayersSkipAttention) != 0;
  for (int l = 0; l < a.num_layers; ++l) {
    const DecodeLayerPtrs& L = a.layers[l];
    const bool last = l + 1 == a.num_layers;
    long long* tr = a.trace != nullptr && threadIdx.x == 0
                        ? a.trace + (int64_t(blockIdx.x) * a.num_layers + l) * kDecodeLayersTraceEvents
                        : nullptr;
    auto stamp = [&](int e) {
      if (tr != nullptr) tr[e] = global_ns();
    };
    stamp(0);
    // This CTA's attention item (at most one: num_splits keeps the items within the grid), its keys
    // loaded now, ahead of every phase they do not depend on.
    const int item = blockIdx.x;
    const bool has_item = item < a.num_kv_heads * S;
    const ItemRange range = item_range(item % S, S, skip_attention ? 0 : ctx);
    AttentionPrefetch<HD> pf;
    if (has_item) attention_prefetch<HD>(a, L, item / S, range, pf);
    // qkv
    norm_into(act, a.x, L.input_norm, H, a.eps, red);
    stamp(1);
    consume(slice_of(a, L, kQkv, p.stage_bytes), seq, p, stages, full, empty, act, skip_dot,
            [&](int n, float v, float) { a.qkv[n] = to_bf16(v); });
    stamp(2);
    grid_sync(a.sync, target);
    stamp(3);
    // attention
    if (has_item) attention_item<HD>(a, L, item / S, item % S, range, pf, reinterpret_cast<float*>(act));
    stamp(4);
    grid_sync(a.sync, target);
    stamp(5);
    // o (+ residual)
    merge_into<HD>(act, a, S);
    stamp(6);
    consume(slice_of(a, L, kO, p.stage_bytes), seq, p, stages, full, empty, act, skip_dot, add_rows);
    stamp(7);
    grid_sync(a.sync, target);
    stamp(8);
    // gate_up (+ SwiGLU)
    norm_into(act, a.x, L.post_norm, H, a.eps, red);
    stamp(9);
    consume(slice_of(a, L, kGateUp, p.stage_bytes), seq, p, stages, full, empty, act, skip_dot,
            [&](int n, float g, float u) { a.mlp[n] = to_bf16(silu_times(to_f32(to_bf16(g)), to_f32(to_bf16(u)))); });
    stamp(10);
    grid_sync(a.sync, target);
    stamp(11);
    // down (+ residual)
    if (last) pdl_launch_dependents();
    copy_into(act, a.mlp, I);
    stamp(12);
    consume(slice_of(a, L, kDown, p.stage_bytes), seq, p, stages, full, empty, act, skip_dot, add_rows);
    stamp(13);
    if (!last) grid_sync(a.sync, target);
    stamp(14);
  }

  // Leave the counters at zero for the next launch: the last CTA to finish (every CTA is past its
  // last barrier by then) resets them.
  consumers_sync();
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(a.sync + 1, 1u) == gridDim.x - 1) {
      a.sync[0] = 0;
      a.sync[1] = 0;
      __threadfence();
    }
  }
#else
  __trap();  // the host launches it on sm_90+ only (decode_layers_applies)
#endif
}

int round_up(int v, int m) { return (v + m - 1) / m * m; }

// The shared-memory plan, or stages == 0 when the shapes do not fit.
SmemPlan plan_smem(int H, int I, int nq, int hd, int grid, int smem_max) {
  SmemPlan p;
  const int q_dim = nq * hd;
  const int act_bytes = 2 * max(max(H, I), q_dim);
  const int attn_bytes = kConsumerWarps * kHeadsPerPass * (hd + 2) * 4;
  const int rows_max = H / max(grid, 1) + 2;
  p.xs_off = kBarrierBytes + kRedBytes;
  p.act_off = p.xs_off + round_up(rows_max * 2, 128);
  p.stage_off = p.act_off + round_up(max(act_bytes, attn_bytes), 128);
  const int max_unit = max(max(2 * H, 2 * q_dim), max(4 * H, 2 * I));  // qkv/gate row, o row, gate+up pair, down row
  p.stage_bytes = round_up(max(kMinStageBytes, max_unit), 128);
  const int stages = (smem_max - p.stage_off) / p.stage_bytes;
  p.stages = stages < kMinStages ? 0 : min(stages, kMaxStages);
  p.total = p.stage_off + p.stages * p.stage_bytes;
  return p;
}

int smem_optin_bytes() {
  int dev = 0, v = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return v;
}

}  // namespace

PHOTON_PRELOAD_UNIT(decode_layers, decode_layers_kernel<64>)

bool decode_layers_applies(int32_t major, int32_t num_sms, int32_t hidden, int32_t intermediate, int32_t num_q_heads,
                           int32_t num_kv_heads, int32_t head_dim) {
  if (major < 9 || (head_dim != 64 && head_dim != 128) || num_kv_heads <= 0 || num_q_heads <= 0 ||
      num_q_heads % num_kv_heads != 0 || num_q_heads / num_kv_heads > 8 || hidden <= 0 || hidden % 8 != 0 ||
      intermediate <= 0 || intermediate % 8 != 0 || hidden > (1 << 16) || intermediate > (1 << 17))
    return false;
  return plan_smem(hidden, intermediate, num_q_heads, head_dim, num_sms, smem_optin_bytes()).stages > 0;
}

int64_t decode_layers_partial_floats(int32_t num_q_heads, int32_t head_dim) {
  return int64_t(num_q_heads) * kDecodeLayersMaxSplits * (head_dim + 4);
}

Status launch_decode_layers(const DecodeLayersArgs& a, int32_t num_sms, cudaStream_t stream) {
  if (a.num_layers < 1 || a.num_layers > kDecodeLayersMaxLayers || a.x == nullptr || a.qkv == nullptr || a.mlp == nullptr ||
      a.partials == nullptr || a.sync == nullptr || num_sms < 1)
    return bad_launch("decode_layers", "needs layers, x, qkv, mlp, partials, sync and num_sms >= 1");
  if (a.block_size <= 0 || (a.kv_block_stride != 0 && a.kv_block_stride < a.block_size))
    return bad_launch("decode_layers", "needs block_size > 0 and a kv_block_stride of 0 or at least block_size");
  int dev = 0, major = 0;
  PHOTON_CUDA_TRY(cudaGetDevice(&dev));
  PHOTON_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  if (!decode_layers_applies(major, num_sms, a.hidden, a.intermediate, a.num_q_heads, a.num_kv_heads, a.head_dim))
    return bad_launch("decode_layers", "needs sm_90, hd 64 or 128, nq a multiple of nkv (at most 8 per KV head), H and "
                                       "I multiples of 8, and room for the weight ring");
  const SmemPlan p = plan_smem(a.hidden, a.intermediate, a.num_q_heads, a.head_dim, num_sms, smem_optin_bytes());
  auto kernel = a.head_dim == 64 ? decode_layers_kernel<64> : decode_layers_kernel<128>;
  PHOTON_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, p.total));
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(unsigned(num_sms));
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = size_t(p.total);
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  unsigned n = 0;
  attr[n].id = cudaLaunchAttributeCooperative;  // every CTA resident at once: the grid barriers need it
  attr[n].val.cooperative = 1;
  ++n;
  if (pdl_enabled_on_current_device()) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  cfg.attrs = attr;
  cfg.numAttrs = n;
  const cudaError_t err = cudaLaunchKernelEx(&cfg, kernel, a, p);
  if (err != cudaSuccess) (void)cudaGetLastError();
  PHOTON_CUDA_TRY(err);
  return {};
}

}  // namespace photon::cuda
