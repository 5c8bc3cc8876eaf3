#include <cooperative_groups.h>

#include <climits>
#include <cmath>

#include "core/gumbel.hpp"
#include "core/philox.hpp"
#include "cuda/common.cuh"
#include "cuda/launch.cuh"
#include "cuda/sampling.cuh"
#include "cuda/sampling_device.cuh"

namespace photon::cuda {

namespace {

namespace cg = cooperative_groups;
using namespace sampling_detail;

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxCluster = 16;
constexpr int kMaxClusterRows = 16;
// Each digit's counter may be spread over kSub copies (picked by lane) to cut
// same-address atomics; measured on the H200, 4 copies made the cluster
// kernel slower (62 -> 170 us per row: 4x the distributed-shared-memory reads
// in the histogram merge), so one.
constexpr int kSub = 1;
constexpr int kBins = 256 * kSub;

// The raw maximum and whether any logit is NaN or +inf.
struct BestBad {
  Best best;
  u64 bad;
};
constexpr int kSlotBytes = 32;
static_assert(sizeof(BestBad) <= kSlotBytes, "slot size");

struct SharedState {
  u64 hist[2][kBins];  // this block's digit histogram, kSub copies per digit (two phases, see Group)
  u64 total[256];      // the group's histogram
  float fv[kWarps];
  int iv[kWarps];
  u64 uv[kWarps];
  float fsum[kWarps];
  // Cluster reductions: every block's partial result, pushed here by each
  // block of the cluster (slot = its rank; two phases, see ClusterGroup).
  alignas(16) unsigned char gather[2][kMaxCluster][kSlotBytes];
  uint32_t key;
  u64 before;
  int hist_index;
};

// Ascending order key of z = the order pi (z descending); z is never -0 here.
__device__ __forceinline__ uint32_t order_key(float z) {
  const uint32_t u = __float_as_uint(z);
  return ~((u & 0x80000000u) ? ~u : (u | 0x80000000u));
}
__device__ __forceinline__ float key_to_z(uint32_t key) {
  const uint32_t asc = ~key;
  return __uint_as_float((asc & 0x80000000u) ? (asc & 0x7fffffffu) : ~asc);
}

// ---- block-level reductions (every thread gets the result) -----------------
__device__ Best block_best(Best b, SharedState& sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  b = warp_best(b);
  __syncthreads();
  if (lane == 0) {
    sh.fv[warp] = b.v;
    sh.iv[warp] = b.id;
  }
  __syncthreads();
  Best r{sh.fv[0], sh.iv[0]};
  for (int w = 1; w < kWarps; ++w) r = better(r, Best{sh.fv[w], sh.iv[w]});
  return r;
}
__device__ u64 block_sum_u64(u64 v, SharedState& sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) sh.uv[warp] = v;
  __syncthreads();
  u64 total = 0;
  for (int w = 0; w < kWarps; ++w) total += sh.uv[w];
  return total;
}
__device__ float block_sum_f32(float v, SharedState& sh) {  // fixed order: deterministic
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) sh.fsum[warp] = v;
  __syncthreads();
  float total = 0.f;
  for (int w = 0; w < kWarps; ++w) total += sh.fsum[w];
  return total;
}

// ---- groups: the blocks that share one row ------------------------------------
// BlockGroup: one block per row. ClusterGroup (sm_90): a thread-block cluster
// per row; in each reduction every block stores its partial into its slot of
// every block's shared memory (distributed shared memory stores, which do not
// wait, where remote loads each wait a round trip: docs/performance.md change
// 7), then after one cluster barrier each thread combines its block's local
// slots in rank order (deterministic). Slots alternate between two phases: a block writes phase p
// only after the barrier of the reduction that used phase p^1, which every
// reader of phase p's previous values had reached after reading them.
struct BlockGroup {
  SharedState& sh;
  __device__ int rank() const { return 0; }
  __device__ int size() const { return 1; }
  __device__ void sync() { __syncthreads(); }
  __device__ Best best(Best b) { return block_best(b, sh); }
  __device__ u64 sum(u64 v) { return block_sum_u64(v, sh); }
  __device__ float sum(float v) { return block_sum_f32(v, sh); }
  __device__ BestBad best_bad(Best b, u64 bad) { return BestBad{block_best(b, sh), block_sum_u64(bad, sh)}; }
  __device__ u64* local_hist() { return sh.hist[0]; }
  // Makes sh.total the group's histogram of the pass just accumulated.
  __device__ void reduce_hist() {
    __syncthreads();
    for (int b = threadIdx.x; b < 256; b += kThreads) {
      u64 t = 0;
#pragma unroll
      for (int k = 0; k < kSub; ++k) t += sh.hist[0][b * kSub + k];
      sh.total[b] = t;
    }
    __syncthreads();
  }
};

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define PHOTON_HAVE_CLUSTERS 1
struct ClusterGroup {
  SharedState& sh;
  int phase = 0;
  int hist_phase = 0;
  __device__ int rank() const { return int(cg::this_cluster().block_rank()); }
  __device__ int size() const { return int(cg::this_cluster().num_blocks()); }
  __device__ void sync() { cg::this_cluster().sync(); }

  // Pushes this block's partial to slot `rank` of every block (remote
  // stores, one thread each), then after the barrier every thread combines
  // the local slots in rank order: no remote loads on the critical path.
  template <class T>
  __device__ const T* push(const T& mine) {
    static_assert(sizeof(T) <= kSlotBytes, "slot size");
    cg::cluster_group c = cg::this_cluster();
    T* local = reinterpret_cast<T*>(sh.gather[phase][c.block_rank()]);
    if (threadIdx.x < c.num_blocks()) *c.map_shared_rank(local, threadIdx.x) = mine;
    c.sync();
    const T* slots = reinterpret_cast<const T*>(sh.gather[phase][0]);
    phase ^= 1;
    return slots;
  }
  // Slot k of the returned gather row (rows are kSlotBytes apart).
  template <class T>
  __device__ static const T& at(const T* slots, unsigned k) {
    return *reinterpret_cast<const T*>(reinterpret_cast<const unsigned char*>(slots) + size_t(k) * kSlotBytes);
  }
  template <class T, class Op>
  __device__ T combine(T mine, Op op) {
    const T* slots = push(mine);
    const unsigned n = cg::this_cluster().num_blocks();
    T r = at(slots, 0);
    for (unsigned k = 1; k < n; ++k) r = op(r, at(slots, k));
    return r;
  }
  __device__ Best best(Best b) {
    return combine(block_best(b, sh), [](Best x, Best y) { return better(x, y); });
  }
  __device__ u64 sum(u64 v) {
    return combine(block_sum_u64(v, sh), [](u64 x, u64 y) { return x + y; });
  }
  __device__ float sum(float v) {
    return combine(block_sum_f32(v, sh), [](float x, float y) { return x + y; });
  }
  __device__ BestBad best_bad(Best b, u64 bad) {
    const BestBad mine{block_best(b, sh), block_sum_u64(bad, sh)};
    return combine(mine, [](BestBad x, BestBad y) { return BestBad{better(x.best, y.best), x.bad + y.bad}; });
  }
  __device__ u64* local_hist() { return sh.hist[hist_phase]; }
  __device__ void reduce_hist() {
    cg::cluster_group c = cg::this_cluster();
    __syncthreads();
    c.sync();
    for (int b = threadIdx.x; b < 256; b += kThreads) {
      u64 t = 0;
      for (unsigned r = 0; r < c.num_blocks(); ++r) {
        const u64* remote = c.map_shared_rank(&sh.hist[hist_phase][0], r);
#pragma unroll
        for (int k = 0; k < kSub; ++k) t += remote[b * kSub + k];
      }
      sh.total[b] = t;
    }
    __syncthreads();
    hist_phase ^= 1;
  }
};
#endif

// ---- rows: where a block finds its share of the logits ----------------------
// GlobalRow: the block walks the whole row in global memory every pass.
struct GlobalRow {
  const float* l;
  int V;
  __device__ void load(const float* row, int vocab, int /*rank*/, int /*group*/) {
    l = row;
    V = vocab;
  }
  // Visits this thread's ids in batches of kBatch loads in flight (a pass is
  // bound by L2 latency otherwise); the callers' reductions do not depend on
  // the visiting order.
  static constexpr int kBatch = 16;
  template <class F>
  __device__ void each(F&& f) const {
    int i = threadIdx.x;
    for (; i + (kBatch - 1) * kThreads < V; i += kBatch * kThreads) {
      float x[kBatch];
#pragma unroll
      for (int k = 0; k < kBatch; ++k) x[k] = l[i + k * kThreads];
#pragma unroll
      for (int k = 0; k < kBatch; ++k) f(i + k * kThreads, x[k]);
    }
    for (; i < V; i += kThreads) f(i, l[i]);
  }
};
// RegRow: the group's blocks split the row into contiguous ranges of
// E * kThreads ids (block `rank` owns the rank-th) and keep their E elements
// per thread in registers for every pass (thread t holds lo + k * kThreads + t).
template <int E>
struct RegRow {
  float v[E];
  int lo, hi, V;
  __device__ void load(const float* row, int vocab, int rank, int /*group*/) {
    V = vocab;
    lo = min(vocab, rank * E * kThreads);
    hi = min(vocab, lo + E * kThreads);
#pragma unroll
    for (int k = 0; k < E; ++k) {
      const int i = lo + k * kThreads + int(threadIdx.x);
      v[k] = i < hi ? row[i] : 0.f;
    }
  }
  template <class F>
  __device__ void each(F&& f) const {
#pragma unroll
    for (int k = 0; k < E; ++k) {
      const int i = lo + k * kThreads + int(threadIdx.x);
      if (i < hi) f(i, v[k]);
    }
  }
};

// The kept set of a row: candidates (w > 0) with w >= minp no later in pi than (lim_key, lim_id).
struct Keep {
  float temperature, m, minp;
  uint32_t lim_key;
  int lim_id;
  __device__ __forceinline__ float z_of(float l) const { return scaled_logit(l, temperature); }
  __device__ __forceinline__ bool kept(int i, float l, float& w, uint32_t& key) const {
    const float z = z_of(l);
    w = expf(z - m);
    if (!(w > 0.f) || w < minp) return false;
    key = order_key(z);
    return key < lim_key || (key == lim_key && i <= lim_id);
  }
};

// First bin whose running total (after `before`) exceeds target; sets sh.key / sh.before.
__device__ void pick_bin(SharedState& sh, uint32_t prefix, int shift, u64 before, u64 target) {
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    u64 local[8], sum = 0;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      local[k] = sh.total[8 * lane + k];
      sum += local[k];
    }
    u64 incl = sum;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const u64 t = __shfl_up_sync(kFullMask, incl, o);
      if (lane >= o) incl += t;
    }
    const unsigned hit = __ballot_sync(kFullMask, before + incl > target);
    const int owner = hit != 0 ? __ffs(hit) - 1 : 31;
    if (lane == owner) {
      u64 run = before + incl - sum;
      int digit = 8 * lane + 7;
      for (int k = 0; k < 8; ++k) {
        if (run + local[k] > target) {
          digit = 8 * lane + k;
          break;
        }
        if (k < 7) run += local[k];
      }
      sh.key = prefix | (uint32_t(digit) << shift);
      sh.before = run;
    }
  }
  __syncthreads();
}

// The (rank)-th smallest id (0-based) among kept elements whose key is `key`.
template <class Group, class Row>
__device__ int select_tied_id(Group& grp, const Row& row, const Keep& kp, uint32_t key, u64 rank, u64 count,
                              SharedState& sh) {
  if (count <= 1) {
    Best b{0.f, INT_MAX};
    row.each([&](int i, float l) {
      float w;
      uint32_t k;
      if (kp.kept(i, l, w, k) && k == key) b.id = min(b.id, i);
    });
    return grp.best(b).id;
  }
  uint32_t prefix = 0;
  u64 before = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    u64* hist = grp.local_hist();
    for (int b = threadIdx.x; b < kBins; b += kThreads) hist[b] = 0;
    __syncthreads();
    const uint32_t hi_mask = shift == 24 ? 0u : (0xffffffffu << (shift + 8));
    row.each([&](int i, float l) {
      float w;
      uint32_t k;
      if (kp.kept(i, l, w, k) && k == key && (uint32_t(i) & hi_mask) == (prefix & hi_mask))
        atomicAdd(&hist[((uint32_t(i) >> shift) & 255u) * kSub + (threadIdx.x & (kSub - 1))], 1ull);
    });
    grp.reduce_hist();
    pick_bin(sh, prefix, shift, before, rank);
    prefix = sh.key;
    before = sh.before;
    __syncthreads();
  }
  return int(prefix);
}

// The first kept element, in pi order, whose cumulative weight (1 per
// element, or its fixed-point mass) exceeds `target`; the caller guarantees
// the kept elements' total weight exceeds it. Returned as a limit (key, id).
template <class Group, class Row>
__device__ void find_first_exceeding(Group& grp, const Row& row, const Keep& kp, bool by_mass, u64 target,
                                     SharedState& sh, uint32_t* out_key, int* out_id) {
  uint32_t prefix = 0;
  u64 before = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    u64* hist = grp.local_hist();
    for (int b = threadIdx.x; b < kBins; b += kThreads) hist[b] = 0;
    __syncthreads();
    const uint32_t hi_mask = shift == 24 ? 0u : (0xffffffffu << (shift + 8));
    row.each([&](int i, float l) {
      float w;
      uint32_t key;
      if (kp.kept(i, l, w, key) && (key & hi_mask) == (prefix & hi_mask))
        atomicAdd(&hist[((key >> shift) & 255u) * kSub + (threadIdx.x & (kSub - 1))], by_mass ? fixed_mass(w) : 1ull);
    });
    grp.reduce_hist();
    pick_bin(sh, prefix, shift, before, target);
    prefix = sh.key;
    before = sh.before;
    __syncthreads();
  }
  // Every kept element with this key has the same z, hence the same weight.
  const float w = expf(key_to_z(prefix) - kp.m);
  const u64 unit = by_mass ? fixed_mass(w) : 1ull;
  const u64 tied_weight = sh.total[prefix & 255u];
  const u64 count = unit > 0 ? tied_weight / unit : 1;
  u64 rank = unit > 0 && target >= before ? (target - before) / unit : 0;
  if (count > 0 && rank > count - 1) rank = count - 1;
  __syncthreads();
  *out_key = prefix;
  *out_id = select_tied_id(grp, row, kp, prefix, rank, count, sh);
}

// One row of docs/sampling.md, computed by a group of blocks.
template <class Group, class Row>
__device__ void sample_row(Group& grp, SharedState& sh, const SampleArgs& a, int row_index) {
  const int tid = threadIdx.x, V = a.vocab;
  const bool leader = tid == 0 && grp.rank() == 0;
  float* l = a.logits + int64_t(row_index) * V;
  const SampleRowParams P = a.params != nullptr ? a.params[row_index] : a.inline_params[row_index];
  // Rank 0 writes the row's outcome.
  auto finish = [&](int status, int token, float logprob) {
    if (tid == 0 && grp.rank() == 0) {
      a.out_status[row_index] = status;
      a.out_ids[row_index] = token;
      if (a.out_logprob != nullptr) a.out_logprob[row_index] = logprob;
    }
  };
  Row row;
  row.load(l, V, grp.rank(), grp.size());

  // 1. Checks and the raw maximum, one pass and one reduction.
  Best mine{-INFINITY, INT_MAX};
  u64 bad = 0;
  row.each([&](int i, float v) {
    if (isnan(v) || v == INFINITY) bad = 1;
    else if (beats(v, i, mine.v, mine.id)) mine = Best{v, i};
  });
  const BestBad checked = grp.best_bad(mine, bad);
  const Best raw = checked.best;
  if (checked.bad) return finish(kSampleBadLogit, -1, NAN);
  if (raw.v == -INFINITY) return finish(kSampleAllMasked, -1, NAN);

  const bool has_hist = P.hist_end > P.hist_begin;
  const bool penalized =
      has_hist && (P.repetition_penalty != 1.f || P.frequency_penalty != 0.f || P.presence_penalty != 0.f);
  const bool need_lse = a.out_logprob != nullptr || P.num_logprobs > 0;
  // Without penalties and prefix rules the Gumbel-max pass also sums the log-sum-exp.
  const bool fuse_lse = need_lse && !penalized && P.temperature != 0.f && P.top_k == 0 && P.top_p >= 1.f;

  // Logprobs of the raw logits: log-sum-exp, then the top-n (logit written
  // now, the log-sum-exp subtracted once known).
  float lse = 0.f;
  if (need_lse && !fuse_lse) {
    float s = 0.f;
    row.each([&](int, float v) { s += expf(v - raw.v); });
    lse = raw.v + logf(grp.sum(s));
  }
  Best prev{INFINITY, -1};
  for (int r = 0; r < a.max_logprobs; ++r) {
    const int64_t o = int64_t(row_index) * a.max_logprobs + r;
    if (r < P.num_logprobs) {
      Best b{-INFINITY, INT_MAX};
      row.each([&](int i, float v) {
        if ((v < prev.v || (v == prev.v && i > prev.id)) && beats(v, i, b.v, b.id)) b = Best{v, i};
      });
      prev = grp.best(b);
      if (leader) {
        a.out_top_ids[o] = prev.id;
        a.out_top_logprobs[o] = prev.v;
      }
    } else if (leader) {
      a.out_top_ids[o] = -1;
      a.out_top_logprobs[o] = -INFINITY;
    }
  }

  // 2. Penalties, written to the row in global memory (raw values of the history kept aside).
  if (penalized) {
    for (int j = P.hist_begin + grp.rank() * kThreads + tid; j < P.hist_end; j += grp.size() * kThreads) {
      const int t = a.hist_tokens[j];
      float v = l[t];
      a.hist_raw[j] = v;
      if (P.repetition_penalty != 1.f) v = v > 0.f ? v / P.repetition_penalty : v * P.repetition_penalty;
      const int c = a.hist_counts[j];
      if (c > 0) {
        v = v - P.frequency_penalty * float(c);
        v = v - P.presence_penalty;
      }
      l[t] = v;
    }
    __threadfence();
    grp.sync();
    row.load(l, V, grp.rank(), grp.size());
  }

  int chosen = -1;
  if (P.temperature == 0.f) {  // 3. greedy
    chosen = raw.id;
    if (penalized) {
      Best b{-INFINITY, INT_MAX};
      row.each([&](int i, float v) {
        if (beats(v, i, b.v, b.id)) b = Best{v, i};
      });
      chosen = grp.best(b).id;
    }
  } else {  // 4. distribution and 5. the draw
    Keep kp{P.temperature, 0.f, 0.f, 0xffffffffu, INT_MAX};
    float zm = raw.v / P.temperature;  // division is monotone: max(l / T) = max(l) / T
    if (penalized) {
      Best b{-INFINITY, INT_MAX};
      row.each([&](int, float v) { b.v = fmaxf(b.v, kp.z_of(v)); });
      zm = grp.best(b).v;
    }
    if (!isfinite(zm)) return finish(kSampleTempOverflow, -1, NAN);
    kp.m = zm == 0.f ? 0.f : zm;
    bool cut = false;  // does top-k cut the candidates?
    if (P.top_k > 0) {
      u64 n = 0;
      row.each([&](int i, float v) {
        float w;
        uint32_t k;
        n += kp.kept(i, v, w, k) ? 1 : 0;
      });
      n = grp.sum(n);
      if (u64(P.top_k) < n) {
        find_first_exceeding(grp, row, kp, false, u64(P.top_k) - 1, sh, &kp.lim_key, &kp.lim_id);
        cut = true;
      }
    }
    const double u = philox_uniform(P.seed, P.step);
    if (!cut && P.top_p >= 1.f) {
      if (P.min_p > 0.f) kp.minp = P.min_p;  // w_max = 1
      // Gumbel-max over the kept ids (docs/sampling.md, section 5), the log-sum-exp in the same pass.
      Best b{-INFINITY, INT_MAX};
      float lsum = 0.f;
      const bool unit_temp = P.temperature == 1.f && !penalized;  // then w = exp(l - raw max) exactly
      const float skip_below = gumbel_skip_below(kp.m);  // ids further below cannot win: no noise for them
      row.each([&](int i, float v) {
        const float z = kp.z_of(v);
        const float w = expf(z - kp.m);
        if (w > 0.f && w >= kp.minp && z >= skip_below) {
          const float score = z + gumbel_noise(P.seed, P.step, uint32_t(i));
          if (beats(score, i, b.v, b.id)) b = Best{score, i};
        }
        if (fuse_lse) lsum += unit_temp ? w : expf(v - raw.v);
      });
      chosen = grp.best(b).id;
      if (fuse_lse) lse = raw.v + logf(grp.sum(lsum));
    } else {
      if (P.top_p < 1.f) {
        u64 mass = 0;
        row.each([&](int i, float v) {
          float w;
          uint32_t k;
          if (kp.kept(i, v, w, k)) mass += fixed_mass(w);
        });
        mass = grp.sum(mass);
        const double t = ceil(double(P.top_p) * double(mass)) - 1.0;  // first prefix with cum >= top_p * M
        u64 target = t <= 0.0 ? 0 : u64(t);
        if (target > mass - 1) target = mass - 1;
        find_first_exceeding(grp, row, kp, true, target, sh, &kp.lim_key, &kp.lim_id);
      }
      if (P.min_p > 0.f) kp.minp = P.min_p;  // w_max = 1
      u64 total = 0;
      row.each([&](int i, float v) {
        float w;
        uint32_t k;
        if (kp.kept(i, v, w, k)) total += fixed_mass(w);
      });
      total = grp.sum(total);
      u64 target = u64(floor(u * double(total)));  // first prefix with cum > u * S
      if (target > total - 1) target = total - 1;
      uint32_t key;
      find_first_exceeding(grp, row, kp, true, target, sh, &key, &chosen);
    }
  }

  // The top-n logprobs, now that the log-sum-exp is known (the leader wrote their logits).
  if (leader)
    for (int r = 0; r < P.num_logprobs; ++r) a.out_top_logprobs[int64_t(row_index) * a.max_logprobs + r] -= lse;

  // The chosen token's raw-logit logprob, by rank 0.
  float raw_chosen = 0.f;
  if (grp.rank() != 0) return;
  if (a.out_logprob != nullptr) {
    if (tid == 0) sh.hist_index = -1;
    __syncthreads();
    if (penalized)
      for (int j = P.hist_begin + tid; j < P.hist_end; j += kThreads)
        if (a.hist_tokens[j] == chosen) sh.hist_index = j;  // history tokens are distinct
    __syncthreads();
    raw_chosen = sh.hist_index >= 0 ? a.hist_raw[sh.hist_index] : l[chosen];
  }
  finish(kSampleOk, chosen, raw_chosen - lse);
}

__global__ void __launch_bounds__(kThreads) sample_block_kernel(SampleArgs a) {
  __shared__ SharedState sh;
  BlockGroup grp{sh};
  pdl_wait();  // the logits come from the kernel before
  sample_row<BlockGroup, GlobalRow>(grp, sh, a, blockIdx.x);
}

template <int E>
__global__ void __launch_bounds__(kThreads) sample_cluster_kernel(SampleArgs a) {
#if defined(PHOTON_HAVE_CLUSTERS)
  __shared__ SharedState sh;
  ClusterGroup grp{sh};
  pdl_wait();  // the logits come from the kernel before
  const int row = int(blockIdx.x / cg::this_cluster().num_blocks());
  sample_row<ClusterGroup, RegRow<E>>(grp, sh, a, row);
  cg::this_cluster().sync();  // no block leaves while others may read its shared memory
#else
  pdl_wait();
  __trap();  // launched only on sm_90 and newer
#endif
}

template <int E>
Status launch_cluster(const SampleArgs& a, int cluster, cudaStream_t stream) {
  auto kernel = sample_cluster_kernel<E>;
  if (cluster > 8) PHOTON_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  PHOTON_CUDA_TRY(launch_kernel_in_clusters(kernel, dim3(unsigned(a.num_rows * cluster)), dim3(kThreads), 0, stream,
                                            unsigned(cluster), a));
  return {};
}

}  // namespace

PHOTON_PRELOAD_UNIT(sampling, sample_block_kernel)

Status launch_sample(const SampleArgs& a, int32_t compute_major, int32_t num_sms, cudaStream_t stream) {
  if (a.num_rows < 0 || a.vocab <= 0 || a.max_logprobs < 0) return bad_launch("sample", "bad R, V or max_logprobs");
  if (a.params == nullptr && a.num_rows > kSampleInlineRows)
    return bad_launch("sample", "params inline only up to kSampleInlineRows rows");
  if (a.num_rows == 0) return {};
  if (a.one_pass) return launch_sample_one_pass(a, num_sms, stream);
  // Clusters cut one row's latency (up to 16 SMs on it) but a GPC runs about
  // one 16-block cluster at a time: past a few rows, a block per row is faster.
  if (compute_major >= 9 && a.num_rows <= kMaxClusterRows) {
    // Smallest register share E that holds the row in at most kMaxCluster blocks.
    for (int E : {8, 16, 24, 32}) {
      const int64_t per_block = int64_t(kThreads) * E;
      if (int64_t(a.vocab) > per_block * kMaxCluster) continue;
      const int cluster = int((a.vocab + per_block - 1) / per_block);
      switch (E) {
        case 8: return launch_cluster<8>(a, cluster, stream);
        case 16: return launch_cluster<16>(a, cluster, stream);
        case 24: return launch_cluster<24>(a, cluster, stream);
        default: return launch_cluster<32>(a, cluster, stream);
      }
    }
  }
  PHOTON_CUDA_TRY(launch_kernel(sample_block_kernel, dim3(unsigned(a.num_rows)), dim3(kThreads), 0, stream, a));
  return {};
}

}  // namespace photon::cuda
