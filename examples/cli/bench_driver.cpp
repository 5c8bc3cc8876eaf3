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

Result<void> LockstepDriver::decode_step() {
  BatchPlan plan;
  std::vector<int32_t> rows(seqs_.size());
  for (size_t s = 0; s < seqs_.size(); ++s) {
    Seq& q = seqs_[s];
    if (q.cached + 1 > blocks_per_seq_ * block_size_)
      return fail(Errc::capacity_exceeded, "bench: a sequence outgrew its KV blocks");
    const int32_t need = blocks_for(q.cached + 1);
    table_.resize(size_t(need));
    for (int32_t b = 0; b < need; ++b) table_[size_t(b)] = q.first_block + b;
    plan.add_sequence(q.tokens.data() + q.cached, 1, q.cached, table_.data(), need, block_size_, true);
    q.cached += 1;
    rows[s] = int32_t(s);
  }
  plan.finalize();
  return run(plan, rows);
}

}  // namespace photon::cli
