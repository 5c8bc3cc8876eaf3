// FakeRunner: a ModelRunner over FakeKvModel, for engine tests without a model.
//
// Greedy rows (temperature 0) take FakeKvModel's next token. Other rows draw
// from a stand-in "distribution" that depends only on (seed, step, context),
// as the real sampler's Philox stream does, so a row's token must not depend
// on the batch. Logprobs are a fixed function of the token; the top-n list
// is the token followed by n-1 neighbours. fail_at_call makes one execute()
// fail, to test error paths.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "fake_model.hpp"
#include "scheduler/mix64.hpp"
#include "scheduler/model_runner.hpp"

namespace photon::test {

inline int32_t fake_sampled_token(int32_t greedy, uint64_t seed, uint64_t step, int32_t vocab) {
  return int32_t(mix64(seed ^ mix64(step + 1) ^ uint64_t(greedy)) % uint64_t(vocab));
}
inline float fake_logprob(int32_t token) { return -0.25f - float(token % 7); }

struct FakeRunnerLog {
  std::mutex mutex;
  std::vector<int32_t> history_tokens;  // the last execute()'s penalty history of row 0
  std::vector<int32_t> history_counts;
  int32_t calls = 0;
  int32_t max_rows = 0;
};

class FakeRunner final : public ModelRunner {
 public:
  // early_decode: the runner says (ModelRunner::launch_returns_early) that its decode-only steps
  // return early, as the CUDA backend's sampled decode graphs do, so that an engine with overlap
  // "auto" overlaps those and finishes the step before any other first. (It still runs every step
  // inside launch.)
  FakeRunner(int32_t num_blocks, int32_t block_size, int32_t vocab, FakeRunnerLog* log = nullptr,
             int32_t fail_at_call = -1, bool early_decode = false)
      : model_(num_blocks, block_size, vocab), log_(log), fail_at_call_(fail_at_call), early_decode_(early_decode) {}

  bool overlaps_steps() const noexcept override { return early_decode_; }
  bool launch_returns_early(const BatchPlan& plan, const SampleBatch& batch) const override {
    return early_decode_ && plan.num_tokens() == plan.num_seqs() && batch.num_rows == plan.num_seqs();
  }

  Result<void> execute(const BatchPlan& plan, const SampleBatch& batch, const SampleOutput& out) override {
    const int32_t call = calls_++;
    if (log_) {
      std::lock_guard lk(log_->mutex);
      log_->calls = calls_;
      log_->max_rows = std::max(log_->max_rows, batch.num_rows);
      if (batch.num_rows > 0) {
        log_->history_tokens.assign(batch.history_tokens + batch.history_offsets[0],
                                    batch.history_tokens + batch.history_offsets[1]);
        log_->history_counts.assign(batch.history_output_counts + batch.history_offsets[0],
                                    batch.history_output_counts + batch.history_offsets[1]);
      }
    }
    if (call == fail_at_call_) return fail(Errc::out_of_memory, "fake runner: injected failure");
    if (batch.num_rows != plan.num_logits()) return fail(Errc::internal, "fake runner: rows differ from logits rows");
    PHOTON_TRY(model_.forward(plan, next_));
    for (int32_t r = 0; r < batch.num_rows; ++r) {
      const SamplingParams& p = batch.params[r];
      int32_t tok = next_[size_t(r)];
      if (p.temperature > 0.0f) tok = fake_sampled_token(tok, p.seed, batch.steps[r], model_.vocab());
      out.token_ids[r] = tok;
      out.logprobs[r] = fake_logprob(tok);
      for (int32_t k = 0; k < p.num_logprobs; ++k) {
        out.top_ids[size_t(r) * size_t(batch.max_logprobs) + size_t(k)] = (tok + k) % model_.vocab();
        out.top_logprobs[size_t(r) * size_t(batch.max_logprobs) + size_t(k)] = fake_logprob(tok) - float(k);
      }
    }
    return {};
  }

 private:
  FakeKvModel model_;
  FakeRunnerLog* log_;
  int32_t fail_at_call_;
  bool early_decode_;
  int32_t calls_ = 0;
  std::vector<int32_t> next_;
};

// The reference continuation of one request under FakeRunner: greedy or
// seeded, stopping after a stop token or max_tokens.
inline std::vector<int32_t> fake_expected(std::vector<int32_t> context, int32_t max_tokens, int32_t vocab,
                                          const std::vector<int32_t>& stop, float temperature = 0.0f,
                                          uint64_t seed = 0) {
  std::vector<int32_t> out;
  for (int32_t i = 0; i < max_tokens; ++i) {
    int32_t t = fake_next_token(context, vocab);
    if (temperature > 0.0f) t = fake_sampled_token(t, seed, uint64_t(i), vocab);
    out.push_back(t);
    context.push_back(t);
    if (std::find(stop.begin(), stop.end(), t) != stop.end()) break;
  }
  return out;
}

}  // namespace photon::test
