#include <cooperative_groups.h>

#include <cmath>

#include "cuda/common.cuh"
#include "cuda/decode_attention.cuh"
#include "cuda/launch.cuh"

namespace photon::cuda {

namespace {

namespace cg = cooperative_groups;

// Thread-block cluster primitives (sm_90+). The cluster variant of the kernel
// is launched only on such devices; compiled for older ones it traps.
__device__ __forceinline__ void cluster_sync() {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
  cg::this_cluster().sync();
#else
  __trap();
#endif
}
// The value at `p` in the shared memory of cluster block `rank`.
__device__ __forceinline__ float cluster_peer_load(float* p, int rank) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
  return *cg::this_cluster().map_shared_rank(p, rank);
#else
  (void)p;
  (void)rank;
  __trap();
  return 0.f;
#endif
}

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kLoadsInFlight = 8;   // 16-byte K loads (and as many V loads) per thread per round
constexpr int kMaxGroup = 8;        // query heads served per block
constexpr int kSplitGranule = 16;   // split boundaries fall on multiples of this many keys
constexpr int kMaxSplits = 16;
constexpr int kMaxClusterSplits = 8;  // a portable cluster size
constexpr int kClusterMinKeys = 32;   // keys per used split when the splits merge inside a cluster
constexpr int kMergeVec = 4;        // dims of one head merged per thread (one float4 per split)
constexpr int kMergeBatch = 8;      // splits whose partials a merging thread loads at once

// The share of a context of ctx keys that split `split` of `splits` owns,
// decided on the device so a graph captured for the batch shape stays valid
// as contexts grow: every used split holds at least min_keys keys (one round
// of loads), so short contexts use fewer splits than the launch has (the
// rest exit at once) and one split needs no merge. ctx == 0 uses one empty split.
struct SplitRange {
  int used;   // splits that hold keys (>= 1)
  int start;  // first key of this split
  int end;    // one past its last key (<= start when the split is unused or empty)
};
__device__ __forceinline__ SplitRange split_range(int ctx, int splits, int min_keys, int split) {
  const int want = max(1, min(splits, ceil_div(ctx, min_keys)));
  const int part = ceil_div(ceil_div(ctx, want), kSplitGranule) * kSplitGranule;
  SplitRange r;
  r.used = part > 0 ? ceil_div(ctx, part) : 1;
  r.start = split * part;
  r.end = min(ctx, r.start + part);
  return r;
}

// Blocks per SM the register budget is set for (1: no bound). The V-after-K
// variant keeps the occupancy of a loop without prefetch for many-wave grids.
template <int GB, bool VWithK>
constexpr int kMinBlocksPerSm = VWithK || GB > 4 ? 1 : GB == 4 ? 4 : GB == 2 ? 5 : 6;

// Block (s, kv head kh and query-head slice, split). LPK lanes hold one
// 16-byte piece each of a K/V row, so KPI rows are read per block-wide step
// and a round of ITERS steps scores kChunk keys. The block-table entries of
// the next round are fetched while a round's loads are in flight (those of the
// first round before pdl_wait(): the tables are staged before the step).
// VWithK: a round issues its V loads together with its K loads (one memory
// round trip per round, for grids of one wave: about 210 registers at GB 4,
// two blocks per SM); otherwise V is loaded after the softmax, when K is dead
// (128 registers at GB 4, four blocks per SM, for grids of several waves).
// Scores are in log2 units (scale * log2(e) folded into q).
// CL (sm_90): the splits of a (sequence, head group) are one thread-block
// cluster along x (grid: splits, head groups, sequences); used splits keep
// their partials in shared memory and merge them over distributed shared
// memory between two cluster barriers (no workspace, fences or counters), and
// a context is spread over up to all the splits in pieces of >= 32 keys.
// Otherwise (grid: sequences, head groups, splits) partials go through the
// global workspace and the last-arriving block merges them.
template <int HD, int GB, bool VWithK, bool CL>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm<GB, VWithK>) decode_attention_kernel(DecodeAttentionArgs a) {
  const StepTraceScope step_trace_scope(step_trace_tag(kTraceDecodeAttention, CL, a.num_q_heads, a.num_kv_heads));
  constexpr int LPK = HD / 8;
  constexpr int KPI = kThreads / LPK;
  constexpr int ITERS = kLoadsInFlight;
  constexpr int kChunk = KPI * ITERS;  // keys scored per round of the online softmax
  __shared__ float s_p[GB][kChunk];
  __shared__ float s_m[GB], s_l[GB], s_alpha[GB];
  __shared__ float s_red[kWarps][GB][HD];

  const int nq = a.num_q_heads, nkv = a.num_kv_heads;
  const int G = nq / nkv;
  const int gslices = (G + GB - 1) / GB;
  const int s = CL ? blockIdx.z : blockIdx.x;
  const int kh = blockIdx.y / gslices;
  const int g0 = (blockIdx.y % gslices) * GB;
  const int gcount = min(GB, G - g0);
  const int qh0 = kh * G + g0;
  const int split = CL ? blockIdx.x : blockIdx.z;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int sub = tid % LPK, slot = tid / LPK;

  pdl_launch_dependents();  // early: the o projection may start streaming its weights (launch.cuh)
  // context_lens and block_tables are staged before the step: read before pdl_wait().
  const SplitRange range = split_range(a.context_lens[s], a.num_splits, CL ? kClusterMinKeys : kChunk, split);
  if (split >= range.used) {
    pdl_wait();
    if constexpr (CL) {
      if (range.used > 1) {  // the cluster merges: take part in its two barriers (used is uniform in a cluster)
        cluster_sync();
        cluster_sync();
      }
    }
    return;
  }
  const int start = range.start, end = range.end;
  const int32_t* table = a.block_tables + int64_t(s) * a.max_blocks_per_seq;
  const int bs = a.block_size, stride = kv_stride_rows(bs, a.kv_block_stride);
  // RoPE inside (a.qkv set): this step's K/V row is formed here and read from s_cur, never from the
  // cache; otherwise rope_qkv wrote it before this kernel (at key ctx - 1).
  const bool fused = a.qkv != nullptr;
  int current = a.context_lens[s] - 1;  // the key whose K/V row this step writes (-1: none)
  int64_t new_row = -1;                  // fused: the cache row that row goes to
  if (fused) {
    const int64_t new_slot = a.slot_mapping[s];
    current = new_slot >= 0 && new_slot < a.num_slots ? a.positions[s] : -1;
    if (current >= 0) new_row = kv_slot_row(new_slot, bs, a.kv_block_stride);
  }
  // Cache rows (block * stride + offset, int32: the host bounds num_blocks * stride) of
  // this thread's keys of the round starting at key c0; -1 past `end`.
  int32_t row_of[ITERS];
  auto fetch_slots = [&](int c0) {
#pragma unroll
    for (int it = 0; it < ITERS; ++it) {
      const int j = c0 + it * KPI + slot;
      row_of[it] = j < end ? table[j / bs] * stride + j % bs : -1;
    }
  };
  // The round's rows from the cache, zero past `end` and at key `skip`.
  auto load_rows = [&](const __nv_bfloat16* cache, uint4 (&raw)[ITERS], int c0, int skip) {
#pragma unroll
    for (int it = 0; it < ITERS; ++it)
      raw[it] = row_of[it] >= 0 && c0 + it * KPI + slot != skip
                    ? *reinterpret_cast<const uint4*>(cache + (int64_t(row_of[it]) * nkv + kh) * HD + sub * 8)
                    : make_uint4(0, 0, 0, 0);
  };
  // The current token's row (key `current`) is written in this step (by rope_qkv, or with RoPE
  // inside by this kernel); every other row is final before the step, so with VWithK the first
  // round's other K and V rows are loaded before pdl_wait() (the V-after-softmax variant keeps its
  // register budget: no hoisting).
  auto load_current_row = [&](const __nv_bfloat16* cache, uint4 (&raw)[ITERS], int c0) {
#pragma unroll
    for (int it = 0; it < ITERS; ++it)
      if (row_of[it] >= 0 && c0 + it * KPI + slot == current)
        raw[it] = *reinterpret_cast<const uint4*>(cache + (int64_t(row_of[it]) * nkv + kh) * HD + sub * 8);
  };
  __shared__ uint4 s_cur[2][LPK];  // fused: the current token's K (0) and V (1) row, bf16
  auto patch_current_row = [&](uint4 (&raw)[ITERS], int c0, int kv) {
#pragma unroll
    for (int it = 0; it < ITERS; ++it)
      if (row_of[it] >= 0 && c0 + it * KPI + slot == current) raw[it] = s_cur[kv][sub];
  };
  // The round's K or V rows, the current one from wherever this step put it.
  auto load_round = [&](const __nv_bfloat16* cache, uint4 (&raw)[ITERS], int c0, int kv) {
    if (fused) {
      load_rows(cache, raw, c0, current);
      patch_current_row(raw, c0, kv);
    } else {
      load_rows(cache, raw, c0, -1);
    }
  };
  fetch_slots(start);
  uint4 kraw[ITERS], vraw[ITERS];  // the round's K (and V) rows
  if constexpr (VWithK) {
    load_rows(a.k_cache, kraw, start, current);
    load_rows(a.v_cache, vraw, start, current);
  }
  // Fused: the rotation angles' cosines and sines of the token's position, one pair index per thread,
  // into shared memory before pdl_wait() (positions are staged before the step): a store keeps the
  // compiler from sinking the sincosf work past the wait, into the step's dependent chain.
  __shared__ float s_rot[2][HD / 2];  // [cos, sin][pair index]
  if (fused) {
    const float pos = float(a.positions[s]);
    for (int p = tid; p < HD / 2; p += kThreads) sincosf(pos * a.inv_freq[p], &s_rot[1][p], &s_rot[0][p]);
    __syncthreads();
  }

  // q and the current token's K/V row come from earlier kernels.
  pdl_wait();
  if constexpr (VWithK) {
    if (!fused) {
      load_current_row(a.k_cache, kraw, start);
      load_current_row(a.v_cache, vraw, start);
    }
  }

  float q[GB][8];
  const float qscale = a.scale * 1.4426950408889634f;
  if (fused) {
    // rope_qkv's math on this block's query heads (every thread: its 8 dims of each) and on the new
    // K (threads of row slot 0) and V (slot 1) rows of KV head kh: optional RMSNorm over the head,
    // rotate-half with the partner lane's dims, bf16 rounding as rope_qkv's stores do.
    const __nv_bfloat16* row = a.qkv + int64_t(s) * (nq + 2 * nkv) * HD;
#pragma unroll
    for (int g = 0; g < GB; ++g) {
      if (g < gcount) {
        load_bf16x8(row + int64_t(qh0 + g) * HD + sub * 8, q[g]);
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e) q[g][e] = 0.f;
      }
    }
    float kv[8];
    if (slot < 2) {
      load_bf16x8(row + int64_t(nq + slot * nkv + kh) * HD + sub * 8, kv);
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) kv[e] = 0.f;
    }
    if (a.q_norm != nullptr) head_rms_norm<LPK, GB>(q, a.q_norm, a.norm_f32, sub, HD, a.eps);
    if (a.k_norm != nullptr) {
      float w[8];
      load_norm8(a.k_norm, a.norm_f32, sub * 8, w);
      const float inv = head_rms_inv<LPK>(kv, HD, a.eps);
      if (slot == 0) {
#pragma unroll
        for (int e = 0; e < 8; ++e) kv[e] *= inv * w[e];
      }
    }
    // This thread's 8 dims sub * 8 .. + 7 pair with the partner lane's (the other half of the head) at
    // pair indices p0 .. p0 + 7.
    constexpr int kHalfLanes = LPK / 2;  // lanes of a row's first half; partner lane = sub ^ kHalfLanes
    const bool first_half = sub < kHalfLanes;
    const int p0 = (sub % kHalfLanes) * 8;
    float rot_cos[8], rot_sin[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      rot_cos[e] = s_rot[0][p0 + e];
      rot_sin[e] = s_rot[1][p0 + e];
    }
#pragma unroll
    for (int g = 0; g < GB; ++g)
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const float other = __shfl_xor_sync(kFullMask, q[g][e], kHalfLanes);
        const float r = first_half ? q[g][e] * rot_cos[e] - other * rot_sin[e]
                                   : q[g][e] * rot_cos[e] + other * rot_sin[e];
        q[g][e] = to_f32(to_bf16(r)) * qscale;
      }
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const float other = __shfl_xor_sync(kFullMask, kv[e], kHalfLanes);
      if (slot == 0)
        kv[e] = first_half ? kv[e] * rot_cos[e] - other * rot_sin[e] : kv[e] * rot_cos[e] + other * rot_sin[e];
    }
    if (slot < 2 && current >= start && current < end) {
      uint4 packed;
      __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&packed);
#pragma unroll
      for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(kv[2 * i], kv[2 * i + 1]);
      s_cur[slot][sub] = packed;
      if (g0 == 0)  // one writer per (sequence, KV head): the split holding the row, first head slice
        *reinterpret_cast<uint4*>((slot == 0 ? a.k_cache : a.v_cache) + (new_row * nkv + kh) * HD + sub * 8) =
            packed;
    }
  } else {
#pragma unroll
    for (int g = 0; g < GB; ++g) {
      if (g < gcount) {
        load_bf16x8(a.q + (int64_t(s) * nq + qh0 + g) * HD + sub * 8, q[g]);
#pragma unroll
        for (int e = 0; e < 8; ++e) q[g][e] *= qscale;
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e) q[g][e] = 0.f;
      }
    }
  }
  if (tid < GB) {
    s_m[tid] = -INFINITY;
    s_l[tid] = 0.f;
  }
  float acc[GB][8];
#pragma unroll
  for (int g = 0; g < GB; ++g)
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[g][e] = 0.f;
  __syncthreads();  // also: s_cur is written
  step_trace_mark(0);  // q and the current K/V row are in
  if constexpr (VWithK) {
    if (fused) {
      patch_current_row(kraw, start, 0);
      patch_current_row(vraw, start, 1);
    }
  }

  for (int c0 = start; c0 < end; c0 += kChunk) {
    // The round's K loads (and V loads with VWithK) in flight at once (the first round's were
    // issued above); rows past `end` are zero.
    if (!VWithK || c0 != start) {
      load_round(a.k_cache, kraw, c0, 0);
      if constexpr (VWithK) load_round(a.v_cache, vraw, c0, 1);
    }
    if constexpr (VWithK) {
      if (c0 + kChunk < end) fetch_slots(c0 + kChunk);
    }

    // Scores of this round's keys for every query head of the group.
#pragma unroll
    for (int it = 0; it < ITERS; ++it) {
      const int j = c0 + it * KPI + slot;
      float kf[8];
      unpack_bf16x8(kraw[it], kf);
#pragma unroll
      for (int g = 0; g < GB; ++g) {
        const float dot = head_dot<LPK>(q[g], kf);
        if (sub == 0) s_p[g][it * KPI + slot] = j < end ? dot : -INFINITY;
      }
    }
    __syncthreads();

    // Online softmax update, one warp per query head.
    for (int g = warp; g < GB; g += kWarps) {
      float mx = -INFINITY;
      for (int i = lane; i < kChunk; i += 32) mx = fmaxf(mx, s_p[g][i]);
      mx = warp_max(mx);
      const float m_old = s_m[g];
      const float m_new = fmaxf(m_old, mx);
      const float base = m_new == -INFINITY ? 0.f : m_new;
      float sum = 0.f;
      for (int i = lane; i < kChunk; i += 32) {
        const float p = exp2f(s_p[g][i] - base);
        s_p[g][i] = p;
        sum += p;
      }
      sum = warp_sum(sum);
      __syncwarp();
      if (lane == 0) {
        const float alpha = exp2f(m_old - base);
        s_alpha[g] = alpha;
        s_m[g] = m_new;
        s_l[g] = s_l[g] * alpha + sum;
      }
    }
    __syncthreads();

    if constexpr (!VWithK) {
      load_round(a.v_cache, vraw, c0, 1);
      if (c0 + kChunk < end) fetch_slots(c0 + kChunk);
    }

    // acc = alpha * acc + P V for this round.
#pragma unroll
    for (int g = 0; g < GB; ++g) {
      const float alpha = s_alpha[g];
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[g][e] *= alpha;
    }
#pragma unroll
    for (int it = 0; it < ITERS; ++it) {
      float vf[8];
      unpack_bf16x8(vraw[it], vf);  // rows past `end` are zero and their p is 0
#pragma unroll
      for (int g = 0; g < GB; ++g) {
        const float p = s_p[g][it * KPI + slot];
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[g][e] += p * vf[e];
      }
    }
    __syncthreads();  // s_p is rewritten by the next round
  }

  step_trace_mark(1);  // the rounds are done
  // Sum the row slots: first inside each warp, then across warps.
#pragma unroll
  for (int g = 0; g < GB; ++g)
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      float v = acc[g][e];
#pragma unroll
      for (int o = LPK; o < 32; o <<= 1) v += __shfl_xor_sync(kFullMask, v, o);
      acc[g][e] = v;
    }
  if (lane < LPK) {
#pragma unroll
    for (int g = 0; g < GB; ++g)
#pragma unroll
      for (int e = 0; e < 8; ++e) s_red[warp][g][sub * 8 + e] = acc[g][e];
  }
  __syncthreads();

  const int used = range.used;
  if (used == 1) {  // the whole context in this block (also ctx == 0: l == 0 gives a zero row)
    for (int idx = tid; idx < gcount * HD; idx += kThreads) {
      const int g = idx / HD, d = idx % HD;
      float total = 0.f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) total += s_red[w][g][d];
      const float l = s_l[g];
      a.out[(int64_t(s) * nq + qh0 + g) * HD + d] = to_bf16(l > 0.f ? total / l : 0.f);
    }
    return;
  }

  if constexpr (CL) {
    // This block's unnormalized sums into s_red[0] (each (g, d) has one owner thread), then the
    // used blocks merge a share of the (head, dim) pairs each, reading every block's partials.
    for (int idx = tid; idx < gcount * HD; idx += kThreads) {
      const int g = idx / HD, d = idx % HD;
      float total = 0.f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) total += s_red[w][g][d];
      s_red[0][g][d] = total;
    }
    cluster_sync();  // partials (s_red[0], s_m, s_l) of every block visible cluster-wide
    step_trace_mark(2);  // the cluster's partials are visible
    const int share = ceil_div(gcount * HD, used);
    const int lo = split * share, hi = min(gcount * HD, lo + share);
    for (int idx = lo + tid; idx < hi; idx += kThreads) {
      const int g = idx / HD, d = idx % HD;
      float m_i[kMaxClusterSplits], l_i[kMaxClusterSplits], o_i[kMaxClusterSplits];
#pragma unroll
      for (int i = 0; i < kMaxClusterSplits; ++i) {
        if (i < used) {
          m_i[i] = cluster_peer_load(&s_m[g], i);
          l_i[i] = cluster_peer_load(&s_l[g], i);
          o_i[i] = cluster_peer_load(&s_red[0][g][d], i);
        } else {
          m_i[i] = -INFINITY;
          l_i[i] = 0.f;
          o_i[i] = 0.f;
        }
      }
      float m = -INFINITY;
#pragma unroll
      for (int i = 0; i < kMaxClusterSplits; ++i) m = fmaxf(m, m_i[i]);
      float num = 0.f, den = 0.f;  // every used split holds >= 1 key: m is finite, den >= 1
#pragma unroll
      for (int i = 0; i < kMaxClusterSplits; ++i) {
        const float w = i < used ? exp2f(m_i[i] - m) : 0.f;
        num += w * o_i[i];
        den += w * l_i[i];
      }
      a.out[(int64_t(s) * nq + qh0 + g) * HD + d] = to_bf16(den > 0.f ? num / den : 0.f);
    }
    cluster_sync();  // no block leaves while others may read its shared memory
    return;
  }

  // Split: publish this block's partials; the last of the `used` blocks of the group merges them.
  const int splits = a.num_splits;
  for (int idx = tid; idx < gcount * HD; idx += kThreads) {
    const int g = idx / HD, d = idx % HD;
    float total = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) total += s_red[w][g][d];
    a.partial_out[((int64_t(s) * nq + qh0 + g) * splits + split) * HD + d] = total;
  }
  if (tid < gcount) {
    const int64_t row = (int64_t(s) * nq + qh0 + tid) * splits + split;
    a.partial_ml[row * 2] = s_m[tid];
    a.partial_ml[row * 2 + 1] = s_l[tid];
  }
  __threadfence();
  __syncthreads();
  __shared__ int s_last;
  int32_t* counter = a.arrivals + int64_t(s) * gridDim.y + blockIdx.y;
  if (tid == 0) s_last = atomicAdd(counter, 1) == used - 1;
  __syncthreads();
  if (!s_last) return;
  __threadfence();
  // Merge: each thread owns kMergeVec dims of one head and loads the
  // (max, denominator) and partial of kMergeBatch splits at once (no
  // dependent loads inside a batch), folding batches into a running
  // out = sum_i w_i acc_i / sum_i w_i l_i with w_i = 2^(m_i - max_i m_i).
  // Every used split holds >= 1 key, so its m_i is finite and l_i >= 1.
  for (int idx = tid; idx < gcount * (HD / kMergeVec); idx += kThreads) {
    const int g = idx / (HD / kMergeVec), d = (idx % (HD / kMergeVec)) * kMergeVec;
    const int64_t head_row = int64_t(s) * nq + qh0 + g;
    const float2* ml = reinterpret_cast<const float2*>(a.partial_ml) + head_row * splits;
    const float* part = a.partial_out + head_row * splits * HD + d;
    float m_run = -INFINITY, den = 0.f;
    float4 num = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int i0 = 0; i0 < used; i0 += kMergeBatch) {
      float2 ml_i[kMergeBatch];
      float4 o_i[kMergeBatch];
#pragma unroll
      for (int i = 0; i < kMergeBatch; ++i) {
        if (i0 + i < used) {
          ml_i[i] = __ldcg(ml + i0 + i);
          o_i[i] = __ldcg(reinterpret_cast<const float4*>(part + int64_t(i0 + i) * HD));
        } else {
          ml_i[i] = make_float2(-INFINITY, 0.f);
          o_i[i] = make_float4(0.f, 0.f, 0.f, 0.f);
        }
      }
      float m_new = m_run;
#pragma unroll
      for (int i = 0; i < kMergeBatch; ++i) m_new = fmaxf(m_new, ml_i[i].x);
      const float rescale = exp2f(m_run - m_new);  // 0 on the first batch (m_run = -inf, m_new finite)
      den *= rescale;
      num.x *= rescale;
      num.y *= rescale;
      num.z *= rescale;
      num.w *= rescale;
#pragma unroll
      for (int i = 0; i < kMergeBatch; ++i) {
        const float w = i0 + i < used ? exp2f(ml_i[i].x - m_new) : 0.f;
        den += w * ml_i[i].y;
        num.x += w * o_i[i].x;
        num.y += w * o_i[i].y;
        num.z += w * o_i[i].z;
        num.w += w * o_i[i].w;
      }
      m_run = m_new;
    }
    const float inv = den > 0.f ? 1.f / den : 0.f;
    bf16* o = a.out + head_row * HD + d;
    *reinterpret_cast<bf162*>(o) = __floats2bfloat162_rn(num.x * inv, num.y * inv);
    *reinterpret_cast<bf162*>(o + 2) = __floats2bfloat162_rn(num.z * inv, num.w * inv);
  }
  if (tid == 0) *counter = 0;  // ready for the next launch
}

template <int HD, int GB, bool VWithK>
cudaError_t launch_gb(const DecodeAttentionArgs& a, int groups, cudaStream_t stream) {
  if (a.cluster_merge && a.num_splits > 1)
    return launch_kernel_in_clusters(decode_attention_kernel<HD, GB, VWithK, true>,
                                     dim3(unsigned(a.num_splits), unsigned(groups), unsigned(a.num_seqs)),
                                     dim3(kThreads), 0, stream, unsigned(a.num_splits), a);
  return launch_kernel(decode_attention_kernel<HD, GB, VWithK, false>,
                       dim3(unsigned(a.num_seqs), unsigned(groups), unsigned(a.num_splits)), dim3(kThreads), 0, stream,
                       a);
}

template <int HD, bool VWithK>
cudaError_t launch_hd(const DecodeAttentionArgs& a, int gb, int groups, cudaStream_t stream) {
  switch (gb) {
    case 1: return launch_gb<HD, 1, VWithK>(a, groups, stream);
    case 2: return launch_gb<HD, 2, VWithK>(a, groups, stream);
    case 4: return launch_gb<HD, 4, VWithK>(a, groups, stream);
    default: return launch_gb<HD, 8, VWithK>(a, groups, stream);
  }
}

template <int HD>
cudaError_t launch_hd(const DecodeAttentionArgs& a, int gb, int groups, bool v_with_k, cudaStream_t stream) {
  return v_with_k ? launch_hd<HD, true>(a, gb, groups, stream) : launch_hd<HD, false>(a, gb, groups, stream);
}

int group_block(int G) {
  if (G >= kMaxGroup) return kMaxGroup;
  int gb = 1;
  while (gb < G) gb *= 2;
  return gb;
}

}  // namespace

PHOTON_STEP_TRACE_UNIT(decode_attention)
PHOTON_PRELOAD_UNIT(decode_attention, decode_attention_kernel<64, 1, false, false>)

int32_t decode_attention_splits(int32_t num_seqs, int32_t num_q_heads, int32_t num_kv_heads, int32_t num_sms,
                                bool cluster_merge) {
  if (num_seqs <= 0 || num_kv_heads <= 0 || num_q_heads < num_kv_heads) return 1;
  const int G = num_q_heads / num_kv_heads;
  const int64_t blocks = int64_t(num_seqs) * num_kv_heads * ceil_div(G, kMaxGroup);
  const int64_t want = 2 * int64_t(num_sms > 0 ? num_sms : 132);
  if (blocks >= want) return 1;
  if (cluster_merge) {  // as many as keep the grid within one wave (V loaded with K), a cluster at most
    const int64_t splits = want / blocks;
    return int32_t(splits < kMaxClusterSplits ? splits : kMaxClusterSplits);
  }
  const int64_t splits = ceil_div64(want, blocks);
  return int32_t(splits < kMaxSplits ? splits : kMaxSplits);
}

int64_t decode_attention_cluster_blocks(int32_t num_seqs, int32_t num_q_heads, int32_t num_kv_heads, int32_t num_sms) {
  if (num_seqs <= 0 || num_kv_heads <= 0 || num_q_heads < num_kv_heads) return 0;
  const int G = num_q_heads / num_kv_heads;
  return int64_t(num_seqs) * num_kv_heads * ceil_div(G, group_block(G)) *
         decode_attention_splits(num_seqs, num_q_heads, num_kv_heads, num_sms, true);
}

DecodeWorkspace decode_attention_workspace(int32_t num_seqs, int32_t num_q_heads, int32_t num_kv_heads,
                                           int32_t head_dim, int32_t num_splits) {
  DecodeWorkspace w;
  if (num_splits <= 1 || num_kv_heads <= 0) return w;
  const size_t rows = size_t(num_seqs) * size_t(num_q_heads) * size_t(num_splits);
  w.partial_out_floats = rows * size_t(head_dim);
  w.partial_ml_floats = rows * 2;
  const int G = num_q_heads / num_kv_heads;
  w.arrivals = size_t(num_seqs) * size_t(num_kv_heads) * size_t(ceil_div(G, group_block(G)));
  return w;
}

Status launch_decode_attention(const DecodeAttentionArgs& a, cudaStream_t stream) {
  if (a.num_kv_heads <= 0 || a.num_q_heads <= 0 || a.num_q_heads % a.num_kv_heads != 0)
    return bad_launch("decode_attention", "nq must be a positive multiple of nkv");
  if (a.block_size <= 0 || a.num_splits < 1 || a.num_splits > kMaxSplits)
    return bad_launch("decode_attention", "bad block_size or num_splits");
  if (a.kv_block_stride != 0 && a.kv_block_stride < a.block_size)
    return bad_launch("decode_attention", "kv_block_stride must be 0 or at least block_size");
  if (a.cluster_merge && a.num_splits > kMaxClusterSplits)
    return bad_launch("decode_attention", "cluster_merge takes at most 8 splits");
  if (!a.cluster_merge && a.num_splits > 1 &&
      (a.partial_out == nullptr || a.partial_ml == nullptr || a.arrivals == nullptr))
    return bad_launch("decode_attention", "num_splits > 1 needs the partial workspace");
  if (!is_aligned(a.q, 16) || !is_aligned(a.out, 16) || !is_aligned(a.k_cache, 16) || !is_aligned(a.v_cache, 16))
    return bad_launch("decode_attention", "q, out and the KV cache must be 16-byte aligned");
  if (!a.cluster_merge && a.num_splits > 1 && !is_aligned(a.partial_out, 16))
    return bad_launch("decode_attention", "the partial workspace must be 16-byte aligned");
  if (a.qkv != nullptr) {
    if (a.positions == nullptr || a.slot_mapping == nullptr || a.inv_freq == nullptr)
      return bad_launch("decode_attention", "RoPE inside needs positions, slot_mapping and inv_freq");
    if (!is_aligned(a.qkv, 16) || !is_aligned(a.q_norm, 16) || !is_aligned(a.k_norm, 16))
      return bad_launch("decode_attention", "qkv and the q/k norm weights must be 16-byte aligned");
  }
  if (a.num_seqs == 0) return {};
  if (a.single_pass_heads > 0) return launch_decode_attention_single_pass(a, stream);
  const int G = a.num_q_heads / a.num_kv_heads;
  const int gb = group_block(G);
  const int groups = a.num_kv_heads * ceil_div(G, gb);
  // Loading V with K doubles the registers (two blocks per SM instead of
  // four): worth it only when the whole grid runs in one wave. Decided from
  // the launch shape, like num_splits.
  const int64_t blocks = int64_t(a.num_seqs) * groups * a.num_splits;
  const bool v_with_k = blocks <= 2 * int64_t(a.num_sms > 0 ? a.num_sms : 132);
  cudaError_t err = cudaSuccess;
  switch (a.head_dim) {
    case 16: err = launch_hd<16>(a, gb, groups, v_with_k, stream); break;
    case 32: err = launch_hd<32>(a, gb, groups, v_with_k, stream); break;
    case 64: err = launch_hd<64>(a, gb, groups, v_with_k, stream); break;
    case 128: err = launch_hd<128>(a, gb, groups, v_with_k, stream); break;
    case 256: err = launch_hd<256>(a, gb, groups, v_with_k, stream); break;
    default: return bad_launch("decode_attention", "head_dim must be 16, 32, 64, 128 or 256");
  }
  PHOTON_CUDA_TRY(err);
  return {};
}

}  // namespace photon::cuda
