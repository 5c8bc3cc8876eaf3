#include "cuda/plan_staging.hpp"

#include <algorithm>
#include <cstring>
#include <string>

namespace photon::cuda {

namespace {

constexpr size_t kAlignInts = 4;  // every array starts 16-byte aligned
size_t align_ints(size_t n) { return (n + kAlignInts - 1) / kAlignInts * kAlignInts; }

Unexpected bad_plan(const std::string& what) { return fail(Errc::invalid_argument, "stage_plan: " + what); }

// Array sizes and the ranges the kernels rely on for memory safety.
Result<void> check_plan(const BatchPlan& plan) {
  const size_t T = plan.input_ids.size();
  const int32_t S = plan.num_seqs();
  if (plan.positions.size() != T || plan.slot_mapping.size() != T)
    return bad_plan("positions and slot_mapping must have one entry per input id");
  if (plan.context_lens.size() != size_t(S)) return bad_plan("context_lens must have one entry per sequence");
  if (plan.max_blocks_per_seq < 0 || plan.block_tables.size() != size_t(S) * size_t(plan.max_blocks_per_seq))
    return bad_plan("block_tables must be [S, max_blocks_per_seq] (call BatchPlan::finalize)");
  if (S > 0 && (plan.query_start.front() != 0 || size_t(plan.query_start.back()) != T))
    return bad_plan("query_start must run from 0 to the token count");
  if (S == 0 && T > 0) return bad_plan("tokens without sequences");
  for (int32_t s = 0; s < S; ++s)
    if (plan.query_start[size_t(s) + 1] < plan.query_start[size_t(s)])
      return bad_plan("query_start decreases at sequence " + std::to_string(s));
  for (int32_t r : plan.logits_rows)
    if (r < 0 || size_t(r) >= T) return bad_plan("logits row " + std::to_string(r) + " outside the step's tokens");
  return {};
}

void record_ids(const BatchPlan& plan, StagedPlanInfo& info) {
  info.min_input_id = 0;
  info.max_input_id = -1;
  if (!plan.input_ids.empty()) {
    const auto [lo, hi] = std::minmax_element(plan.input_ids.begin(), plan.input_ids.end());
    info.min_input_id = *lo;
    info.max_input_id = *hi;
  }
}

}  // namespace

PlanStaging::~PlanStaging() {
  auto free_host = [](HostBuffer& h) {
    if (h.copied != nullptr) {
      cudaEventSynchronize(h.copied);
      cudaEventDestroy(h.copied);
    }
    if (h.p != nullptr) cudaFreeHost(h.p);
  };
  free_host(host_tight_);
  for (HostBuffer& h : host_graph_) free_host(h);
  for (cudaEvent_t e : read_done_)
    if (e != nullptr) cudaEventDestroy(e);
  if (tail_ != nullptr) cudaEventDestroy(tail_);
  if (copy_stream_ != nullptr) {
    cudaStreamSynchronize(copy_stream_);
    cudaStreamDestroy(copy_stream_);
  }
  alloc_.release(tight_.device);
  for (Region& r : graph_) alloc_.release(r.device);
}

Status PlanStaging::enable_copy_stream() {
  if (copy_stream_ != nullptr) return {};
  if (last_region_ >= 0) return fail(Errc::internal, "stage_plan: the copy stream must be enabled before staging");
  PHOTON_CUDA_TRY(cudaEventCreateWithFlags(&tail_, cudaEventDisableTiming));
  for (cudaEvent_t& e : read_done_) PHOTON_CUDA_TRY(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  PHOTON_CUDA_TRY(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
  return {};
}

Status PlanStaging::ensure_host(HostBuffer& h, size_t bytes) {
  if (h.copied == nullptr) PHOTON_CUDA_TRY(cudaEventCreateWithFlags(&h.copied, cudaEventDisableTiming));
  PHOTON_CUDA_TRY(cudaEventSynchronize(h.copied));  // the previous upload has left h.p
  if (bytes <= h.bytes) return {};
  if (h.p != nullptr) PHOTON_CUDA_TRY(cudaFreeHost(h.p));
  h.p = nullptr;
  h.bytes = 0;
  const size_t grown = std::max(bytes, size_t(64) << 10) * 3 / 2;
  void* p = nullptr;
  PHOTON_CUDA_TRY(cudaMallocHost(&p, grown));
  h.p = static_cast<int32_t*>(p);
  h.bytes = grown;
  return {};
}

Result<cudaStream_t> PlanStaging::order_copy(int32_t region, bool ids_on_device) {
  // ids_on_device: the copy leaves the ids region alone, and the region's memory has not moved
  // (new memory may be a released buffer that launches in flight still use).
  const int32_t last = last_region_;
  last_region_ = region;
  if (copy_stream_ == nullptr) return stream_;
  // Everything launched since the last stage_padded read the last staged region (and earlier
  // regions' readers come before it in stream order).
  if (last >= 0) PHOTON_CUDA_TRY(cudaEventRecord(read_done_[size_t(last)], stream_));
  if (ids_on_device && last >= 0 && last != region) {
    PHOTON_CUDA_TRY(cudaStreamWaitEvent(copy_stream_, read_done_[size_t(region)]));
  } else {
    PHOTON_CUDA_TRY(cudaEventRecord(tail_, stream_));
    PHOTON_CUDA_TRY(cudaStreamWaitEvent(copy_stream_, tail_));
  }
  return copy_stream_;
}

Status PlanStaging::ensure_device(Region& r, size_t bytes) {
  if (bytes <= r.bytes) return {};
  alloc_.release(r.device);
  r = Region{};
  const size_t grown = std::max(bytes, size_t(64) << 10) * 3 / 2;
  PHOTON_ASSIGN_OR_RETURN(r.device, alloc_.allocate(grown));
  r.bytes = grown;
  return {};
}

Result<StepPlanView> PlanStaging::stage(const BatchPlan& plan) {
  PHOTON_TRY(check_plan(plan));
  const size_t T = plan.input_ids.size(), S = size_t(plan.num_seqs()), R = plan.logits_rows.size();
  const size_t W = size_t(plan.max_blocks_per_seq);
  // Offsets in ints: ids, positions, query_start, context_lens, block_tables, slot_mapping, logits_rows.
  const size_t o_ids = 0, o_pos = align_ints(T), o_qs = o_pos + align_ints(T), o_ctx = o_qs + align_ints(S + 1),
               o_bt = o_ctx + align_ints(S), o_slot = o_bt + align_ints(S * W), o_rows = o_slot + align_ints(T),
               total = o_rows + align_ints(R);
  PHOTON_TRY(ensure_host(host_tight_, total * 4));
  int32_t* const hp = host_tight_.p;
  auto put = [&](size_t off, const std::vector<int32_t>& v) {
    if (!v.empty()) std::memcpy(hp + off, v.data(), v.size() * 4);
  };
  put(o_ids, plan.input_ids);
  put(o_pos, plan.positions);
  put(o_qs, plan.query_start);
  put(o_ctx, plan.context_lens);
  put(o_bt, plan.block_tables);
  put(o_slot, plan.slot_mapping);
  put(o_rows, plan.logits_rows);
  PHOTON_TRY(ensure_device(tight_, total * 4));
  PHOTON_CUDA_TRY(cudaMemcpyAsync(tight_.device, hp, total * 4, cudaMemcpyHostToDevice, stream_));
  PHOTON_CUDA_TRY(cudaEventRecord(host_tight_.copied, stream_));

  const int32_t* d = static_cast<const int32_t*>(tight_.device);
  StepPlanView v;
  v.num_tokens = int32_t(T);
  v.num_seqs = int32_t(S);
  v.num_logits = int32_t(R);
  v.max_blocks_per_seq = int32_t(W);
  for (size_t s = 0; s < S; ++s) {
    v.max_query_len = std::max(v.max_query_len, plan.query_start[s + 1] - plan.query_start[s]);
    v.max_context_len = std::max(v.max_context_len, plan.context_lens[s]);
  }
  v.input_ids = d + o_ids;
  v.positions = d + o_pos;
  v.query_start = d + o_qs;
  v.context_lens = d + o_ctx;
  v.block_tables = d + o_bt;
  v.slot_mapping = d + o_slot;
  v.logits_rows = d + o_rows;
  v.logits_of_every_token = logits_of_every_token(plan);
  record_ids(plan, info_);
  info_.device_ids = v.input_ids;
  info_.num_tokens = v.num_tokens;
  info_.num_seqs = v.num_seqs;
  info_.max_blocks_per_seq = v.max_blocks_per_seq;
  info_.positions = hp + o_pos;
  info_.query_start = hp + o_qs;
  info_.context_lens = hp + o_ctx;
  info_.block_tables = hp + o_bt;
  info_.slot_mapping = hp + o_slot;
  checked_block_size_ = 0;
  return v;
}

namespace {
// Fixed int offsets of the padded layout for capacity C: ids, positions, context_lens,
// slot_mapping, logits_rows, query_start, the side region (C rows of kSideRowBytes), block_tables.
struct PaddedLayout {
  size_t ids, pos, ctx, slot, rows, qs, side, bt;
  explicit PaddedLayout(size_t C)
      : ids(0), pos(align_ints(C)), ctx(pos + align_ints(C)), slot(ctx + align_ints(C)), rows(slot + align_ints(C)),
        qs(rows + align_ints(C)), side(qs + align_ints(C + 1)), bt(side + C * PlanStaging::kSideRowBytes / 4) {}
};
}  // namespace

const void* PlanStaging::graph_side(int32_t region) const noexcept {
  const void* d = graph_[size_t(region)].device;
  if (d == nullptr) return nullptr;
  return static_cast<const int32_t*>(d) + PaddedLayout(size_t(graph_capacity_)).side;
}

Result<StepPlanView> PlanStaging::stage_padded(const BatchPlan& plan, int32_t bucket, int32_t width, int32_t region,
                                               std::span<const std::byte> side, bool ids_on_device) {
  PHOTON_TRY(check_plan(plan));
  if (region < 0 || region >= kRegions) return fail(Errc::internal, "stage_plan: no such graph region");
  if (bucket <= 0 || side.size() % size_t(bucket) != 0 || side.size() / size_t(bucket) > kSideRowBytes)
    return fail(Errc::internal, "stage_plan: the side payload must be bucket rows of at most 64 bytes");
  const int32_t S = plan.num_seqs();
  if (plan.num_tokens() != S || plan.num_logits() != S || S > bucket || plan.max_blocks_per_seq > width)
    return fail(Errc::internal, "stage_plan: a padded plan must be decode-only and fit its bucket");
  for (int32_t s = 0; s < S; ++s)
    if (plan.logits_rows[size_t(s)] != s)
      return fail(Errc::internal, "stage_plan: a padded plan must want the logits of every sequence in order");
  const bool moves = bucket > graph_capacity_ || width > graph_width_;
  if (moves) {
    graph_capacity_ = std::max(graph_capacity_, bucket);
    graph_width_ = std::max(graph_width_, width);
    for (Region& r : graph_) {
      alloc_.release(r.device);
      r = Region{};
    }
    ++graph_epoch_;
  }
  const size_t C = size_t(graph_capacity_), B = size_t(bucket), Wd = size_t(width);
  const size_t Wp = size_t(plan.max_blocks_per_seq);
  const PaddedLayout L(C);
  const size_t o_ids = L.ids, o_pos = L.pos, o_ctx = L.ctx, o_slot = L.slot, o_rows = L.rows, o_qs = L.qs,
               o_bt = L.bt;
  const size_t capacity_ints = o_bt + C * size_t(graph_width_);
  const size_t used_ints = o_bt + B * Wd;
  HostBuffer& host = host_graph_[size_t(region)];
  PHOTON_TRY(ensure_host(host, capacity_ints * 4));
  int32_t* const hp = host.p;
  for (size_t i = 0; i < B; ++i) {
    const bool real = i < size_t(S);
    hp[o_ids + i] = real ? plan.input_ids[i] : 0;
    hp[o_pos + i] = real ? plan.positions[i] : 0;
    hp[o_ctx + i] = real ? plan.context_lens[i] : 0;
    hp[o_slot + i] = real ? plan.slot_mapping[i] : -1;
    hp[o_rows + i] = int32_t(i);
    hp[o_qs + i] = int32_t(i);
    int32_t* row = hp + o_bt + i * Wd;
    size_t b = 0;
    if (real)
      for (; b < Wp; ++b) row[b] = plan.block_tables[i * Wp + b];
    for (; b < Wd; ++b) row[b] = -1;
  }
  hp[o_qs + B] = int32_t(B);
  if (!side.empty()) std::memcpy(hp + L.side, side.data(), side.size());  // rows packed: [bucket][row bytes]
  for (Region& r : graph_)  // both at once: a sampled graph stores ids into the other region
    if (r.device == nullptr) {
      PHOTON_ASSIGN_OR_RETURN(r.device, alloc_.allocate(capacity_ints * 4));
      r.bytes = capacity_ints * 4;
    }
  Region& dev = graph_[size_t(region)];
  const size_t first = ids_on_device ? o_pos : 0;  // the ids region comes first
  PHOTON_ASSIGN_OR_RETURN(const cudaStream_t copy, order_copy(region, ids_on_device && !moves));
  PHOTON_CUDA_TRY(cudaMemcpyAsync(static_cast<int32_t*>(dev.device) + first, hp + first, (used_ints - first) * 4,
                                  cudaMemcpyHostToDevice, copy));
  PHOTON_CUDA_TRY(cudaEventRecord(host.copied, copy));
  if (copy != stream_) PHOTON_CUDA_TRY(cudaStreamWaitEvent(stream_, host.copied));

  const int32_t* d = static_cast<const int32_t*>(dev.device);
  StepPlanView v;
  v.num_tokens = bucket;
  v.num_seqs = bucket;
  v.num_logits = bucket;
  v.max_blocks_per_seq = width;
  v.max_query_len = 1;
  for (int32_t c : plan.context_lens) v.max_context_len = std::max(v.max_context_len, c);
  v.input_ids = d + o_ids;
  v.positions = d + o_pos;
  v.query_start = d + o_qs;
  v.context_lens = d + o_ctx;
  v.block_tables = d + o_bt;
  v.slot_mapping = d + o_slot;
  v.logits_rows = d + o_rows;
  v.logits_of_every_token = true;  // the padded rows too: row i wants token i's logits
  if (ids_on_device) {
    info_.min_input_id = 0;
    info_.max_input_id = -1;
  } else {
    record_ids(plan, info_);
  }
  info_.device_ids = v.input_ids;
  info_.num_tokens = bucket;
  info_.num_seqs = bucket;
  info_.max_blocks_per_seq = width;
  info_.positions = hp + o_pos;
  info_.query_start = hp + o_qs;
  info_.context_lens = hp + o_ctx;
  info_.block_tables = hp + o_bt;
  info_.slot_mapping = hp + o_slot;
  checked_block_size_ = 0;
  return v;
}

Status PlanStaging::check_cache(int32_t block_size, int64_t num_blocks) {
  if (block_size == checked_block_size_ && num_blocks == checked_num_blocks_) return {};
  const StagedPlanInfo& p = info_;
  auto bad = [](const std::string& what) { return fail(Errc::out_of_range, "batch plan vs KV cache: " + what); };
  const int64_t W = p.max_blocks_per_seq;
  for (int32_t s = 0; s < p.num_seqs; ++s) {
    const int64_t ctx = p.context_lens[s];
    const int32_t* table = p.block_tables + s * W;
    if (ctx < 0 || ctx > W * block_size)
      return bad("context length " + std::to_string(ctx) + " of sequence " + std::to_string(s) +
                 " beyond its block table of " + std::to_string(W) + " blocks");
    for (int64_t b = 0; b * block_size < ctx; ++b)
      if (table[b] < 0 || table[b] >= num_blocks)
        return bad("block id " + std::to_string(table[b]) + " of sequence " + std::to_string(s) +
                   " outside the cache's " + std::to_string(num_blocks) + " blocks");
    for (int32_t t = p.query_start[s]; t < p.query_start[s + 1]; ++t) {
      const int64_t pos = p.positions[t], slot = p.slot_mapping[t];
      if (ctx == 0 && slot < 0) continue;  // batch padding: writes nothing, reads nothing
      if (pos < 0 || pos >= ctx)
        return bad("position " + std::to_string(pos) + " of token " + std::to_string(t) +
                   " outside its sequence's context of " + std::to_string(ctx));
      if (slot != int64_t(table[pos / block_size]) * block_size + pos % block_size)
        return bad("slot " + std::to_string(slot) + " of token " + std::to_string(t) +
                   " is not where its block table puts position " + std::to_string(pos));
    }
  }
  checked_block_size_ = block_size;
  checked_num_blocks_ = num_blocks;
  return {};
}

}  // namespace photon::cuda
