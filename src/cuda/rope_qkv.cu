#include "cuda/common.cuh"
#include "cuda/rope_qkv.cuh"
#include "cuda/launch.cuh"

namespace photon::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kMaxPairsPerLane = 4;  // hd <= 2 * 32 * 4 = 256

// Block (token, group of kWarps heads), one warp per head (q heads, then k
// heads, then v heads). Lane l owns the rotation pairs (p, p + hd/2) for
// p = l, l + 32, ...
// What does not depend on earlier kernels is read and formed before pdl_wait(): the token's slot (and row)
// and position (staged before the step), the rotation's sines and cosines, the head's norm weights.
// After the wait the chain is one read of the projection, the norm's warp sum and the stores; read
// after it, those inputs were further dependent L2 round trips and sincosf latency in every step's
// chain (Qwen3 runs this kernel between its qkv product and attention in every layer).
template <class W>
__global__ void __launch_bounds__(kWarps * 32) rope_qkv_kernel(RopeQkvArgs a) {
  const StepTraceScope step_trace_scope(step_trace_tag(kTraceRopeQkv, 0, 0, 0));
  pdl_launch_dependents();  // early: the next kernel may start streaming its weights (launch.cuh)
  const int t = blockIdx.x;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int h = blockIdx.y * kWarps + warp;
  const int hd = a.head_dim, half = hd / 2;
  const int nq = a.num_q_heads, nkv = a.num_kv_heads;
  const int heads = nq + 2 * nkv;
  const bool is_q = h < nq, is_k = !is_q && h < nq + nkv;
  const int64_t slot = a.slot_mapping[t];
  const bool write_kv = slot >= 0 && slot < a.num_slots;
  const int64_t row = write_kv && a.kv_block_stride > 0 ? kv_slot_row(slot, a.block_size, a.kv_block_stride) : slot;
  const W* norm = static_cast<const W*>(is_q ? a.q_norm : is_k ? a.k_norm : nullptr);
  float sn[kMaxPairsPerLane], cs[kMaxPairsPerLane], w1[kMaxPairsPerLane], w2[kMaxPairsPerLane];
  const float pos = is_q || is_k ? float(a.positions[t]) : 0.f;
#pragma unroll
  for (int i = 0; i < kMaxPairsPerLane; ++i) {
    const int p = lane + 32 * i;
    sn[i] = 0.f, cs[i] = 1.f, w1[i] = 1.f, w2[i] = 1.f;
    if ((is_q || is_k) && p < half) {
      sincosf(pos * a.inv_freq[p], &sn[i], &cs[i]);
      if (norm != nullptr) {
        w1[i] = to_f32(norm[p]);
        w2[i] = to_f32(norm[p + half]);
      }
    }
    // Keeps the compiler from sinking the sincosf work past the wait.
    asm volatile("" : "+f"(sn[i]), "+f"(cs[i]), "+f"(w1[i]), "+f"(w2[i]));
  }
  pdl_wait();
  if (h >= heads) return;
  const bf16* src = a.qkv + int64_t(t) * heads * hd + int64_t(h) * hd;
  if (!is_q && !is_k) {  // v head: copy into the cache
    if (!write_kv) return;
    bf16* dst = a.v_cache + (row * nkv + (h - nq - nkv)) * hd;
    for (int i = lane; i < hd; i += 32) dst[i] = src[i];
    return;
  }
  if (is_k && !write_kv) return;
  float x1[kMaxPairsPerLane], x2[kMaxPairsPerLane];
  float ss = 0.f;
#pragma unroll
  for (int i = 0; i < kMaxPairsPerLane; ++i) {
    const int p = lane + 32 * i;
    x1[i] = p < half ? to_f32(src[p]) : 0.f;
    x2[i] = p < half ? to_f32(src[p + half]) : 0.f;
    ss += x1[i] * x1[i] + x2[i] * x2[i];
  }
  if (norm != nullptr) {
    const float inv = rsqrtf(warp_sum(ss) / float(hd) + a.eps);
#pragma unroll
    for (int i = 0; i < kMaxPairsPerLane; ++i) {
      x1[i] *= inv * w1[i];
      x2[i] *= inv * w2[i];
    }
  }
  bf16* dst = is_q ? a.q_out + (int64_t(t) * nq + h) * hd : a.k_cache + (row * nkv + (h - nq)) * hd;
#pragma unroll
  for (int i = 0; i < kMaxPairsPerLane; ++i) {
    const int p = lane + 32 * i;
    if (p < half) {
      dst[p] = to_bf16(x1[i] * cs[i] - x2[i] * sn[i]);
      dst[p + half] = to_bf16(x2[i] * cs[i] + x1[i] * sn[i]);
    }
  }
}

}  // namespace

PHOTON_STEP_TRACE_UNIT(rope_qkv)
PHOTON_PRELOAD_UNIT(rope_qkv, rope_qkv_kernel<bf16>)

Status launch_rope_qkv(const RopeQkvArgs& a, cudaStream_t stream) {
  if (a.head_dim <= 0 || a.head_dim % 2 != 0 || a.head_dim > 2 * 32 * kMaxPairsPerLane)
    return bad_launch("rope_qkv", "head_dim must be even and at most 256");
  if (a.num_q_heads <= 0 || a.num_kv_heads <= 0 || a.num_tokens < 0)
    return bad_launch("rope_qkv", "needs nq > 0, nkv > 0, T >= 0");
  if (a.kv_block_stride != 0 && (a.block_size <= 0 || a.kv_block_stride < a.block_size))
    return bad_launch("rope_qkv", "a kv_block_stride needs block_size > 0 and stride >= block_size");
  if (a.num_tokens == 0) return {};
  const dim3 grid(unsigned(a.num_tokens), unsigned(ceil_div(a.num_q_heads + 2 * a.num_kv_heads, kWarps)));
  PHOTON_CUDA_TRY(launch_kernel(a.norm_f32 ? rope_qkv_kernel<float> : rope_qkv_kernel<bf16>, grid, dim3(kWarps * 32), 0,
                                stream, a));
  return {};
}

}  // namespace photon::cuda
