// The screened draw (docs/lm-head-screen.md; sampling.cuh, launch_sample_screened): one greedy or
// Gumbel-max row over the screen's int8 logits and their bounds, exact through rescoring with the
// bf16 head the few ids the bounds cannot rule out.
#include <algorithm>
#include <cfloat>
#include <climits>
#include <cmath>

#include "core/gumbel.hpp"
#include "cuda/common.cuh"
#include "cuda/gemv_row.cuh"
#include "cuda/launch.cuh"
#include "cuda/sampling.cuh"
#include "cuda/sampling_device.cuh"
#include "cuda/sampling_one_pass.cuh"

namespace photon::cuda {

namespace {

using namespace sampling_detail;
using namespace one_pass;

constexpr int kKeep = kScreenKeep;  // candidates a block keeps
constexpr int kRound = 1024;        // candidates the last block gathers and rescores at a time
constexpr int kFlagSlow = 4;        // a block kept more than kKeep: the last block scans every id

// One block's slice: the best (lower score, id), the LSE pair of its screen logits, its flags, and
// the ids whose upper score reaches its own best lower score (at most kKeep of `count`, in no
// particular order) with those upper scores.
struct ScreenPartial {
  Partial head;  // score = the best lower score, pad[0] = count, pad[1] = the best id's screen logit (bits)
  int ids[kKeep];
  float his[kKeep];
};
constexpr int kListHalf = kKeep / 2;  // a list's entries one thread of the last block reads
static_assert(kListHalf % 4 == 0 && sizeof(Partial) % 16 == 0, "16-byte loads of the lists");

// The bounds of an id's score: greedy, the logit's; else scaled_logit(., T) + g. Both are monotone
// in the logit, so lo <= the exact score <= hi whenever |exact logit - zt| <= e.
__device__ __forceinline__ void score_bounds(float zt, float e, bool greedy, float T, float g, float& lo, float& hi) {
  if (greedy) {
    lo = zt - e;
    hi = zt + e;
  } else {
    lo = scaled_logit(zt - e, T) + g;
    hi = scaled_logit(zt + e, T) + g;
  }
}

// Id i's noise (0 for greedy rows): the same draw as chunk_noise's.
__device__ __forceinline__ float id_noise(const SampleRowParams& P, bool greedy, int i) {
  if (greedy) return 0.f;
  return gumbel_from_bits(gumbel_bits(P.seed, P.step, uint32_t(i >> 2)).v[i & 3]);
}

// Exclusive prefix of n over the block (threads in order), and the block's total in *total;
// `scan` holds kWarps ints. Every thread must call it.
__device__ __forceinline__ int block_prefix(int n, int* scan, int* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int v = n;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int t = __shfl_up_sync(kFullMask, v, o);
    if (lane >= o) v += t;
  }
  __syncthreads();  // scan is free
  if (lane == 31) scan[warp] = v;
  __syncthreads();
  int before = 0, all = 0;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    before += w < warp ? scan[w] : 0;
    all += scan[w];
  }
  *total = all;
  return before + v - n;
}

// A warp's running result over the candidates it rescored: the best exact (score, id), the chosen
// id's exact logit, and the log-sum-exp correction sum of (exp(z - M) - exp(zt - M)).
struct Rescored {
  Best best;
  float z;
  float corr;
};

// Starts bringing `bytes` (a multiple of 16; 16-byte aligned) of global memory at p into L2.
__device__ __forceinline__ void prefetch_row_l2(const void* p, int bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
#else
  for (int o = 0; o < bytes; o += 128) asm volatile("prefetch.global.L2 [%0];" ::"l"(static_cast<const char*>(p) + o));
#endif
}

// One bf16 row's dot product with y = bf16(x * norm_w) and x's sum of squares, over a block: thread
// t takes chunks t, t + kThreads, ... . load() issues the loads of its first kEarly chunks (K <= 8
// kEarly kThreads) so that their latency overlaps other work; add() consumes them (loading any
// later chunks then) into the thread's partial sums. Not the GEMV's order (the sums differ from
// its value in the last bits): for a logprob, never for a choice. Reads K * 2 bytes each of the
// row, x and norm_w.
struct BlockRowDot {
  static constexpr int kEarly = 2;
  uint4 w[kEarly], x[kEarly], g[kEarly];
  __device__ __forceinline__ void load(const bf16* row, const bf16* xr, const bf16* gr, int K) {
#pragma unroll
    for (int u = 0; u < kEarly; ++u) {
      const int c = int(threadIdx.x) + u * kThreads;
      if (c < K / 8) {
        w[u] = __ldcs(reinterpret_cast<const uint4*>(row) + c);
        x[u] = __ldg(reinterpret_cast<const uint4*>(xr) + c);
        g[u] = __ldg(reinterpret_cast<const uint4*>(gr) + c);
      }
    }
  }
  static __device__ __forceinline__ void accumulate(const uint4& wv, const uint4& xv, const uint4& gv, float& dot,
                                                    float& ss) {
    float wf[8], yf[8];
    unpack_bf16x8(gemv_row::normed_chunk(xv, gv, ss), yf);
    unpack_bf16x8(wv, wf);
#pragma unroll
    for (int e = 0; e < 8; ++e) dot += wf[e] * yf[e];
  }
  __device__ __forceinline__ void add(const bf16* row, const bf16* xr, const bf16* gr, int K, float& dot, float& ss) const {
    int c = int(threadIdx.x);
#pragma unroll
    for (int u = 0; u < kEarly; ++u, c += kThreads)
      if (c < K / 8) accumulate(w[u], x[u], g[u], dot, ss);
    for (; c < K / 8; c += kThreads)
      accumulate(__ldcs(reinterpret_cast<const uint4*>(row) + c), __ldg(reinterpret_cast<const uint4*>(xr) + c),
                 __ldg(reinterpret_cast<const uint4*>(gr) + c), dot, ss);
  }
};

// Sorts cand[0 .. n) (distinct ids) ascending, through `tmp` (n ints): each id's rank is the count of
// smaller ids. n is small (the ids the bounds cannot rule out), so O(n^2 / threads) compares.
__device__ __forceinline__ void sort_ids(int* cand, int* tmp, int n) {
  for (int t = threadIdx.x; t < n; t += kThreads) tmp[t] = cand[t];
  __syncthreads();
  for (int t = threadIdx.x; t < n; t += kThreads) {
    const int id = tmp[t];
    int rank = 0;
    for (int j = 0; j < n; ++j) rank += tmp[j] < id ? 1 : 0;
    cand[rank] = id;
  }
  __syncthreads();
}

// Grid: `slices` blocks of kThreads over one row (one quad of 4 ids per thread: one_pass_slices at
// one row with quads_per_thread 1); dynamic shared memory K * 2 bytes: the last block stages y =
// bf16(x * norm_w) there, as the GEMV does, when it has ids to rescore. Where the bounds leave one
// candidate (C = {c}, the usual case: docs/lm-head-screen.md) nothing is rescored: c is the draw
// whatever its exact logit, which the whole block then sums (BlockRowDot) for the logprob alone.
template <bool kVec>
__global__ void __launch_bounds__(kThreads) sample_screened_kernel(SampleArgs a, ScreenArgs s, int slices) {
  const StepTraceScope step_trace_scope(step_trace_tag(kTraceSampleOnePass, 1, a.vocab, slices));
  __shared__ Acc shared[kWarps];
  __shared__ int scan[kWarps];
  __shared__ float squares[kWarps];
  __shared__ bool last;
  __shared__ int kept, cand_n;
  __shared__ float best_zt;  // the screen logit of the block's best id; in the last block, of the row's
  __shared__ int cand[kRound], sorted_tmp[kRound];
  __shared__ Rescored warp_results[kWarps];
  __shared__ float sole_dot[kWarps], sole_ss[kWarps];  // the sole survivor's exact logit, by warp
  extern __shared__ uint4 staged[];  // [K / 8]: y = bf16(x * norm_w)
  const int slice = int(blockIdx.x), tid = int(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int V = a.vocab;
  const SampleRowParams P = a.params != nullptr ? a.params[0] : a.inline_params[0];
  const bool greedy = P.temperature == 0.f;
  const bool want_lse = a.out_logprob != nullptr;
  const int quad = slice * kThreads + tid;
  const bf16* head = static_cast<const bf16*>(s.w);

  float g[1][4];
  chunk_noise<1>(P, greedy, quad, 1, V, g);
  pdl_wait();  // the screen's logits and bounds come from the kernel before
  const float* l = a.logits;
  float zt[1][4], e[1][4];
  chunk_load<1, kVec>(l, quad, 1, V, zt);
  chunk_load<1, kVec>(s.bound, quad, 1, V, e);
  if (tid == 0) {
    kept = 0;
    best_zt = NAN;
  }

  Acc acc{{-INFINITY, INT_MAX}, -INFINITY, 0.f, 0};
  float hi[4];
  float cmax = -INFINITY;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int i = 4 * quad + j;
    hi[j] = -INFINITY;
    if (i >= V) continue;
    const float x = zt[0][j], b = e[0][j];
    if (isnan(x) || x == INFINITY || isnan(b)) acc.flags |= kFlagBad;
    if (!greedy && scaled_logit(x, P.temperature) == INFINITY) acc.flags |= kFlagOverflow;
    float lo;
    score_bounds(x, b, greedy, P.temperature, g[0][j], lo, hi[j]);
    if (beats(lo, i, acc.best.v, acc.best.id)) acc.best = Best{lo, i};
    cmax = fmaxf(cmax, x);
  }
  if (want_lse && cmax != -INFINITY) {
    float csum = 0.f;
#pragma unroll
    for (int j = 0; j < 4; ++j) csum += expf(zt[0][j] - cmax);  // -inf padding adds 0
    merge_lse(acc.max, acc.sum, cmax, csum);
  } else {
    acc.max = fmaxf(acc.max, cmax);
  }
  acc = block_merge(acc, shared);  // its barriers also publish kept and best_zt's reset
#pragma unroll
  for (int j = 0; j < 4; ++j)
    if (4 * quad + j == acc.best.id) {
      best_zt = zt[0][j];
      // The row the last block reads where this id is the row's sole survivor: into L2 now.
      if (s.prefetch_rows > 0) prefetch_row_l2(head + int64_t(acc.best.id) * s.K, s.K * 2);
    }

  // The slice's candidates: hi >= its best lower score (in any order; at most kKeep stored). A
  // block whose best lower score is -inf keeps every id: more than kKeep, so the last block scans.
  auto* partials = static_cast<ScreenPartial*>(a.one_pass_partials);
  ScreenPartial& mine = partials[slice];
  bool wrote = false;
#pragma unroll
  for (int j = 0; j < 4; ++j)
    if (4 * quad + j < V && hi[j] >= acc.best.v) {
      const int pos = atomicAdd(&kept, 1), id = 4 * quad + j;
      if (pos < kKeep) {
        mine.ids[pos] = id;
        mine.his[pos] = hi[j];
        wrote = true;
      }
      // Where the last block rescores it (more than one survivor), with its bf16 row: the first
      // prefetch_rows - 1 rows into L2 now.
      if (pos < s.prefetch_rows - 1) prefetch_row_l2(head + int64_t(id) * s.K, s.K * 2);
    }
  if (wrote) __threadfence();  // the entries are visible device-wide before the block arrives
  __syncthreads();
  if (tid == 0) {
    const int count = kept;
    mine.head = Partial{acc.best.v, acc.best.id, acc.max, acc.sum, acc.flags | (count > kKeep ? kFlagSlow : 0),
                        {count, __float_as_int(best_zt), 0}};
    __threadfence();
    last = atomicAdd(&a.one_pass_arrivals[0], 1) == slices - 1;
  }
  __syncthreads();
  if (!last) return;

  // ---- the row's last block ----
  __threadfence();
  constexpr int kSlicesPerThread = 3;  // one_pass_slices: at most 4 blocks per SM, <= 3 * kThreads here
  Acc r{{-INFINITY, INT_MAX}, -INFINITY, 0.f, 0};
  int head_id[kSlicesPerThread];
  float head_zt[kSlicesPerThread];
#pragma unroll
  for (int u = 0; u < kSlicesPerThread; ++u) {
    const int sl = tid + u * kThreads;
    head_id[u] = -1;
    if (sl < slices) {
      const Partial* p = &partials[sl].head;  // written by other blocks: read through L2
      head_id[u] = __ldcg(&p->id);
      head_zt[u] = __int_as_float(__ldcg(&p->pad[1]));
      merge(r, Acc{{__ldcg(&p->score), head_id[u]}, __ldcg(&p->max), __ldcg(&p->sum), __ldcg(&p->flags)});
    }
  }
  // The lists of the first kThreads / 2 slices (all of them where slices <= kThreads / 2), loaded
  // with the headers: thread t reads slice t / 2's count and entries (t % 2) * kListHalf + [0,
  // kListHalf).
  const int list_slice = tid >> 1, list_half = tid & 1;
  int list_count = 0;
  uint4 list_ids[kListHalf / 4], list_his[kListHalf / 4];
  if (list_slice < slices) {
    const ScreenPartial& p = partials[list_slice];
    list_count = __ldcg(&p.head.pad[0]);
    const uint4* ids4 = reinterpret_cast<const uint4*>(p.ids + list_half * kListHalf);
    const uint4* his4 = reinterpret_cast<const uint4*>(p.his + list_half * kListHalf);
#pragma unroll
    for (int k = 0; k < kListHalf / 4; ++k) {
      list_ids[k] = __ldcg(ids4 + k);
      list_his[k] = __ldcg(his4 + k);
    }
  }
  if (tid == 0) cand_n = 0;
  r = block_merge(r, shared);
#pragma unroll
  for (int u = 0; u < kSlicesPerThread; ++u)
    if (head_id[u] == r.best.id) best_zt = head_zt[u];  // published by the barrier after the gather
  const float L = r.best.v, M = r.max;
  int status = kSampleOk;
  if (r.flags & kFlagBad) status = kSampleBadLogit;
  else if (r.max == -INFINITY) status = kSampleAllMasked;
  else if (r.flags & kFlagOverflow) status = kSampleTempOverflow;
  // The best lower score's id is in C, and most often alone there: its row's loads go out now, while
  // the lists are gathered, for its exact logit (the logprob's).
  const bool sole_early = want_lse && status == kSampleOk && !(r.flags & kFlagSlow) && r.best.id < V;
  const bf16* sole_row = head + int64_t(sole_early ? r.best.id : 0) * s.K;
  BlockRowDot sole;
  if (sole_early) sole.load(sole_row, static_cast<const bf16*>(s.x), static_cast<const bf16*>(s.norm_w), s.K);

  Rescored mine_r{{-INFINITY, INT_MAX}, NAN, 0.f};
  // Stages y = bf16(x * norm_w) and returns the RMSNorm scale; every thread must call it, once.
  float norm = NAN;
  auto stage = [&] {
    const float ss = gemv_row::stage_normed_row<kThreads>(static_cast<const bf16*>(s.x),
                                                          static_cast<const bf16*>(s.norm_w), s.K, staged);
    if (lane == 0) squares[warp] = ss;
    __syncthreads();
    norm = gemv_row::norm_scale<kWarps>(squares, s.K, s.eps);
  };
  // Rescores cand[0 .. n), sorted by id: warp w takes w, w + kWarps, ... (a fixed order, so the
  // float sums are deterministic).
  int rescored = 0;  // thread 0: the ids rescore() took
  int only = -1;     // C = {only}: the draw, not rescored
  auto rescore = [&](int n) {
    rescored += n;
    if (n > 1) sort_ids(cand, sorted_tmp, n);  // n is the block's: every thread or none
    for (int k = warp; k < n; k += kWarps) {
      const int i = cand[k];
      const float zi = __ldg(l + i);
      const float z = gemv_row::warp_row_dot(head + int64_t(i) * s.K, staged, s.K) * norm;
      const float score = greedy ? z : scaled_logit(z, P.temperature) + id_noise(P, greedy, i);
      if (beats(score, i, mine_r.best.v, mine_r.best.id)) {
        mine_r.best = Best{score, i};
        mine_r.z = z;
      }
      if (want_lse) mine_r.corr += expf(z - M) - expf(zi - M);
    }
  };
  if (status == kSampleOk) {
    if (!(r.flags & kFlagSlow)) {
      // The kept ids with hi >= L: the entries loaded with the headers, then any slices past them.
      auto take = [&](int count, int first, const uint4 (&ids4)[kListHalf / 4], const uint4 (&his4)[kListHalf / 4]) {
#pragma unroll
        for (int k = 0; k < kListHalf; ++k) {
          const uint32_t* iw = reinterpret_cast<const uint32_t*>(&ids4[k / 4]);
          const uint32_t* hw = reinterpret_cast<const uint32_t*>(&his4[k / 4]);
          if (first + k < count && __uint_as_float(hw[k % 4]) >= L) {
            const int pos = atomicAdd(&cand_n, 1);
            if (pos < kRound) cand[pos] = int(iw[k % 4]);
          }
        }
      };
      if (list_slice < slices) take(min(list_count, kKeep), list_half * kListHalf, list_ids, list_his);
      for (int t = tid + kThreads; t < 2 * slices; t += kThreads) {  // slices > kThreads / 2 only
        const ScreenPartial& p = partials[t >> 1];
        const int h = t & 1;
        uint4 ids4[kListHalf / 4], his4[kListHalf / 4];
#pragma unroll
        for (int k = 0; k < kListHalf / 4; ++k) {
          ids4[k] = __ldcg(reinterpret_cast<const uint4*>(p.ids + h * kListHalf) + k);
          his4[k] = __ldcg(reinterpret_cast<const uint4*>(p.his + h * kListHalf) + k);
        }
        take(min(__ldcg(&p.head.pad[0]), kKeep), h * kListHalf, ids4, his4);
      }
      __syncthreads();
      step_trace_mark(0);  // the last block has its candidates
      const int n = cand_n;
      if (n == 1 && cand[0] == r.best.id) {
        only = cand[0];  // the best lower score's id, and no other upper score reaches it
        if (sole_early) {
          float dot = 0.f, ss = 0.f;
          sole.add(sole_row, static_cast<const bf16*>(s.x), static_cast<const bf16*>(s.norm_w), s.K, dot, ss);
          dot = warp_sum(dot);
          ss = warp_sum(ss);
          if (lane == 0) {
            sole_dot[warp] = dot;
            sole_ss[warp] = ss;
          }
        }
      } else if (n <= kRound) {
        stage();
        rescore(n);
      } else {
        r.flags |= kFlagSlow;
      }
    }
    if (r.flags & kFlagSlow) {
      stage();
      // Every id of every slice whose upper score reaches L, a slice (at most kRound ids) at a time.
      for (int sl = 0; sl < slices; ++sl) {
        const int q = sl * kThreads + tid;
        float gq[1][4], zq[1][4], eq[1][4];
        chunk_noise<1>(P, greedy, q, 1, V, gq);
        chunk_load<1, false>(l, q, 1, V, zq);
        chunk_load<1, false>(s.bound, q, 1, V, eq);
        unsigned m = 0;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          float lo, h;
          score_bounds(zq[0][j], eq[0][j], greedy, P.temperature, gq[0][j], lo, h);
          if (4 * q + j < V && h >= L) m |= 1u << j;
        }
        int total = 0;
        int at = block_prefix(__popc(m), scan, &total);
#pragma unroll
        for (int j = 0; j < 4; ++j)
          if (m & (1u << j)) cand[at++] = 4 * q + j;
        __syncthreads();
        rescore(total);
        __syncthreads();  // cand is free for the next slice
      }
    }
  }
  step_trace_mark(1);  // thread 0's warp has rescored
  if (lane == 0) warp_results[warp] = mine_r;
  __syncthreads();
  step_trace_mark(2);  // every warp has rescored
  if (tid == 0) {
    a.one_pass_arrivals[0] = 0;  // ready for the next launch
    if (s.rescored != nullptr) atomicAdd(s.rescored, (unsigned long long)(rescored));  // no wait for its value
    Rescored best = warp_results[0];
    float corr = best.corr;
    for (int w = 1; w < kWarps; ++w) {
      const Rescored& o = warp_results[w];
      if (beats(o.best.v, o.best.id, best.best.v, best.best.id)) {
        best.best = o.best;
        best.z = o.z;
      }
      corr += o.corr;
    }
    int token = -1;
    float logprob = NAN;
    if (status == kSampleOk) {
      if (only >= 0) {
        best.best.id = only;
        if (want_lse) {  // sole_early: its exact logit, in place of its screen logit in the LSE
          float dot = 0.f, ss = 0.f;
          for (int w = 0; w < kWarps; ++w) {
            dot += sole_dot[w];
            ss += sole_ss[w];
          }
          best.z = dot * rsqrtf(ss / float(s.K) + s.eps);
          corr = expf(best.z - M) - expf(best_zt - M);
        }
      }
      token = best.best.id;
      if (want_lse) logprob = best.z - (M + logf(fmaxf(r.sum + corr, FLT_MIN)));
    }
    const int out_row = P.out_offset;
    a.out_status[out_row] = status;
    a.out_ids[out_row] = token;
    if (a.out_logprob != nullptr) a.out_logprob[out_row] = logprob;
    if (a.next_ids != nullptr) a.next_ids[0] = token >= 0 ? token : 0;  // a failed row's step is dropped
    for (int k = 0; k < a.max_logprobs; ++k) {
      a.out_top_ids[k] = -1;
      a.out_top_logprobs[k] = -INFINITY;
    }
  }
}

}  // namespace

PHOTON_STEP_TRACE_UNIT(sampling_screened)
PHOTON_PRELOAD_UNIT(sampling_screened, sample_screened_kernel<true>)

size_t screened_workspace_bytes(int32_t vocab, int32_t num_sms) {
  return size_t(std::max(one_pass_slices(1, vocab, num_sms), 1)) * sizeof(ScreenPartial);
}

bool sample_screened_shape(int64_t vocab, int64_t K, int32_t num_sms) {
  if (vocab <= 0 || vocab > INT32_MAX || K <= 0 || K % 8 != 0 || K * 2 > kScreenMaxRowBytes) return false;
  int32_t qpt = 0;
  const int32_t slices = one_pass_slices(1, int32_t(vocab), num_sms, &qpt);
  return qpt == 1 && slices <= 3 * kThreads;  // the last block reads at most 3 slices' lists per thread
}

bool sample_screened_applies(const SampleArgs& a, const ScreenArgs& s, int32_t num_sms) {
  return a.num_rows == 1 && sample_screened_shape(a.vocab, s.K, num_sms) && s.bound != nullptr && s.x != nullptr && s.norm_w != nullptr && s.w != nullptr &&
         is_aligned(s.x, 16) && is_aligned(s.norm_w, 16) && is_aligned(s.w, 16);
}

Status launch_sample_screened(const SampleArgs& a, const ScreenArgs& s, int32_t num_sms, cudaStream_t stream) {
  if (!sample_screened_applies(a, s, num_sms))
    return bad_launch("sample_screened", "needs one row whose ids fit one quad per thread, K % 8 == 0 and K * 2 <= "
                                         "kScreenMaxRowBytes, and 16-byte aligned x, norm weights and head");
  if (a.one_pass_partials == nullptr || a.one_pass_arrivals == nullptr)
    return bad_launch("sample_screened", "no workspace (one_pass_partials, one_pass_arrivals)");
  const int32_t slices = one_pass_slices(1, a.vocab, num_sms);
  const bool vec = a.vocab % 4 == 0 && is_aligned(a.logits, 16) && is_aligned(s.bound, 16);
  PHOTON_CUDA_TRY(launch_kernel(vec ? sample_screened_kernel<true> : sample_screened_kernel<false>, dim3(unsigned(slices)),
                                dim3(kThreads), size_t(s.K) * 2, stream, a, s, int(slices)));
  return {};
}

}  // namespace photon::cuda
