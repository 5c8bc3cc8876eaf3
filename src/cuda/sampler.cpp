#include "cuda/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

namespace photon::cuda {

namespace {

size_t align16(size_t n) { return (n + 15) / 16 * 16; }

// The one-pass kernel for batches that allow it; PHOTON_CUDA_SAMPLE_ONE_PASS=0 sends every batch to
// the general kernel (measurements, tests of that path).
bool one_pass_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("PHOTON_CUDA_SAMPLE_ONE_PASS");
    return e == nullptr || e[0] != '0';
  }();
  return on;
}

Unexpected bad_row(int32_t row, const std::string& what) {
  return fail(Errc::invalid_argument, "sample: row " + std::to_string(row) + ": " + what);
}

// docs/sampling.md, section 0 (the host-side part).
Status check_params(int32_t row, const SamplingParams& p, int32_t max_logprobs, int64_t V) {
  if (!std::isfinite(p.temperature) || p.temperature < 0.f)
    return bad_row(row, "temperature " + std::to_string(p.temperature) + " must be finite and >= 0");
  if (p.top_k < 0) return bad_row(row, "top_k " + std::to_string(p.top_k) + " must be >= 0");
  if (!(p.top_p > 0.f && p.top_p <= 1.f)) return bad_row(row, "top_p " + std::to_string(p.top_p) + " must be in (0, 1]");
  if (!(p.min_p >= 0.f && p.min_p <= 1.f)) return bad_row(row, "min_p " + std::to_string(p.min_p) + " must be in [0, 1]");
  if (!std::isfinite(p.repetition_penalty) || p.repetition_penalty <= 0.f)
    return bad_row(row, "repetition_penalty " + std::to_string(p.repetition_penalty) + " must be finite and > 0");
  if (!std::isfinite(p.presence_penalty)) return bad_row(row, "presence_penalty must be finite");
  if (!std::isfinite(p.frequency_penalty)) return bad_row(row, "frequency_penalty must be finite");
  if (p.num_logprobs < 0 || int64_t(p.num_logprobs) > std::min<int64_t>(max_logprobs, V))
    return bad_row(row, "num_logprobs " + std::to_string(p.num_logprobs) + " must be in [0, min(max_logprobs = " +
                            std::to_string(max_logprobs) + ", V = " + std::to_string(V) + ")]");
  return {};
}

// Row r's kernel parameters (batch validated).
SampleRowParams row_params(const SampleBatch& batch, int32_t r) {
  const SamplingParams& p = batch.params[r];
  const bool has_hist = batch.history_offsets != nullptr;
  SampleRowParams d;
  d.temperature = p.temperature;
  d.top_p = p.top_p;
  d.min_p = p.min_p;
  d.repetition_penalty = p.repetition_penalty;
  d.presence_penalty = p.presence_penalty;
  d.frequency_penalty = p.frequency_penalty;
  d.top_k = p.top_k;
  d.num_logprobs = p.num_logprobs;
  d.seed = p.seed;
  d.step = batch.steps[r];
  d.hist_begin = has_hist ? batch.history_offsets[r] : 0;
  d.hist_end = has_hist ? batch.history_offsets[r + 1] : 0;
  return d;
}

// Whether the one-pass kernel serves this row (sampling.cuh, SampleArgs::one_pass): greedy, or a
// Gumbel-max draw without min-p and prefix cuts; no penalty in effect, no top-n logprobs.
bool one_pass_row(const SampleRowParams& d, int64_t V) {
  const bool penalized = d.hist_end > d.hist_begin &&
                         (d.repetition_penalty != 1.f || d.frequency_penalty != 0.f || d.presence_penalty != 0.f);
  return !penalized && d.num_logprobs == 0 &&
         (d.temperature == 0.f || (d.min_p == 0.f && (d.top_k == 0 || int64_t(d.top_k) >= V) && d.top_p >= 1.f));
}

// Reads R statuses; on success copies R ids (and logprobs when asked) into out. temperature(r): row
// r's temperature, for the overflow message.
template <class Temperature>
Status read_results(int32_t R, const Temperature& temperature, const int32_t* status, const int32_t* ids,
                    const float* logprobs, const SampleOutput& out) {
  for (int32_t r = 0; r < R; ++r) {
    switch (status[r]) {
      case kSampleOk: break;
      case kSampleBadLogit: return bad_row(r, "a logit is NaN or +inf");
      case kSampleAllMasked: return bad_row(r, "every logit is -inf");
      case kSampleTempOverflow:
        return bad_row(r, "logits / temperature " + std::to_string(temperature(r)) + " overflow fp32");
      default: return fail(Errc::internal, "sample: row " + std::to_string(r) + ": unknown kernel status");
    }
  }
  std::memcpy(out.token_ids, ids, size_t(R) * 4);
  if (out.logprobs != nullptr) std::memcpy(out.logprobs, logprobs, size_t(R) * 4);
  return {};
}

}  // namespace

Result<std::unique_ptr<Sampler>> Sampler::create(Backend& backend, int32_t compute_major, int32_t num_sms,
                                                 cudaStream_t stream) {
  return std::unique_ptr<Sampler>(new Sampler(backend, compute_major, num_sms, stream));
}

Sampler::~Sampler() {
  if (graph_down_ != nullptr) cudaFreeHost(graph_down_);
  if (host_up_ != nullptr) cudaFreeHost(host_up_);
  if (host_down_ != nullptr) cudaFreeHost(host_down_);
}

Status Sampler::ensure(size_t up, size_t down, size_t hist) {
  auto grow_host = [](void*& p, size_t& have, size_t need) -> Status {
    if (need <= have) return {};
    if (p != nullptr) PHOTON_CUDA_TRY(cudaFreeHost(p));
    p = nullptr;
    have = 0;
    const size_t bytes = std::max(need * 3 / 2, size_t(4096));
    PHOTON_CUDA_TRY(cudaMallocHost(&p, bytes));
    have = bytes;
    return {};
  };
  auto grow_dev = [this](Buffer& b, size_t need) -> Status {
    if (need <= b.size()) return {};
    b = Buffer();
    PHOTON_ASSIGN_OR_RETURN(b, backend_.allocate(std::max(need * 3 / 2, size_t(4096))));
    return {};
  };
  PHOTON_TRY(grow_host(host_up_, host_up_bytes_, up));
  PHOTON_TRY(grow_host(host_down_, host_down_bytes_, down));
  PHOTON_TRY(grow_dev(dev_up_, up));
  PHOTON_TRY(grow_dev(dev_down_, down));
  PHOTON_TRY(grow_dev(dev_hist_raw_, hist * sizeof(float)));
  return {};
}

Status Sampler::validate(const SampleBatch& batch, int64_t V) {
  const int32_t R = batch.num_rows;
  if (R < 0) return fail(Errc::invalid_argument, "sample: negative row count");
  if (R == 0) return {};
  if (batch.params == nullptr || batch.steps == nullptr)
    return fail(Errc::invalid_argument, "sample: params and steps are required");
  const int32_t maxlp = batch.max_logprobs;
  if (maxlp < 0) return fail(Errc::invalid_argument, "sample: max_logprobs must be >= 0");
  for (int32_t r = 0; r < R; ++r) PHOTON_TRY(check_params(r, batch.params[r], maxlp, V));
  if (batch.history_offsets == nullptr) return {};
  if (batch.history_offsets[0] != 0) return fail(Errc::invalid_argument, "sample: history_offsets must start at 0");
  for (int32_t r = 0; r < R; ++r)
    if (batch.history_offsets[r + 1] < batch.history_offsets[r])
      return fail(Errc::invalid_argument, "sample: history_offsets decrease at row " + std::to_string(r));
  const int64_t hist_total = batch.history_offsets[R];
  if (hist_total > 0 && (batch.history_tokens == nullptr || batch.history_output_counts == nullptr))
    return fail(Errc::invalid_argument, "sample: history needs tokens and output counts");
  for (int32_t r = 0; r < R; ++r)
    for (int32_t j = batch.history_offsets[r]; j < batch.history_offsets[r + 1]; ++j)
      if (batch.history_tokens[j] < 0 || batch.history_tokens[j] >= V)
        return fail(Errc::out_of_range, "sample: row " + std::to_string(r) + ": history token " +
                                            std::to_string(batch.history_tokens[j]) + " outside [0, " +
                                            std::to_string(V) + ")");
  return {};
}

Status Sampler::sample(Tensor logits, const SampleBatch& batch, const SampleOutput& out) {
  const int32_t R = batch.num_rows;
  if (logits.dtype != DType::f32 || logits.rank != 2 || logits.dim(0) != R || logits.dim(1) <= 0)
    return fail(Errc::invalid_argument, "sample: logits must be f32 [R = " + std::to_string(R) + ", V]");
  if (R < 0) return fail(Errc::invalid_argument, "sample: negative row count");
  if (R == 0) return {};
  const int64_t V = logits.dim(1);
  if (V > std::numeric_limits<int32_t>::max()) return fail(Errc::invalid_argument, "sample: vocabulary too large");
  if (logits.data == nullptr || out.token_ids == nullptr)
    return fail(Errc::invalid_argument, "sample: logits and token_ids are required");
  PHOTON_TRY(validate(batch, V));
  const int32_t maxlp = batch.max_logprobs;
  if (maxlp > 0 && (out.top_ids == nullptr || out.top_logprobs == nullptr))
    return fail(Errc::invalid_argument, "sample: max_logprobs > 0 needs top_ids and top_logprobs");
  const bool has_hist = batch.history_offsets != nullptr;
  const int64_t hist_total = has_hist ? batch.history_offsets[R] : 0;

  // Upload: params [R] (unless they travel in the kernel's arguments), hist tokens [Hn], hist counts [Hn].
  // Download: ids, status, logprob, top ids, top logprobs.
  const bool inline_params = R <= kSampleInlineRows;
  const size_t o_params = 0, o_tok = inline_params ? 0 : align16(size_t(R) * sizeof(SampleRowParams)),
               o_cnt = o_tok + align16(size_t(hist_total) * 4), up = o_cnt + align16(size_t(hist_total) * 4);
  const size_t d_ids = 0, d_status = align16(size_t(R) * 4), d_lp = d_status + align16(size_t(R) * 4),
               d_top_ids = d_lp + align16(size_t(R) * 4), d_top_lp = d_top_ids + align16(size_t(R) * size_t(maxlp) * 4),
               down = d_top_lp + align16(size_t(R) * size_t(maxlp) * 4);
  PHOTON_TRY(ensure(up, down, size_t(hist_total)));

  SampleArgs a;
  auto* params = inline_params ? a.inline_params : reinterpret_cast<SampleRowParams*>(static_cast<char*>(host_up_) + o_params);
  // Every row greedy or a Gumbel-max draw without min-p, and at most kOnePassMaxRows: the one-pass kernel.
  bool one_pass = one_pass_enabled() && R <= kOnePassMaxRows;
  for (int32_t r = 0; r < R; ++r) {
    params[r] = row_params(batch, r);
    one_pass = one_pass && one_pass_row(params[r], V);
  }
  a.one_pass = one_pass;
  if (one_pass) {
    const size_t partial_bytes = size_t(R) * size_t(one_pass_slices(R, int32_t(V), num_sms_)) * kOnePassPartialBytes;
    if (one_pass_partials_.size() < partial_bytes) {
      one_pass_partials_ = Buffer();
      PHOTON_ASSIGN_OR_RETURN(one_pass_partials_, backend_.allocate(partial_bytes * 3 / 2));
    }
    if (one_pass_arrivals_.size() < size_t(R) * 4) {  // zero before a launch; every launch leaves them zero
      one_pass_arrivals_ = Buffer();
      PHOTON_ASSIGN_OR_RETURN(one_pass_arrivals_, backend_.allocate(std::max<size_t>(size_t(R) * 6, 1024)));
      PHOTON_CUDA_TRY(cudaMemsetAsync(one_pass_arrivals_.data(), 0, one_pass_arrivals_.size(), stream_));
    }
    a.one_pass_partials = one_pass_partials_.data();
    a.one_pass_arrivals = static_cast<int32_t*>(one_pass_arrivals_.data());
  }
  if (hist_total > 0) {
    std::memcpy(static_cast<char*>(host_up_) + o_tok, batch.history_tokens, size_t(hist_total) * 4);
    std::memcpy(static_cast<char*>(host_up_) + o_cnt, batch.history_output_counts, size_t(hist_total) * 4);
  }
  if (up > 0) PHOTON_CUDA_TRY(cudaMemcpyAsync(dev_up_.data(), host_up_, up, cudaMemcpyHostToDevice, stream_));

  char* du = static_cast<char*>(dev_up_.data());
  // The one-pass kernel writes its few result bytes straight into the pinned host buffer (mapped
  // into the device's address space under unified addressing): no device-to-host copy.
  char* dd = static_cast<char*>(one_pass ? host_down_ : dev_down_.data());
  a.logits = logits.as<float>();
  a.params = inline_params ? nullptr : reinterpret_cast<const SampleRowParams*>(du + o_params);
  a.hist_tokens = reinterpret_cast<const int32_t*>(du + o_tok);
  a.hist_counts = reinterpret_cast<const int32_t*>(du + o_cnt);
  a.hist_raw = static_cast<float*>(dev_hist_raw_.data());
  a.out_ids = reinterpret_cast<int32_t*>(dd + d_ids);
  a.out_status = reinterpret_cast<int32_t*>(dd + d_status);
  a.out_logprob = out.logprobs != nullptr ? reinterpret_cast<float*>(dd + d_lp) : nullptr;
  a.out_top_ids = reinterpret_cast<int32_t*>(dd + d_top_ids);
  a.out_top_logprobs = reinterpret_cast<float*>(dd + d_top_lp);
  a.num_rows = R;
  a.vocab = int32_t(V);
  a.max_logprobs = maxlp;
  PHOTON_TRY(launch_sample(a, compute_major_, num_sms_, stream_));
  if (!one_pass) PHOTON_CUDA_TRY(cudaMemcpyAsync(host_down_, dev_down_.data(), down, cudaMemcpyDeviceToHost, stream_));
  PHOTON_CUDA_TRY(cudaStreamSynchronize(stream_));

  const char* hd = static_cast<const char*>(host_down_);
  PHOTON_TRY(read_results(R, [&](int32_t r) { return batch.params[r].temperature; },
                          reinterpret_cast<const int32_t*>(hd + d_status),
                          reinterpret_cast<const int32_t*>(hd + d_ids), reinterpret_cast<const float*>(hd + d_lp), out));
  if (maxlp > 0) {
    std::memcpy(out.top_ids, hd + d_top_ids, size_t(R) * size_t(maxlp) * 4);
    std::memcpy(out.top_logprobs, hd + d_top_lp, size_t(R) * size_t(maxlp) * 4);
  }
  return {};
}

bool Sampler::graph_eligible(const SampleBatch& batch, int32_t bucket) const {
  if (!one_pass_enabled() || bucket > kOnePassMaxRows || batch.num_rows <= 0 || batch.num_rows > bucket ||
      batch.max_logprobs != 0 || batch.params == nullptr || batch.steps == nullptr)
    return false;
  // The vocabulary is not known before the graph exists: with V unbounded, one_pass_row accepts
  // only top_k 0 among the top-k settings.
  for (int32_t r = 0; r < batch.num_rows; ++r)
    if (!one_pass_row(row_params(batch, r), std::numeric_limits<int64_t>::max())) return false;
  return true;
}

Status Sampler::graph_params(const SampleBatch& batch, int64_t V, int32_t bucket, int32_t slot,
                             SampleRowParams* params) const {
  PHOTON_TRY(validate(batch, V));
  if (batch.num_rows > bucket) return fail(Errc::internal, "sample: more rows than the graph's bucket");
  if (slot < 0 || slot >= kGraphSlots) return fail(Errc::internal, "sample: no such graph result slot");
  for (int32_t r = 0; r < bucket; ++r) {
    if (r < batch.num_rows) {
      params[r] = row_params(batch, r);
      if (!one_pass_row(params[r], V)) return fail(Errc::internal, "sample: a row the one-pass kernel cannot serve");
    } else {
      params[r] = SampleRowParams{};
      params[r].temperature = 0.f;  // padding: greedy
    }
    params[r].out_offset = slot * kOnePassMaxRows;
  }
  return {};
}

namespace {
// The graph path's pinned results: [ids | statuses | logprobs], each kGraphSlots * kOnePassMaxRows
// entries of 4 bytes; slot s's rows start at s * kOnePassMaxRows.
constexpr size_t kGraphColumnBytes = size_t(Sampler::kGraphSlots) * kOnePassMaxRows * 4;
}  // namespace

Status Sampler::prepare_graph() {
  if (graph_down_ != nullptr) return {};
  PHOTON_ASSIGN_OR_RETURN(graph_arrivals_, backend_.allocate(size_t(kOnePassMaxRows) * 4));
  PHOTON_CUDA_TRY(cudaMemsetAsync(graph_arrivals_.data(), 0, graph_arrivals_.size(), stream_));
  PHOTON_CUDA_TRY(cudaMallocHost(&graph_down_, 3 * kGraphColumnBytes));
  return {};
}

Status Sampler::launch_in_graph(Tensor logits, const SampleRowParams* params, int32_t* next_ids,
                                const ScreenArgs* screen) {
  const int64_t R = logits.rank == 2 ? logits.dim(0) : 0, V = logits.rank == 2 ? logits.dim(1) : 0;
  if (logits.dtype != DType::f32 || R <= 0 || R > kOnePassMaxRows || V <= 0 ||
      V > std::numeric_limits<int32_t>::max() || params == nullptr)
    return fail(Errc::internal, "sample: the graph's logits must be f32 [R <= 64, V] with device row params");
  if (graph_down_ == nullptr) return fail(Errc::internal, "sample: prepare_graph() must come before a capture");
  if (V > graph_vocab_) {  // the workspace for every row count up to 64 at this V
    size_t bytes = 0;
    for (int32_t r = 1; r <= kOnePassMaxRows; ++r)
      bytes = std::max(bytes, size_t(r) * size_t(one_pass_slices(r, int32_t(V), num_sms_)) * kOnePassPartialBytes);
    graph_partials_ = Buffer();
    PHOTON_ASSIGN_OR_RETURN(graph_partials_, backend_.allocate(bytes));
    graph_vocab_ = int32_t(V);
    ++graph_epoch_;
  }
  auto* hd = static_cast<char*>(graph_down_);
  SampleArgs a;
  a.logits = logits.as<float>();
  a.params = params;
  a.out_ids = reinterpret_cast<int32_t*>(hd);
  a.out_status = reinterpret_cast<int32_t*>(hd + kGraphColumnBytes);
  a.out_logprob = reinterpret_cast<float*>(hd + 2 * kGraphColumnBytes);
  a.next_ids = next_ids;
  a.num_rows = int32_t(R);
  a.vocab = int32_t(V);
  a.one_pass = true;
  a.one_pass_partials = graph_partials_.data();
  a.one_pass_arrivals = static_cast<int32_t*>(graph_arrivals_.data());
  if (screen != nullptr) {
    if (!sample_screened_applies(a, *screen, num_sms_))
      return fail(Errc::internal, "sample: the screened LM head's row is not one the screened kernel serves");
    if (const size_t bytes = screened_workspace_bytes(int32_t(V), num_sms_); graph_screen_partials_.size() < bytes) {
      graph_screen_partials_ = Buffer();
      PHOTON_ASSIGN_OR_RETURN(graph_screen_partials_, backend_.allocate(bytes));
      ++graph_epoch_;
    }
    a.one_pass_partials = graph_screen_partials_.data();
    return launch_sample_screened(a, *screen, num_sms_, stream_);
  }
  return launch_sample(a, compute_major_, num_sms_, stream_);
}

Status Sampler::graph_results(int32_t slot, int32_t num_rows, std::span<const float> temperatures,
                              const SampleOutput& out) const {
  if (graph_down_ == nullptr) return fail(Errc::internal, "sample: no graph sampler was captured");
  if (slot < 0 || slot >= kGraphSlots || num_rows < 0 || num_rows > kOnePassMaxRows ||
      temperatures.size() < size_t(num_rows))
    return fail(Errc::internal, "sample: graph results asked for an invalid slot or row count");
  const auto* hd = static_cast<const char*>(graph_down_) + size_t(slot) * kOnePassMaxRows * 4;
  return read_results(num_rows, [&](int32_t r) { return temperatures[size_t(r)]; },
                      reinterpret_cast<const int32_t*>(hd + kGraphColumnBytes), reinterpret_cast<const int32_t*>(hd),
                      reinterpret_cast<const float*>(hd + 2 * kGraphColumnBytes), out);
}

}  // namespace photon::cuda
