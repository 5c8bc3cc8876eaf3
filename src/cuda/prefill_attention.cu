#include <cmath>

#include "cuda/mma.cuh"
#include "cuda/prefill_attention.cuh"
#include "cuda/launch.cuh"

namespace photon::cuda {

namespace {

constexpr int BM = kPrefillTileRows;  // query rows per block, 16 per warp
constexpr int BN = 64;                // keys per K/V tile
constexpr int kWarps = BM / 16;
constexpr int kThreads = kWarps * 32;

template <int HD>
constexpr int smem_bytes() {
  return (BM + 4 * BN) * (HD + 8) * 2;  // Q tile + two K tiles + two V tiles, rows padded by 16 bytes
}

// Finds which sequence and which of its row tiles block `tile` serves, by a
// warp-wide scan over the sequences' tile counts. Call from one whole warp.
__device__ void find_tile(const PrefillAttentionArgs& a, int group, int tile, int* seq, int* seq_tile) {
  const int lane = threadIdx.x & 31;
  int base = 0;
  for (int s0 = 0; s0 < a.num_seqs; s0 += 32) {
    const int s = s0 + lane;
    const int tiles = s < a.num_seqs ? ceil_div((a.query_start[s + 1] - a.query_start[s]) * group, BM) : 0;
    int incl = tiles;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int v = __shfl_up_sync(kFullMask, incl, o);
      if (lane >= o) incl += v;
    }
    const int excl = incl - tiles;
    const unsigned hit = __ballot_sync(kFullMask, tiles > 0 && tile >= base + excl && tile < base + incl);
    if (hit != 0) {
      const int src = __ffs(hit) - 1;
      *seq = __shfl_sync(kFullMask, s, src);
      *seq_tile = tile - base - __shfl_sync(kFullMask, excl, src);
      return;
    }
    base += __shfl_sync(kFullMask, incl, 31);
  }
  *seq = -1;
  *seq_tile = 0;
}

template <int HD>
__global__ void __launch_bounds__(kThreads) prefill_attention_kernel(PrefillAttentionArgs a) {
  constexpr int LD = HD + 8;
  constexpr int CPR = HD / 8;  // 16-byte chunks per row
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* Qs = reinterpret_cast<bf16*>(smem_raw);  // [BM][LD]
  bf16* Ks = Qs + BM * LD;                        // [2][BN][LD]
  bf16* Vs = Ks + 2 * BN * LD;                    // [2][BN][LD]
  __shared__ int s_info[3];
  pdl_wait();
  pdl_launch_dependents();

  const int nq = a.num_q_heads, nkv = a.num_kv_heads;
  const int G = nq / nkv;
  const int kh = blockIdx.y;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;

  if (warp == 0) {
    int seq, seq_tile;
    find_tile(a, G, blockIdx.x, &seq, &seq_tile);
    int max_pos = -1;
    if (seq >= 0) {
      const int q0 = a.query_start[seq];
      const int rows_total = (a.query_start[seq + 1] - q0) * G;
      const int r0 = seq_tile * BM, r1 = min(rows_total, r0 + BM);
      for (int t = r0 / G + lane; t <= (r1 - 1) / G; t += 32) max_pos = max(max_pos, a.positions[q0 + t]);
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) max_pos = max(max_pos, __shfl_xor_sync(kFullMask, max_pos, o));
    }
    if (lane == 0) {
      s_info[0] = seq;
      s_info[1] = seq_tile;
      s_info[2] = max_pos;
    }
  }
  __syncthreads();
  const int seq = s_info[0];
  if (seq < 0) return;
  const int q0 = a.query_start[seq];
  const int row0 = s_info[1] * BM;
  const int rows = min(BM, (a.query_start[seq + 1] - q0) * G - row0);
  const int kv_end = min(a.context_lens[seq], s_info[2] + 1);
  const int32_t* table = a.block_tables + int64_t(seq) * a.max_blocks_per_seq;
  const int bs = a.block_size, stride = kv_stride_rows(bs, a.kv_block_stride);

  // Query rows -> shared memory (rows past `rows` are zero).
  for (int c = tid; c < BM * CPR; c += kThreads) {
    const int r = c / CPR, col = (c % CPR) * 8;
    const bool valid = r < rows;
    const int rr = row0 + (valid ? r : 0);
    const bf16* src = a.q + (int64_t(q0 + rr / G) * nq + kh * G + rr % G) * HD + col;
    cp_async_16(Qs + r * LD + col, src, valid);
  }
  auto load_kv = [&](int buf, int n0) {
    for (int c = tid; c < BN * CPR; c += kThreads) {
      const int r = c / CPR, col = (c % CPR) * 8;
      const int j = n0 + r;
      const bool valid = j < kv_end;
      int64_t off = 0;
      if (valid) off = ((int64_t(table[j / bs]) * stride + j % bs) * nkv + kh) * HD + col;
      cp_async_16(Ks + (buf * BN + r) * LD + col, a.k_cache + off, valid);
      cp_async_16(Vs + (buf * BN + r) * LD + col, a.v_cache + off, valid);
    }
  };

  // This thread's two rows of its warp's 16 (C-fragment rows g and g + 8).
  const int wr0 = warp * 16;
  const int ra = wr0 + (lane >> 2), rb = ra + 8;
  const int pos_a = ra < rows ? a.positions[q0 + (row0 + ra) / G] : -1;
  const int pos_b = rb < rows ? a.positions[q0 + (row0 + rb) / G] : -1;
  const bool warp_active = wr0 < rows;
  const float scale_log2 = a.scale * 1.4426950408889634f;

  float o[HD / 8][4];
#pragma unroll
  for (int n = 0; n < HD / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.f, l_b = 0.f;

  const int n_tiles = ceil_div(kv_end, BN);
  if (n_tiles > 0) load_kv(0, 0);
  cp_async_commit();  // group 0: Q and the first K/V tile

  for (int it = 0; it < n_tiles; ++it) {
    if (it + 1 < n_tiles) load_kv((it + 1) & 1, (it + 1) * BN);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    if (warp_active) {
      const bf16* Kt = Ks + (it & 1) * BN * LD;
      const bf16* Vt = Vs + (it & 1) * BN * LD;
      float sc[BN / 8][4];
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) sc[j][0] = sc[j][1] = sc[j][2] = sc[j][3] = 0.f;
#pragma unroll
      for (int kk = 0; kk < HD / 16; ++kk) {
        uint32_t af[4];
        ldmatrix_x4(af, Qs + (wr0 + (lane & 15)) * LD + kk * 16 + (lane >> 4) * 8);
#pragma unroll
        for (int j = 0; j < BN / 8; j += 2) {
          uint32_t bf[4];
          ldmatrix_x4(bf, Kt + ((j + (lane >> 4)) * 8 + (lane & 7)) * LD + kk * 16 + ((lane >> 3) & 1) * 8);
          mma_bf16_16816(sc[j], af, bf[0], bf[1]);
          mma_bf16_16816(sc[j + 1], af, bf[2], bf[3]);
        }
      }
      // Scale, causal mask, online softmax (rows a and b of this thread).
      const int n0 = it * BN;
      float mx_a = -INFINITY, mx_b = -INFINITY;
#pragma unroll
      for (int j = 0; j < BN / 8; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int key = n0 + j * 8 + 2 * (lane & 3) + e;
          const bool ok = key < kv_end;
          sc[j][e] = ok && key <= pos_a ? sc[j][e] * scale_log2 : -INFINITY;
          sc[j][2 + e] = ok && key <= pos_b ? sc[j][2 + e] * scale_log2 : -INFINITY;
          mx_a = fmaxf(mx_a, sc[j][e]);
          mx_b = fmaxf(mx_b, sc[j][2 + e]);
        }
#pragma unroll
      for (int o2 = 1; o2 < 4; o2 <<= 1) {
        mx_a = fmaxf(mx_a, __shfl_xor_sync(kFullMask, mx_a, o2));
        mx_b = fmaxf(mx_b, __shfl_xor_sync(kFullMask, mx_b, o2));
      }
      const float new_a = fmaxf(m_a, mx_a), new_b = fmaxf(m_b, mx_b);
      const float base_a = new_a == -INFINITY ? 0.f : new_a;
      const float base_b = new_b == -INFINITY ? 0.f : new_b;
      const float alpha_a = exp2f(m_a - base_a), alpha_b = exp2f(m_b - base_b);
      m_a = new_a;
      m_b = new_b;
      float sum_a = 0.f, sum_b = 0.f;
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        sc[j][0] = exp2f(sc[j][0] - base_a);
        sc[j][1] = exp2f(sc[j][1] - base_a);
        sc[j][2] = exp2f(sc[j][2] - base_b);
        sc[j][3] = exp2f(sc[j][3] - base_b);
        sum_a += sc[j][0] + sc[j][1];
        sum_b += sc[j][2] + sc[j][3];
      }
      l_a = l_a * alpha_a + sum_a;
      l_b = l_b * alpha_b + sum_b;
#pragma unroll
      for (int n = 0; n < HD / 8; ++n) {
        o[n][0] *= alpha_a;
        o[n][1] *= alpha_a;
        o[n][2] *= alpha_b;
        o[n][3] *= alpha_b;
      }
      // O += P V: the score accumulators become A fragments directly.
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) {
        uint32_t pa[4];
        pa[0] = pack_bf16x2(sc[2 * kk][0], sc[2 * kk][1]);
        pa[1] = pack_bf16x2(sc[2 * kk][2], sc[2 * kk][3]);
        pa[2] = pack_bf16x2(sc[2 * kk + 1][0], sc[2 * kk + 1][1]);
        pa[3] = pack_bf16x2(sc[2 * kk + 1][2], sc[2 * kk + 1][3]);
#pragma unroll
        for (int n = 0; n < HD / 8; n += 2) {
          uint32_t vb[4];
          ldmatrix_x4_trans(vb, Vt + (kk * 16 + (lane & 15)) * LD + (n + (lane >> 4)) * 8);
          mma_bf16_16816(o[n], pa, vb[0], vb[1]);
          mma_bf16_16816(o[n + 1], pa, vb[2], vb[3]);
        }
      }
    }
    __syncthreads();  // this buffer is refilled two tiles later
  }
  cp_async_wait<0>();

  if (!warp_active) return;
#pragma unroll
  for (int o2 = 1; o2 < 4; o2 <<= 1) {
    l_a += __shfl_xor_sync(kFullMask, l_a, o2);
    l_b += __shfl_xor_sync(kFullMask, l_b, o2);
  }
  const float inv_a = l_a > 0.f ? 1.f / l_a : 0.f;
  const float inv_b = l_b > 0.f ? 1.f / l_b : 0.f;
  const int col = 2 * (lane & 3);
  if (ra < rows) {
    const int rr = row0 + ra;
    bf16* dst = a.out + (int64_t(q0 + rr / G) * nq + kh * G + rr % G) * HD + col;
#pragma unroll
    for (int n = 0; n < HD / 8; ++n)
      *reinterpret_cast<bf162*>(dst + n * 8) = __floats2bfloat162_rn(o[n][0] * inv_a, o[n][1] * inv_a);
  }
  if (rb < rows) {
    const int rr = row0 + rb;
    bf16* dst = a.out + (int64_t(q0 + rr / G) * nq + kh * G + rr % G) * HD + col;
#pragma unroll
    for (int n = 0; n < HD / 8; ++n)
      *reinterpret_cast<bf162*>(dst + n * 8) = __floats2bfloat162_rn(o[n][2] * inv_b, o[n][3] * inv_b);
  }
}

template <int HD>
Status launch_hd(const PrefillAttentionArgs& a, cudaStream_t stream) {
  constexpr int bytes = smem_bytes<HD>();
  PHOTON_CUDA_TRY(cudaFuncSetAttribute(prefill_attention_kernel<HD>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  PHOTON_CUDA_TRY(launch_kernel(prefill_attention_kernel<HD>, dim3(unsigned(a.num_tiles), unsigned(a.num_kv_heads)),
                                dim3(kThreads), size_t(bytes), stream, a));
  return {};
}

}  // namespace

PHOTON_PRELOAD_UNIT(prefill_attention, prefill_attention_kernel<64>)

Status launch_prefill_attention(const PrefillAttentionArgs& a, cudaStream_t stream) {
  if (a.num_kv_heads <= 0 || a.num_q_heads <= 0 || a.num_q_heads % a.num_kv_heads != 0)
    return bad_launch("prefill_attention", "nq must be a positive multiple of nkv");
  if (a.block_size <= 0) return bad_launch("prefill_attention", "block_size must be positive");
  if (a.kv_block_stride != 0 && a.kv_block_stride < a.block_size)
    return bad_launch("prefill_attention", "kv_block_stride must be 0 or at least block_size");
  if (!is_aligned(a.q, 16) || !is_aligned(a.out, 4) || !is_aligned(a.k_cache, 16) || !is_aligned(a.v_cache, 16))
    return bad_launch("prefill_attention", "q and the KV cache must be 16-byte aligned");
  if (a.num_tiles == 0 || a.num_seqs == 0) return {};
  switch (a.head_dim) {
    case 16: return launch_hd<16>(a, stream);
    case 32: return launch_hd<32>(a, stream);
    case 64: return launch_hd<64>(a, stream);
    case 128: return launch_hd<128>(a, stream);
    case 256: return launch_hd<256>(a, stream);
    default: return bad_launch("prefill_attention", "head_dim must be 16, 32, 64, 128 or 256");
  }
}

}  // namespace photon::cuda
