#include <cooperative_groups.h>

#include <climits>
#include <cmath>

#include "core/philox.hpp"
#include "cuda/common.cuh"
#include "cuda/launch.cuh"
#include "cuda/sampling.cuh"
#include "cuda/sampling_device.cuh"

namespace photon::cuda {

namespace {

namespace cg = cooperative_groups;
using namespace sampling_detail;

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kBatch = 16;      // loads in flight per lane
constexpr int kMaxGroup = 16;   // blocks per row (one cluster)
constexpr int kMinSlice = 2048; // ids per block at least, or fewer blocks per row

struct MaxSlot {  // a block's max, its id, and whether it saw a NaN / +inf
  float v;
  int id;
  int bad;
  int pad;
};
struct MassSlot {  // a block's kept mass and its log-sum-exp partial
  u64 mass;
  float f;
  int pad;
};

struct Shared {
  MaxSlot max_slot[kMaxGroup];    // cluster: slot k written by block k (distributed shared memory)
  MassSlot mass_slot[kMaxGroup];  // likewise, for the second reduction
  float wv[kWarps];
  int wid[kWarps];
  int wbad[kWarps];
  u64 wmass[kWarps];  // each warp's kept mass over its piece: the descent's first level
  float wf[kWarps];
  u64 uv[kWarps];  // the descent's later levels
};

// Warp w's piece of the block's ids [lo, hi): contiguous, a multiple of 32 ids,
// so that the per-warp masses of the mass pass are the descent's first level.
__device__ __forceinline__ void warp_piece(int lo, int hi, int w, int& wlo, int& whi) {
  const int piece = (ceil_div(hi - lo, kWarps) + 31) & ~31;
  wlo = min(hi, lo + w * piece);
  whi = min(hi, wlo + piece);
}

// f(i, l[i]) for the ids lane + 32 j of [wlo, whi), kBatch loads in flight.
template <class F>
__device__ __forceinline__ void each_in_piece(const float* l, int wlo, int whi, int lane, F&& f) {
  for (int base = wlo + lane; base < whi; base += 32 * kBatch) {
    float x[kBatch];
#pragma unroll
    for (int k = 0; k < kBatch; ++k) x[k] = base + 32 * k < whi ? l[base + 32 * k] : 0.f;
#pragma unroll
    for (int k = 0; k < kBatch; ++k)
      if (base + 32 * k < whi) f(base + 32 * k, x[k]);
  }
}

__device__ __forceinline__ void group_sync() {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
  cg::this_cluster().sync();
#endif
}

// Stores v into slot `rank` of every block of the cluster (one thread per block).
template <class T>
__device__ __forceinline__ void push_to_group(T* slots, int rank, int group, const T& v) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
  if (int(threadIdx.x) < group) *cg::this_cluster().map_shared_rank(&slots[rank], int(threadIdx.x)) = v;
#endif
}

// Rows sampled greedily or by an id-order draw (temperature > 0 with no top-k
// cut and top_p = 1), without penalties or top-n logprobs (the caller checks), `group`
// blocks of kThreads per row (a cluster when kCluster, else group = 1).
// Block `rank` owns the ids [rank * slice, (rank + 1) * slice) of its row;
// warp w of it a contiguous piece of those. Steps, all from global memory
// (the row is L2-resident after the LM head; passes 2 and 3 mostly hit L1):
//  1. max (ties to the lower id) and the NaN / +inf check: warp shuffles, one
//     block barrier, one cluster exchange (each block pushes its result into
//     every block's slot, one cluster barrier, each warp combines the slots);
//  2. kept masses w = exp(l / T - m) in 2^-40 fixed point (and the log-sum-exp
//     of the raw logits when a logprob is asked): per-warp sums kept, one block
//     barrier, one cluster exchange that gives each block the mass before it;
//  3. the block holding u * S descends to the id: its first level is the
//     per-warp sums of step 2; later levels re-read the chosen piece.
// Greedy rows stop after step 1 (step 2 sums only the log-sum-exp, when asked).
// No distributed shared memory is touched after the second cluster barrier,
// so blocks that do not hold the draw exit at once.
template <bool kCluster>
__global__ void __launch_bounds__(kThreads, 4) sample_id_order_kernel(SampleArgs a, int group) {
  __shared__ Shared sh;
  pdl_wait();  // the logits come from the kernel before
  const int tid = int(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int rank = int(blockIdx.x) % group, row = int(blockIdx.x) / group;
  const int V = a.vocab;
  const float* l = a.logits + int64_t(row) * V;
  const SampleRowParams P = a.params != nullptr ? a.params[row] : a.inline_params[row];
  const int slice = ceil_div(V, group);
  const int lo = min(V, rank * slice), hi = min(V, lo + slice);
  int wlo, whi;
  warp_piece(lo, hi, warp, wlo, whi);
  const bool leader = rank == 0 && tid == 0;
  if (leader)
    for (int r = 0; r < a.max_logprobs; ++r) {  // no top-n on these rows: the unused entries
      a.out_top_ids[int64_t(row) * a.max_logprobs + r] = -1;
      a.out_top_logprobs[int64_t(row) * a.max_logprobs + r] = -INFINITY;
    }
  auto fail = [&](int status) {
    if (leader) {
      a.out_status[row] = status;
      a.out_ids[row] = -1;
      if (a.out_logprob != nullptr) a.out_logprob[row] = NAN;
    }
  };

  // 1. Max and checks.
  Best best{-INFINITY, INT_MAX};
  int bad = 0;
  each_in_piece(l, wlo, whi, lane, [&](int i, float v) {
    if (isnan(v) || v == INFINITY) bad = 1;
    else if (beats(v, i, best.v, best.id)) best = Best{v, i};
  });
  best = warp_best(best);
  bad = __any_sync(kFullMask, bad) ? 1 : 0;
  if (lane == 0) {
    sh.wv[warp] = best.v;
    sh.wid[warp] = best.id;
    sh.wbad[warp] = bad;
  }
  __syncthreads();
  best = lane < kWarps ? Best{sh.wv[lane], sh.wid[lane]} : Best{-INFINITY, INT_MAX};
  best = warp_best(best);
  bad = __any_sync(kFullMask, lane < kWarps && sh.wbad[lane] != 0) ? 1 : 0;
  if constexpr (kCluster) {
    push_to_group(sh.max_slot, rank, group, MaxSlot{best.v, best.id, bad, 0});
    group_sync();
    const MaxSlot s = lane < group ? sh.max_slot[lane] : MaxSlot{-INFINITY, INT_MAX, 0, 0};
    best = warp_best(Best{s.v, s.id});
    bad = __any_sync(kFullMask, s.bad != 0) ? 1 : 0;
  }
  if (bad) return fail(kSampleBadLogit);
  if (best.v == -INFINITY) return fail(kSampleAllMasked);
  const float T = P.temperature;
  const bool greedy = T == 0.f, need_lse = a.out_logprob != nullptr;
  const float zm = greedy ? 0.f : best.v / T;  // division is monotone: max(l / T) = max(l) / T
  if (!isfinite(zm)) return fail(kSampleTempOverflow);
  const float m = zm == 0.f ? 0.f : zm, minp = P.min_p > 0.f ? P.min_p : 0.f;
  auto finish = [&](int token, float lse) {
    if (tid == 0) {
      a.out_status[row] = kSampleOk;
      a.out_ids[row] = token;
      if (need_lse) a.out_logprob[row] = l[token] - lse;
    }
  };
  if (greedy && !need_lse) {
    if (rank == 0) finish(best.id, 0.f);
    return;
  }

  // 2. Kept masses (none when greedy) and the log-sum-exp of the raw logits.
  const bool unit_temp = T == 1.f;  // then w = exp(l - max) exactly
  u64 mass = 0;
  float lsum = 0.f;
  each_in_piece(l, wlo, whi, lane, [&](int, float v) {
    if (greedy) {
      lsum += expf(v - best.v);
      return;
    }
    float w;
    mass += id_order_mass(v, T, m, minp, w);
    if (need_lse) lsum += unit_temp ? w : expf(v - best.v);
  });
  mass = warp_sum_u64(mass);
  lsum = warp_sum(lsum);
  if (lane == 0) {
    sh.wmass[warp] = mass;
    sh.wf[warp] = lsum;
  }
  __syncthreads();
  u64 mine = 0;
  float fmine = 0.f;
  for (int w = 0; w < kWarps; ++w) {  // warp order: the same sums in every thread
    mine += sh.wmass[w];
    fmine += sh.wf[w];
  }
  u64 before = 0, total = mine;
  float fsum = fmine;
  if constexpr (kCluster) {
    push_to_group(sh.mass_slot, rank, group, MassSlot{mine, fmine, 0});
    group_sync();
    const MassSlot s = lane < group ? sh.mass_slot[lane] : MassSlot{0ull, 0.f, 0};
    before = warp_sum_u64(lane < rank ? s.mass : 0ull);
    total = warp_sum_u64(s.mass);
    fsum = warp_sum(s.f);  // a fixed shuffle tree: the same float in every block
  }

  const float lse = best.v + logf(fsum);
  if (greedy) {
    if (rank == 0) finish(best.id, lse);
    return;
  }

  // 3. The draw: the first id whose cumulative kept mass exceeds u * S.
  const double u = philox_uniform(P.seed, P.step);
  u64 target = u64(floor(u * double(total)));
  if (target > total - 1) target = total - 1;  // total >= 2^40: the max's w is 1
  if (target < before || target - before >= mine) return;  // another block holds it
  target -= before;
  const int pick = pick_piece<kWarps>(sh.wmass, target);  // the mass pass's per-warp sums: the first level
  int plo, phi;
  warp_piece(lo, hi, pick, plo, phi);
  const int chosen = descend_id_order<kWarps>(
      l, plo, phi,
      [&](float x) {
        float w;
        return id_order_mass(x, T, m, minp, w);
      },
      target, sh.uv);
  finish(chosen, lse);
}

}  // namespace

Status launch_sample_id_order(const SampleArgs& a, int32_t compute_major, int32_t num_sms, cudaStream_t stream) {
  if (a.num_rows <= 0 || a.vocab <= 0 || a.max_logprobs < 0) return bad_launch("sample_id_order", "bad R, V or max_logprobs");
  if (a.params == nullptr && a.num_rows > kSampleInlineRows)
    return bad_launch("sample_id_order", "params inline only up to kSampleInlineRows rows");
  // Blocks per row: as many as keep every row's blocks in about one wave (two blocks per SM of
  // the four that fit) with at least kMinSlice ids each; clusters need sm_90.
  int group = 1;
  if (compute_major >= 9)
    for (int c : {16, 8, 4, 2})
      if (int64_t(a.num_rows) * c <= 2 * int64_t(num_sms) && int64_t(a.vocab) >= int64_t(c) * kMinSlice) {
        group = c;
        break;
      }
  if (group == 1) {
    PHOTON_CUDA_TRY(launch_kernel(sample_id_order_kernel<false>, dim3(unsigned(a.num_rows)), dim3(kThreads), 0,
                                  stream, a, 1));
    return {};
  }
  auto kernel = sample_id_order_kernel<true>;
  if (group > 8) PHOTON_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  PHOTON_CUDA_TRY(launch_kernel_in_clusters(kernel, dim3(unsigned(a.num_rows * group)), dim3(kThreads), 0, stream,
                                            unsigned(group), a, group));
  return {};
}

}  // namespace photon::cuda
