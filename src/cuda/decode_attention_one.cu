// Single-pass decode attention for a few sequences (decode_attention.cuh, DecodeAttentionArgs::
// single_pass_heads): no context splits and no merge between blocks. Block (b, s) serves sequence s,
// KV head b / (G / GB) and GB of its query heads; its 8 or 16 warps take the context's keys in turn (LPK = hd / 8
// lanes per key row, 16 bytes each) in one chunk of ITERS steps, every K and V load in flight
// together (the cached rows before pdl_wait(), the current token's row after it); contexts are at
// most one chunk (decode_attention_single_pass_max_keys: a second chunk's loads would wait for the
// first one's scores). With RoPE inside (qkv set: rope_attention's decode half), each block forms
// its query heads and its KV head's new K/V row from the packed projection as rope_qkv does (q/k
// norms, rotate-half, the same bf16 rounding points as decode_attention.cu's fused path), uses the
// new row from registers, and the first query-head slice of each (sequence, KV head) writes it into
// the cache at slot_mapping. Each warp forms its keys' softmax partials (max, sum, weighted V) in
// registers; the warps meet once in shared memory (one barrier) and the block writes its heads'
// rows. Scores in log2 units.
// Why: the split kernel's cluster merge and per-round barriers put ~3.7 us of its ~7.8 us at
// Llama-3.2-1B's one-token steps after the rounds (step trace, docs/performance.md).
// Bytes, per sequence: reads nkv * ctx * hd * 2 bytes of K plus the same of V, G / GB times from L2
// (once from DRAM at most), ctx / block_size * 4 bytes of block table per block, nq * hd * 2 of q;
// writes nq * hd * 2.
#include <cmath>

#include "cuda/common.cuh"
#include "cuda/decode_attention.cuh"
#include "cuda/launch.cuh"

namespace photon::cuda {

namespace {

constexpr int kOneIters = 8;  // block-wide steps per chunk: 16-byte K and V loads in flight per lane

// Keys of one chunk for W warps at head_dim HD.
template <int HD, int W>
constexpr int one_chunk_keys() {
  return W * (32 / (HD / 8)) * kOneIters;
}

// W warps: 8, or 16 when the block table spans more than 8 warps' chunk (the same registers per
// thread, twice the keys, one block per SM).
// FUSED: RoPE inside (a.qkv set); a separate instantiation, so the plain path keeps its registers.
template <int HD, int GB, int W, bool FUSED>
__global__ void __launch_bounds__(W * 32) decode_attention_one_kernel(DecodeAttentionArgs a) {
  const StepTraceScope step_trace_scope(step_trace_tag(kTraceDecodeAttention, 2, a.num_q_heads, a.num_kv_heads));
  constexpr int LPK = HD / 8;       // lanes per key row
  constexpr int KPW = 32 / LPK;     // keys per warp per step
  constexpr int kOneWarps = W, kOneThreads = W * 32;
  constexpr int KPI = kOneWarps * KPW;  // keys per block per step (kOneIters steps: one chunk)
  __shared__ float s_m[kOneWarps][GB], s_l[kOneWarps][GB];
  __shared__ float s_acc[kOneWarps][GB][HD];

  pdl_launch_dependents();  // early: the o projection may start streaming its weights (launch.cuh)
  const int nq = a.num_q_heads, nkv = a.num_kv_heads;
  const int G = nq / nkv, slices = G / GB;
  const int kh = int(blockIdx.x) / slices;
  const int qh0 = kh * G + (int(blockIdx.x) % slices) * GB;
  const int tid = int(threadIdx.x), warp = tid >> 5, lane = tid & 31;
  const int grp = lane / LPK, sub = lane % LPK;
  const int seq = int(blockIdx.y);
  const int ctx = a.context_lens[seq];  // staged before the step
  // The key whose K/V row this step writes: an earlier kernel wrote it (rope_qkv, the qkv GEMV's
  // epilogue), or with RoPE inside (qkv set) this kernel forms it; -1: none (a padding row).
  constexpr bool fused = FUSED;
  int current = ctx - 1;
  const int bs = a.block_size, stride = kv_stride_rows(bs, a.kv_block_stride);
  int64_t new_row = -1;  // fused: the cache row of the current key
  if constexpr (fused) {
    const int64_t new_slot = a.slot_mapping[seq];
    current = new_slot >= 0 && new_slot < a.num_slots ? a.positions[seq] : -1;
    if (current >= 0) new_row = kv_slot_row(new_slot, bs, a.kv_block_stride);
  }
  const int32_t* table = a.block_tables + int64_t(seq) * a.max_blocks_per_seq;

  // Key of step `it` for this lane's group.
  auto key_of = [&](int it) { return it * KPI + warp * KPW + grp; };
  auto row = [&](const bf16* cache, int j) {
    const int64_t r = int64_t(table[j / bs]) * stride + j % bs;
    return reinterpret_cast<const uint4*>(cache + (r * nkv + kh) * HD + sub * 8);
  };
  uint4 kr[kOneIters], vr[kOneIters];
  const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
  // The cached rows are final before the step; the current one is loaded after pdl_wait().
#pragma unroll
  for (int it = 0; it < kOneIters; ++it) {
    const int j = key_of(it);
    const bool ok = j < ctx && j != current;
    kr[it] = ok ? *row(a.k_cache, j) : zero;
    vr[it] = ok ? *row(a.v_cache, j) : zero;
  }

  // RoPE inside: the rotation's cosines and sines at the token's position, per pair index, formed
  // before pdl_wait() (positions are staged before the step); a store into shared memory keeps the
  // compiler from sinking the sincosf work past the wait.
  __shared__ float s_rot[2][HD / 2];  // [cos, sin][pair index]
  if constexpr (fused) {
    const float pos = float(a.positions[seq]);
    for (int p = tid; p < HD / 2; p += kOneThreads) sincosf(pos * a.inv_freq[p], &s_rot[1][p], &s_rot[0][p]);
    __syncthreads();
  }

  pdl_wait();
  float q[GB][8];
  const float qscale = a.scale * 1.4426950408889634f;
  if constexpr (fused) {
    // rope_qkv's math (decode_attention.cu's fused path, the same rounding points): this lane's 8
    // dims of its query heads and of the new K and V rows of KV head kh, from the packed projection;
    // the optional q/k RMSNorm over the head (a row is the LPK lanes of a group), rotate-half with the
    // partner lane's dims, q rounded to bf16 as rope_qkv stores it.
    const bf16* qkv = a.qkv + int64_t(seq) * (nq + 2 * nkv) * HD;
    float kf[8];
#pragma unroll
    for (int g = 0; g < GB; ++g) load_bf16x8(qkv + int64_t(qh0 + g) * HD + sub * 8, q[g]);
    load_bf16x8(qkv + int64_t(nq + kh) * HD + sub * 8, kf);
    const uint4 v_new = *reinterpret_cast<const uint4*>(qkv + int64_t(nq + nkv + kh) * HD + sub * 8);
    if (a.q_norm != nullptr) head_rms_norm<LPK, GB>(q, a.q_norm, a.norm_f32, sub, HD, a.eps);
    if (a.k_norm != nullptr) {
      float w[8];
      load_norm8(a.k_norm, a.norm_f32, sub * 8, w);
      const float inv = head_rms_inv<LPK>(kf, HD, a.eps);
#pragma unroll
      for (int e = 0; e < 8; ++e) kf[e] *= inv * w[e];
    }
    constexpr int kHalfLanes = LPK / 2;  // lanes of a row's first half; partner lane = sub ^ kHalfLanes
    const bool first_half = sub < kHalfLanes;
    const int p0 = (sub % kHalfLanes) * 8;
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const float c = s_rot[0][p0 + e], sn = s_rot[1][p0 + e];
#pragma unroll
      for (int g = 0; g < GB; ++g) {
        const float other = __shfl_xor_sync(kFullMask, q[g][e], kHalfLanes);
        const float r = first_half ? q[g][e] * c - other * sn : q[g][e] * c + other * sn;
        q[g][e] = to_f32(to_bf16(r)) * qscale;
      }
      const float other = __shfl_xor_sync(kFullMask, kf[e], kHalfLanes);
      kf[e] = first_half ? kf[e] * c - other * sn : kf[e] * c + other * sn;
    }
    uint4 k_new;
    bf162* h = reinterpret_cast<bf162*>(&k_new);
#pragma unroll
    for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(kf[2 * i], kf[2 * i + 1]);
#pragma unroll
    for (int it = 0; it < kOneIters; ++it)
      if (current >= 0 && key_of(it) == current) {
        kr[it] = k_new;
        vr[it] = v_new;
      }
    // One writer per (sequence, KV head): the first query-head slice's first row group.
    if (current >= 0 && int(blockIdx.x) % slices == 0 && warp == 0 && grp == 0) {
      *reinterpret_cast<uint4*>(a.k_cache + (new_row * nkv + kh) * HD + sub * 8) = k_new;
      *reinterpret_cast<uint4*>(a.v_cache + (new_row * nkv + kh) * HD + sub * 8) = v_new;
    }
  } else {
#pragma unroll
    for (int g = 0; g < GB; ++g) {
      load_bf16x8(a.q + (int64_t(seq) * nq + qh0 + g) * HD + sub * 8, q[g]);
#pragma unroll
      for (int e = 0; e < 8; ++e) q[g][e] *= qscale;
    }
#pragma unroll
    for (int it = 0; it < kOneIters; ++it)
      if (current >= 0 && key_of(it) == current) {
        kr[it] = *row(a.k_cache, current);
        vr[it] = *row(a.v_cache, current);
      }
  }

  float sc[kOneIters][GB];
#pragma unroll
  for (int it = 0; it < kOneIters; ++it) {
    float kf[8];
    unpack_bf16x8(kr[it], kf);
    const bool in = key_of(it) < ctx;
#pragma unroll
    for (int g = 0; g < GB; ++g) {
      const float dot = head_dot<LPK>(q[g], kf);  // every lane: a full-warp shuffle
      sc[it][g] = in ? dot : -INFINITY;
    }
  }
  // The warp's max over its keys (uniform across the warp; -inf for a warp with none), then the
  // weights p = 2^(score - max) and their sums.
  float m[GB], l[GB], acc[GB][8];
#pragma unroll
  for (int g = 0; g < GB; ++g) {
    float cm = sc[0][g];
#pragma unroll
    for (int it = 1; it < kOneIters; ++it) cm = fmaxf(cm, sc[it][g]);
#pragma unroll
    for (int o = LPK; o < 32; o <<= 1) cm = fmaxf(cm, __shfl_xor_sync(kFullMask, cm, o));
    m[g] = cm;
    l[g] = 0.f;
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[g][e] = 0.f;
  }
#pragma unroll
  for (int it = 0; it < kOneIters; ++it) {
    float vf[8];
    unpack_bf16x8(vr[it], vf);  // zero past ctx, where p is 0 too
#pragma unroll
    for (int g = 0; g < GB; ++g) {
      const float p = m[g] == -INFINITY ? 0.f : exp2f(sc[it][g] - m[g]);  // -inf (past ctx) gives 0
      l[g] += p;
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[g][e] += p * vf[e];
    }
  }
  // The warp's groups hold disjoint keys under one max: sum them, then meet the other warps.
#pragma unroll
  for (int g = 0; g < GB; ++g)
#pragma unroll
    for (int o = LPK; o < 32; o <<= 1) {
      l[g] += __shfl_xor_sync(kFullMask, l[g], o);
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[g][e] += __shfl_xor_sync(kFullMask, acc[g][e], o);
    }
  if (grp == 0) {
#pragma unroll
    for (int g = 0; g < GB; ++g) {
#pragma unroll
      for (int e = 0; e < 8; ++e) s_acc[warp][g][sub * 8 + e] = acc[g][e];
      if (sub == 0) {
        s_m[warp][g] = m[g];
        s_l[warp][g] = l[g];
      }
    }
  }
  __syncthreads();
  for (int idx = tid; idx < GB * HD; idx += kOneThreads) {
    const int g = idx / HD, d = idx % HD;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < kOneWarps; ++w) mx = fmaxf(mx, s_m[w][g]);
    float num = 0.f, den = 0.f;
#pragma unroll
    for (int w = 0; w < kOneWarps; ++w) {
      const float wt = s_m[w][g] == -INFINITY ? 0.f : exp2f(s_m[w][g] - mx);
      num += wt * s_acc[w][g][d];
      den += wt * s_l[w][g];
    }
    a.out[(int64_t(seq) * nq + qh0 + g) * HD + d] = to_bf16(den > 0.f ? num / den : 0.f);
  }
}

template <int HD, int W, bool FUSED>
cudaError_t launch_hdwf_one(const DecodeAttentionArgs& a, int gb, cudaStream_t stream) {
  const dim3 grid(unsigned(a.num_q_heads / gb), unsigned(a.num_seqs)), block(unsigned(W * 32));
  switch (gb) {
    case 1: return launch_kernel(decode_attention_one_kernel<HD, 1, W, FUSED>, grid, block, 0, stream, a);
    case 2: return launch_kernel(decode_attention_one_kernel<HD, 2, W, FUSED>, grid, block, 0, stream, a);
    default: return launch_kernel(decode_attention_one_kernel<HD, 4, W, FUSED>, grid, block, 0, stream, a);
  }
}

template <int HD, int W>
cudaError_t launch_hdw_one(const DecodeAttentionArgs& a, int gb, cudaStream_t stream) {
  return a.qkv != nullptr ? launch_hdwf_one<HD, W, true>(a, gb, stream) : launch_hdwf_one<HD, W, false>(a, gb, stream);
}

// 8 warps while the block table spans their chunk, else 16.
template <int HD>
cudaError_t launch_hd_one(const DecodeAttentionArgs& a, int gb, cudaStream_t stream) {
  if (int64_t(a.max_blocks_per_seq) * a.block_size <= one_chunk_keys<HD, 8>())
    return launch_hdw_one<HD, 8>(a, gb, stream);
  return launch_hdw_one<HD, 16>(a, gb, stream);
}

}  // namespace

PHOTON_STEP_TRACE_UNIT(decode_attention_one)
PHOTON_PRELOAD_UNIT(decode_attention_one, decode_attention_one_kernel<64, 1, 8, false>)

int32_t decode_attention_single_pass_max_keys(int32_t head_dim) {
  // One chunk of 16 warps: a second chunk's loads would wait for the first one's scores (two chunks
  // of 8 warps at contexts of 448 to 512 keys measured slower than the split kernel: B = 1 0.811
  // against 0.795 ms/step).
  switch (head_dim) {
    case 64: return one_chunk_keys<64, 16>();
    case 128: return one_chunk_keys<128, 16>();
    default: return 0;
  }
}

int32_t decode_attention_single_pass_heads(int32_t num_seqs, int32_t num_q_heads, int32_t num_kv_heads,
                                           int32_t num_sms) {
  if (num_seqs <= 0 || num_kv_heads <= 0 || num_q_heads % num_kv_heads != 0) return 0;
  const int G = num_q_heads / num_kv_heads;
  const int64_t sms = num_sms > 0 ? num_sms : 132;
  for (int heads : {1, 2, 4})
    if (G % heads == 0 && int64_t(num_seqs) * (num_q_heads / heads) <= sms) return heads;
  return G % 4 == 0 ? 4 : G % 2 == 0 ? 2 : 1;
}

bool decode_attention_single_pass_applies(const DecodeAttentionArgs& a) {
  const int G = a.num_kv_heads > 0 ? a.num_q_heads / a.num_kv_heads : 0;
  const bool rope_ok = a.qkv == nullptr ||
                       (a.positions != nullptr && a.slot_mapping != nullptr && a.inv_freq != nullptr &&
                        is_aligned(a.qkv, 16) && is_aligned(a.q_norm, 16) && is_aligned(a.k_norm, 16));
  return a.num_seqs >= 1 && a.num_seqs <= 65535 && rope_ok && (a.head_dim == 64 || a.head_dim == 128) &&
         int64_t(a.max_blocks_per_seq) * a.block_size <= decode_attention_single_pass_max_keys(a.head_dim) &&
         a.num_kv_heads > 0 &&
         a.num_q_heads % a.num_kv_heads == 0 && a.block_size > 0 && a.max_blocks_per_seq > 0 &&
         (a.kv_block_stride == 0 || a.kv_block_stride >= a.block_size) &&
         G % (a.single_pass_heads > 0 ? a.single_pass_heads : 1) == 0 &&
         (a.single_pass_heads == 1 || a.single_pass_heads == 2 || a.single_pass_heads == 4) &&
         is_aligned(a.q, 16) && is_aligned(a.out, 16) && is_aligned(a.k_cache, 16) && is_aligned(a.v_cache, 16);
}

Status launch_decode_attention_single_pass(const DecodeAttentionArgs& a, cudaStream_t stream) {
  if (!decode_attention_single_pass_applies(a))
    return bad_launch("decode_attention (single pass)",
                      "needs 1 to 65535 sequences, head_dim 64 or 128, a block table within "
                      "one chunk of keys, for RoPE inside positions, slot_mapping, inv_freq and 16-byte aligned qkv and "
                      "norm weights, query heads per block 1, 2 or 4 "
                      "dividing the group, a KV block stride of 0 or >= block_size, and 16-byte aligned q, out "
                      "and KV cache");
  cudaError_t err = cudaSuccess;
  if (a.head_dim == 64) err = launch_hd_one<64>(a, a.single_pass_heads, stream);
  else err = launch_hd_one<128>(a, a.single_pass_heads, stream);
  PHOTON_CUDA_TRY(err);
  return {};
}

}  // namespace photon::cuda
