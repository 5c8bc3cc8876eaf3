#include "bench_driver.hpp"

#include <algorithm>

#include "core/try.hpp"

namespace photon::cli {

LockstepDriver::LockstepDriver(Backend& backend, Model& model, int32_t block_size, int32_t blocks_per_seq,
                               const SamplingParams& sampling, uint64_t seed)
    : backend_(backend), model_(model), block_size_(block_size), blocks_per_seq_(blocks_per_seq),
      sampling_(sampling), rng_(seed) {}

void LockstepDriver::start(int32_t num_seqs, int32_t prompt_len) {
  seqs_.assign(size_t(num_seqs), Seq{});
  std::uniform_int_distribution<int32_t> tok(0, model_.config().vocab_size - 1);
  for (int32_t s = 0; s < num_seqs; ++s) {
    Seq& q = seqs_[size_t(s)];
    q.tokens.resize(size_t(prompt_len));
    for (int32_t& t : q.tokens) t = tok(rng_);
    q.first_block = s * blocks_per_seq_;
  }
}

Result<void> LockstepDriver::run(const BatchPlan& plan, const std::vector<int32_t>& rows) {
  const size_t R = rows.size();
  params_.assign(R, sampling_);
  steps_.resize(R);
  ids_.resize(R);
  logprobs_.resize(R);
  for (size_t r = 0; r < R; ++r) {
    const Seq& q = seqs_[size_t(rows[r])];
    params_[r].seed = sampling_.seed + uint64_t(rows[r]);
    steps_[r] = q.sampled;
  }
  SampleBatch batch;
  batch.num_rows = int32_t(R);
  batch.params = params_.data();
  batch.steps = steps_.data();
  SampleOutput out;
  out.token_ids = ids_.data();
  out.logprobs = logprobs_.data();
  PHOTON_TRY(backend_.run_step_sampled(plan, [&](const StepPlanView& v) { return model_.forward(v); }, batch, out));
  for (size_t r = 0; r < R; ++r) {
    Seq& q = seqs_[size_t(rows[r])];
    q.tokens.push_back(ids_[r]);
    ++q.sampled;
  }
  return {};
}

Result<int32_t> LockstepDriver::prefill(int32_t max_batch_tokens) {
  int32_t steps = 0;
  size_t next = 0;  // first sequence with prompt tokens left
  while (next < seqs_.size()) {
    BatchPlan plan;
    std::vector<int32_t> rows;
    int32_t budget = max_batch_tokens;
    for (size_t s = next; s < seqs_.size() && budget > 0; ++s) {
      Seq& q = seqs_[s];
      const int32_t left = int32_t(q.tokens.size()) - q.cached;
      const int32_t n = std::min(left, budget);
      const int32_t need = blocks_for(q.cached + n);
      table_.resize(size_t(need));
      for (int32_t b = 0; b < need; ++b) table_[size_t(b)] = q.first_block + b;
      const bool done = n == left;
      plan.add_sequence(q.tokens.data() + q.cached, n, q.cached, table_.data(), need, block_size_, done);
      if (done) rows.push_back(int32_t(s));
      q.cached += n;
      budget -= n;
    }
    plan.finalize();
    PHOTON_TRY(run(plan, rows));
    while (next < seqs_.size() && seqs_[next].cached == int32_t(seqs_[next].tokens.size()) - 1) ++next;
    ++steps;
  }
  return steps;
}

Result<void> LockstepDriver::decode_plan(BatchPlan& plan, const int32_t* const* ids) {
  static constexpr int32_t kTaken = 0;  // an input id the backend replaces (prev_rows)
  for (size_t s = 0; s < seqs_.size(); ++s) {
    Seq& q = seqs_[s];
    if (q.cached + 1 > blocks_per_seq_ * block_size_)
      return fail(Errc::capacity_exceeded, "bench: a sequence outgrew its KV blocks");
    const int32_t need = blocks_for(q.cached + 1);
    table_.resize(size_t(need));
    for (int32_t b = 0; b < need; ++b) table_[size_t(b)] = q.first_block + b;
    plan.add_sequence(ids != nullptr ? ids[s] : &kTaken, 1, q.cached, table_.data(), need, block_size_, true);
    q.cached += 1;
  }
  plan.finalize();
  return {};
}

Result<void> LockstepDriver::decode_step() {
  BatchPlan plan;
  std::vector<const int32_t*> ids(seqs_.size());
  std::vector<int32_t> rows(seqs_.size());
  for (size_t s = 0; s < seqs_.size(); ++s) {
    ids[s] = seqs_[s].tokens.data() + seqs_[s].cached;
    rows[s] = int32_t(s);
  }
  PHOTON_TRY(decode_plan(plan, ids.data()));
  return run(plan, rows);
}

Result<void> LockstepDriver::decode(int32_t steps) {
  if (!overlap_ || !backend_.overlaps_steps() || steps <= 0) {
    for (int32_t i = 0; i < steps; ++i) PHOTON_TRY(decode_step());
    return {};
  }
  const size_t S = seqs_.size();
  params_.assign(S, sampling_);
  steps_.resize(S);
  prev_rows_.resize(S);
  for (size_t s = 0; s < S; ++s) {
    params_[s].seed = sampling_.seed + uint64_t(s);
    prev_rows_[s] = int32_t(s);
  }
  for (auto& v : slot_ids_) v.assign(S, -1);
  for (auto& v : slot_logprobs_) v.assign(S, 0.f);
  SampleBatch batch;
  batch.num_rows = int32_t(S);
  batch.params = params_.data();
  batch.steps = steps_.data();
  const auto forward = [&](const StepPlanView& v) { return model_.forward(v); };
  // Step i's tokens are appended once step i + 1 is launched; a failed step's finish is still
  // waited for, so that nothing is in flight when this returns.
  auto finish = [&](int32_t i) -> Result<void> {
    PHOTON_TRY(backend_.finish_step_sampled());
    for (size_t s = 0; s < S; ++s) seqs_[s].tokens.push_back(slot_ids_[size_t(i % 2)][s]);
    return {};
  };
  std::vector<const int32_t*> first_ids(S);
  for (size_t s = 0; s < S; ++s) first_ids[s] = seqs_[s].tokens.data() + seqs_[s].cached;
  for (int32_t i = 0; i < steps; ++i) {
    BatchPlan plan;
    Result<void> planned = decode_plan(plan, i == 0 ? first_ids.data() : nullptr);
    if (i == 0 && planned && !backend_.launch_returns_early(plan, batch)) {
      // Steps whose launch runs them to their end (CUDA: no sampled decode graph, e.g. over 64
      // rows) gain nothing by overlapping: one at a time, as the engine runs them.
      PHOTON_TRY(run(plan, prev_rows_));  // prev_rows_[s] = s: row s is sequence s
      for (int32_t k = 1; k < steps; ++k) PHOTON_TRY(decode_step());
      return {};
    }
    if (planned) {
      for (size_t s = 0; s < S; ++s) steps_[s] = seqs_[s].sampled++;
      SampleOutput out;
      out.token_ids = slot_ids_[size_t(i % 2)].data();
      out.logprobs = slot_logprobs_[size_t(i % 2)].data();
      planned = backend_.launch_step_sampled(plan, forward, batch, out,
                                             i == 0 ? std::span<const int32_t>() : std::span<const int32_t>(prev_rows_));
    }
    if (i > 0) {
      if (Result<void> f = finish(i - 1); !f) {
        if (planned) (void)backend_.finish_step_sampled();  // leave nothing in flight
        return f;
      }
    }
    PHOTON_TRY(planned);
  }
  return finish(steps - 1);
}

}  // namespace photon::cli
