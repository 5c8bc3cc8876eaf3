// The one-pass sampling kernel (sampling.cuh, launch_sample_one_pass): greedy
// and Gumbel-max rows (docs/sampling.md, sections 3 and 5) without penalties,
// min-p or top-n logprobs.
#include <algorithm>
#include <climits>
#include <cmath>

#include "core/gumbel.hpp"
#include "cuda/common.cuh"
#include "cuda/launch.cuh"
#include "cuda/sampling.cuh"
#include "cuda/sampling_device.cuh"
#include "cuda/sampling_one_pass.cuh"

namespace photon::cuda {

namespace {

using namespace sampling_detail;
using namespace one_pass;

// Grid: R * slices blocks of kThreads; block b serves row b / slices, slice s = b % slices: the quads
// [s * qpt * kThreads, (s + 1) * qpt * kThreads) of the row (qpt = quads per thread), thread t the
// quads t + k kThreads, in chunks of C (one Philox call and one 16-byte load per quad). The first
// chunk's noise is formed before pdl_wait() (it depends only on the row's parameters); later chunks'
// noise while their loads are in flight.
template <int C, bool kVec>
__global__ void __launch_bounds__(kThreads, 4) sample_one_pass_kernel(SampleArgs a, int slices, int qpt) {
  const StepTraceScope step_trace_scope(step_trace_tag(kTraceSampleOnePass, 0, a.vocab, slices));
  __shared__ Acc shared[kWarps];
  __shared__ bool last;
  const int row = int(blockIdx.x) / slices, slice = int(blockIdx.x) % slices, tid = int(threadIdx.x);
  const int V = a.vocab;
  const SampleRowParams P = a.params != nullptr ? a.params[row] : a.inline_params[row];
  const bool greedy = P.temperature == 0.f;
  const bool want_lse = a.out_logprob != nullptr;
  const int quad_base = slice * qpt * kThreads + tid;

  float g[C][4];
  chunk_noise<C>(P, greedy, quad_base, qpt, V, g);
  pdl_wait();  // the logits come from the kernel before
  const float* l = a.logits + int64_t(row) * V;

  Acc acc{{-INFINITY, INT_MAX}, -INFINITY, 0.f, 0};
  for (int c = 0; c < qpt; c += C) {
    const int q0 = quad_base + c * kThreads;
    float v[C][4];
    chunk_load<C, kVec>(l, q0, qpt - c, V, v);
    if (c > 0) chunk_noise<C>(P, greedy, q0, qpt - c, V, g);
    float cmax = -INFINITY;
#pragma unroll
    for (int k = 0; k < C; ++k)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int i = 4 * (q0 + k * kThreads) + j;
        const float x = v[k][j];
        if (isnan(x) || x == INFINITY) acc.flags |= kFlagBad;
        cmax = fmaxf(cmax, x);
        float score = x;
        if (!greedy) {
          const float z = scaled_logit(x, P.temperature);
          if (z == INFINITY) acc.flags |= kFlagOverflow;
          score = z + g[k][j];
        }
        if (c + k < qpt && i < V && beats(score, i, acc.best.v, acc.best.id)) acc.best = Best{score, i};
      }
    if (want_lse && cmax != -INFINITY) {
      float csum = 0.f;
#pragma unroll
      for (int k = 0; k < C; ++k)
#pragma unroll
        for (int j = 0; j < 4; ++j) csum += expf(v[k][j] - cmax);  // -inf padding adds 0
      merge_lse(acc.max, acc.sum, cmax, csum);
    } else {
      acc.max = fmaxf(acc.max, cmax);
    }
  }
  acc = block_merge(acc, shared);

  auto* partials = static_cast<Partial*>(a.one_pass_partials) + int64_t(row) * slices;
  if (tid == 0) {
    partials[slice] = Partial{acc.best.v, acc.best.id, acc.max, acc.sum, acc.flags, {0, 0, 0}};
    __threadfence();
    last = atomicAdd(&a.one_pass_arrivals[row], 1) == slices - 1;
  }
  __syncthreads();
  if (!last) return;

  // The row's last block: combine the slices in slice order.
  __threadfence();
  Acc r{{-INFINITY, INT_MAX}, -INFINITY, 0.f, 0};
  for (int s = tid; s < slices; s += kThreads) {
    const Partial* p = partials + s;  // written by other blocks: read through L2
    merge(r, Acc{{__ldcg(&p->score), __ldcg(&p->id)}, __ldcg(&p->max), __ldcg(&p->sum), __ldcg(&p->flags)});
  }
  r = block_merge(r, shared);
  if (tid == 0) {
    a.one_pass_arrivals[row] = 0;  // ready for the next launch
    int status = kSampleOk, token = -1;
    float logprob = NAN;
    if (r.flags & kFlagBad) status = kSampleBadLogit;
    else if (r.max == -INFINITY) status = kSampleAllMasked;
    else if (r.flags & kFlagOverflow) status = kSampleTempOverflow;
    else {
      token = r.best.id;
      if (a.out_logprob != nullptr) logprob = l[token] - (r.max + logf(r.sum));
    }
    const int out_row = row + P.out_offset;
    a.out_status[out_row] = status;
    a.out_ids[out_row] = token;
    if (a.out_logprob != nullptr) a.out_logprob[out_row] = logprob;
    if (a.next_ids != nullptr) a.next_ids[row] = token >= 0 ? token : 0;  // a failed row's step is dropped
    for (int k = 0; k < a.max_logprobs; ++k) {
      a.out_top_ids[int64_t(row) * a.max_logprobs + k] = -1;
      a.out_top_logprobs[int64_t(row) * a.max_logprobs + k] = -INFINITY;
    }
  }
}

}  // namespace

PHOTON_STEP_TRACE_UNIT(sampling_gumbel)
PHOTON_PRELOAD_UNIT(sampling_gumbel, sample_one_pass_kernel<1, true>)

int32_t one_pass_slices(int32_t num_rows, int32_t vocab, int32_t num_sms, int32_t* quads_per_thread) {
  // About one wave of 4 blocks per SM, at least one quad per thread: slices = min(quads per row /
  // kThreads, 4 SMs / R) (at least 1), then the quads per thread that cover the row.
  const int64_t quads = (int64_t(vocab) + 3) / 4;
  const int64_t most = std::max<int64_t>(1, (quads + kThreads - 1) / kThreads);
  const int64_t want = 4 * int64_t(num_sms) / std::max(num_rows, 1);
  const int64_t slices = std::max<int64_t>(1, std::min(most, want));
  const int64_t qpt = (quads + slices * kThreads - 1) / (slices * kThreads);
  if (quads_per_thread != nullptr) *quads_per_thread = int32_t(qpt);
  return int32_t((quads + qpt * kThreads - 1) / (qpt * kThreads));  // no empty slice
}

Status launch_sample_one_pass(const SampleArgs& a, int32_t num_sms, cudaStream_t stream) {
  if (a.num_rows <= 0 || a.vocab <= 0 || a.max_logprobs < 0) return bad_launch("sample_one_pass", "bad R, V or max_logprobs");
  if (a.params == nullptr && a.num_rows > kSampleInlineRows)
    return bad_launch("sample_one_pass", "params inline only up to kSampleInlineRows rows");
  if (a.one_pass_partials == nullptr || a.one_pass_arrivals == nullptr)
    return bad_launch("sample_one_pass", "no workspace (one_pass_partials, one_pass_arrivals)");
  int32_t qpt = 1;
  const int32_t slices = one_pass_slices(a.num_rows, a.vocab, num_sms, &qpt);
  const dim3 grid(unsigned(int64_t(a.num_rows) * slices));
  const bool vec = a.vocab % 4 == 0 && is_aligned(a.logits, 16);
  // One quad per thread (one row, up to ~4 SMs' worth of slices) needs no chunk loop state.
  auto kernel = qpt == 1 ? (vec ? sample_one_pass_kernel<1, true> : sample_one_pass_kernel<1, false>)
                         : (vec ? sample_one_pass_kernel<4, true> : sample_one_pass_kernel<4, false>);
  PHOTON_CUDA_TRY(launch_kernel(kernel, grid, dim3(kThreads), 0, stream, a, int(slices), int(qpt)));
  return {};
}

}  // namespace photon::cuda
