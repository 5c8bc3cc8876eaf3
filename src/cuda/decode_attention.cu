#include <cmath>

#include "cuda/common.cuh"
#include "cuda/decode_attention.cuh"

namespace photon::cuda {

namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kLoadsInFlight = 8;   // 16-byte K (or V) loads per thread per round
constexpr int kMaxGroup = 8;        // query heads served per block
constexpr int kSplitGranule = 16;   // split boundaries fall on multiples of this many keys
constexpr int kMaxSplits = 16;

// Block (s, kv head kh and query-head slice, split). LPK lanes hold one
// 16-byte piece each of a K/V row, so KPI rows are read per block-wide step
// and a round of ITERS steps scores kChunk keys. Scores are in log2 units
// (scale * log2(e) folded into q).
template <int HD, int GB>
__global__ void __launch_bounds__(kThreads) decode_attention_kernel(DecodeAttentionArgs a) {
  constexpr int LPK = HD / 8;
  constexpr int KPI = kThreads / LPK;
  constexpr int ITERS = kLoadsInFlight;
  constexpr int kChunk = KPI * ITERS;  // keys scored per round of the online softmax
  static_assert(kChunk >= 2 * kMaxSplits, "the merge reuses s_p");
  __shared__ float s_p[GB][kChunk];
  __shared__ float s_m[GB], s_l[GB], s_alpha[GB];
  __shared__ float s_red[kWarps][GB][HD];

  const int nq = a.num_q_heads, nkv = a.num_kv_heads;
  const int G = nq / nkv;
  const int gslices = (G + GB - 1) / GB;
  const int s = blockIdx.x;
  const int kh = blockIdx.y / gslices;
  const int g0 = (blockIdx.y % gslices) * GB;
  const int gcount = min(GB, G - g0);
  const int qh0 = kh * G + g0;
  const int split = blockIdx.z;
  const int ctx = a.context_lens[s];
  const int part = ceil_div(ceil_div(ctx, a.num_splits), kSplitGranule) * kSplitGranule;
  const int start = split * part;
  const int end = min(ctx, start + part);

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int sub = tid % LPK, slot = tid / LPK;

  float q[GB][8];
  const float qscale = a.scale * 1.4426950408889634f;
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
  if (tid < GB) {
    s_m[tid] = -INFINITY;
    s_l[tid] = 0.f;
  }
  float acc[GB][8];
#pragma unroll
  for (int g = 0; g < GB; ++g)
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[g][e] = 0.f;
  __syncthreads();

  const int32_t* table = a.block_tables + int64_t(s) * a.max_blocks_per_seq;
  const int bs = a.block_size;
  auto row_offset = [&](int j) -> int64_t {
    const int64_t blk = table[j / bs];
    return ((blk * bs + j % bs) * nkv + kh) * HD + sub * 8;
  };

  for (int c0 = start; c0 < end; c0 += kChunk) {
    // Scores of this chunk's keys for every query head of the group.
    uint4 kraw[ITERS];
#pragma unroll
    for (int it = 0; it < ITERS; ++it) {
      const int j = c0 + it * KPI + slot;
      kraw[it] = j < end ? *reinterpret_cast<const uint4*>(a.k_cache + row_offset(j)) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int it = 0; it < ITERS; ++it) {
      const int j = c0 + it * KPI + slot;
      float kf[8];
      unpack_bf16x8(kraw[it], kf);
#pragma unroll
      for (int g = 0; g < GB; ++g) {
        float dot = 0.f;
#pragma unroll
        for (int e = 0; e < 8; ++e) dot += q[g][e] * kf[e];
        dot = group_sum<LPK>(dot);
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

    // acc = alpha * acc + P V for this chunk.
    uint4 vraw[ITERS];
#pragma unroll
    for (int it = 0; it < ITERS; ++it) {
      const int j = c0 + it * KPI + slot;
      vraw[it] = j < end ? *reinterpret_cast<const uint4*>(a.v_cache + row_offset(j)) : make_uint4(0, 0, 0, 0);
    }
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
    __syncthreads();  // s_p is rewritten by the next chunk
  }

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

  if (a.num_splits == 1) {
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

  // Split: publish this block's partials; the last block of the group merges them.
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
  if (tid == 0) s_last = atomicAdd(counter, 1) == splits - 1;
  __syncthreads();
  if (!s_last) return;
  __threadfence();
  // Merge: every split's (max, denominator) into shared memory, then per head
  // the weights 2^(m_i - M), then out = sum_i w_i acc_i / sum_i w_i l_i.
  // s_p is free now: GB * kChunk >= 2 * GB * kMaxSplits floats.
  float* s_mx = &s_p[0][0];                 // [GB][splits] split maxima, then weights
  float* s_den = s_mx + GB * kMaxSplits;    // [GB][splits] split denominators
  for (int idx = tid; idx < gcount * splits; idx += kThreads) {
    const int g = idx / splits, i = idx % splits;
    const float* ml = a.partial_ml + ((int64_t(s) * nq + qh0 + g) * splits + i) * 2;
    s_mx[g * kMaxSplits + i] = __ldcg(ml);
    s_den[g * kMaxSplits + i] = __ldcg(ml + 1);
  }
  __syncthreads();
  if (tid < gcount) {
    float m = -INFINITY;
    for (int i = 0; i < splits; ++i)
      if (s_den[tid * kMaxSplits + i] > 0.f) m = fmaxf(m, s_mx[tid * kMaxSplits + i]);
    for (int i = 0; i < splits; ++i) {
      const float l = s_den[tid * kMaxSplits + i];
      s_mx[tid * kMaxSplits + i] = l > 0.f ? exp2f(s_mx[tid * kMaxSplits + i] - m) : 0.f;
    }
  }
  __syncthreads();
  for (int idx = tid; idx < gcount * HD; idx += kThreads) {
    const int g = idx / HD, d = idx % HD;
    const int64_t head_row = int64_t(s) * nq + qh0 + g;
    const float* part = a.partial_out + head_row * splits * HD + d;
    float num = 0.f, den = 0.f;
#pragma unroll 4
    for (int i = 0; i < splits; ++i) {
      const float w = s_mx[g * kMaxSplits + i];
      num += w * __ldcg(part + int64_t(i) * HD);
      den += w * s_den[g * kMaxSplits + i];
    }
    a.out[head_row * HD + d] = to_bf16(den > 0.f ? num / den : 0.f);
  }
  if (tid == 0) *counter = 0;  // ready for the next launch
}

template <int HD>
void launch_hd(const DecodeAttentionArgs& a, int gb, dim3 grid, cudaStream_t stream) {
  switch (gb) {
    case 1: decode_attention_kernel<HD, 1><<<grid, kThreads, 0, stream>>>(a); break;
    case 2: decode_attention_kernel<HD, 2><<<grid, kThreads, 0, stream>>>(a); break;
    case 4: decode_attention_kernel<HD, 4><<<grid, kThreads, 0, stream>>>(a); break;
    default: decode_attention_kernel<HD, 8><<<grid, kThreads, 0, stream>>>(a); break;
  }
}

int group_block(int G) {
  if (G >= kMaxGroup) return kMaxGroup;
  int gb = 1;
  while (gb < G) gb *= 2;
  return gb;
}

}  // namespace

int32_t decode_attention_splits(int32_t num_seqs, int32_t num_q_heads, int32_t num_kv_heads, int32_t num_sms) {
  if (num_seqs <= 0 || num_kv_heads <= 0 || num_q_heads < num_kv_heads) return 1;
  const int G = num_q_heads / num_kv_heads;
  const int64_t blocks = int64_t(num_seqs) * num_kv_heads * ceil_div(G, kMaxGroup);
  const int64_t want = 2 * int64_t(num_sms > 0 ? num_sms : 132);
  if (blocks >= want) return 1;
  const int64_t splits = ceil_div64(want, blocks);
  return int32_t(splits < kMaxSplits ? splits : kMaxSplits);
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
  if (a.num_splits > 1 && (a.partial_out == nullptr || a.partial_ml == nullptr || a.arrivals == nullptr))
    return bad_launch("decode_attention", "num_splits > 1 needs the partial workspace");
  if (!is_aligned(a.q, 16) || !is_aligned(a.k_cache, 16) || !is_aligned(a.v_cache, 16))
    return bad_launch("decode_attention", "q and the KV cache must be 16-byte aligned");
  if (a.num_seqs == 0) return {};
  const int G = a.num_q_heads / a.num_kv_heads;
  const int gb = group_block(G);
  const dim3 grid(unsigned(a.num_seqs), unsigned(a.num_kv_heads * ceil_div(G, gb)), unsigned(a.num_splits));
  switch (a.head_dim) {
    case 16: launch_hd<16>(a, gb, grid, stream); break;
    case 32: launch_hd<32>(a, gb, grid, stream); break;
    case 64: launch_hd<64>(a, gb, grid, stream); break;
    case 128: launch_hd<128>(a, gb, grid, stream); break;
    case 256: launch_hd<256>(a, gb, grid, stream); break;
    default: return bad_launch("decode_attention", "head_dim must be 16, 32, 64, 128 or 256");
  }
  PHOTON_CUDA_CHECK_LAUNCH();
  return {};
}

}  // namespace photon::cuda
