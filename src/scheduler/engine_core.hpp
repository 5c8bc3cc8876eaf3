// EngineCore: the engine behind photon::Engine, independent of how the model
// is loaded (it drives a ModelRunner).
//
// step() = drain the submit/cancel inboxes -> Scheduler::schedule -> BatchPlan
// -> ModelRunner::launch (forward + sample) -> finish: commit computed tokens ->
// append sampled tokens, check stop conditions -> publish events.
// With overlapped steps (EngineCoreConfig::overlap; docs/step-overlap.md, stage 2) a step is
// left running when step() returns; the next step() schedules and launches its successor over
// placeholders for its samples (their ids stay on the device) and only then finishes it, so the
// host's turn runs while the device works. Tokens then reach events one step() call later.
//
// Thread model (docs/engine.md):
//  - submit / cancel push onto inboxes under inbox_mutex_ (any thread);
//  - step() holds step_mutex_ for its whole run; the Scheduler, BlockManager
//    and Sequences are touched only under it;
//  - events are appended under events_mutex_ and drained by poll() (any
//    thread) or, for requests started by generate(), by that call;
//  - the optional loop thread calls step() while there is work and sleeps on
//    loop_cv_ otherwise.
// Deterministic for a given order of submit/cancel/step calls.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "photon/engine.hpp"
#include "photon/result.hpp"
#include "scheduler/block_manager.hpp"
#include "scheduler/model_runner.hpp"
#include "scheduler/request_params.hpp"
#include "scheduler/request_text.hpp"
#include "scheduler/scheduler.hpp"
#include "scheduler/sequence.hpp"

namespace photon {

// Whether step() overlaps steps: automatic where the runner's launch returns early
// (ModelRunner::overlaps_steps, and per step launch_returns_early: the CUDA backend's sampled decode
// graphs); on: every step as if its launch returned early (the bookkeeping of the overlap over any
// runner, for tests); off.
enum class StepOverlap : uint8_t { automatic, on, off };

struct EngineCoreConfig {
  int32_t num_blocks = 0;           // KV blocks in the pool
  int32_t block_size = 16;
  int32_t max_batch_tokens = 2048;
  int32_t max_seqs = 256;
  bool prefix_caching = true;
  int32_t vocab_size = 0;
  int32_t max_model_len = 0;        // max_position_embeddings
  std::vector<int32_t> eos_token_ids;
  uint64_t seed_salt = 0;           // mixed with the request id into the seed of unseeded requests
  StepOverlap overlap = StepOverlap::automatic;
};

class EngineCore {
 public:
  // `tokenizer` (may be null) serves text prompts and streamed text.
  // Errors: invalid_argument naming the option out of range.
  static Result<std::unique_ptr<EngineCore>> create(EngineCoreConfig config, std::unique_ptr<ModelRunner> runner,
                                                    std::unique_ptr<Tokenizer> tokenizer = nullptr);
  ~EngineCore();  // stops the loop thread
  EngineCore(const EngineCore&) = delete;
  EngineCore& operator=(const EngineCore&) = delete;

  Result<RequestId> submit(Request request) { return submit_impl(std::move(request), false); }
  Result<void> cancel(RequestId id);
  Result<StepStats> step();
  bool has_work() const noexcept { return unfinished_.load(std::memory_order_acquire) > 0; }
  size_t poll(std::vector<Event>& out);
  // Waits up to `timeout` on events_cv_ while no event is pending.
  size_t poll(std::vector<Event>& out, std::chrono::milliseconds timeout);
  Result<std::vector<Completion>> generate(std::span<const Request> requests);
  Result<void> start_loop();
  void stop_loop();
  EngineMetrics metrics() const;

  const EngineCoreConfig& config() const noexcept { return config_; }
  const Tokenizer* tokenizer() const noexcept { return tokenizer_.get(); }
  int64_t kv_capacity_tokens() const noexcept { return int64_t(config_.num_blocks) * config_.block_size; }

 private:
  EngineCore(EngineCoreConfig config, std::unique_ptr<ModelRunner> runner, std::unique_ptr<Tokenizer> tokenizer);

  // A checked request, before it gets its id.
  struct Prepared {
    std::vector<int32_t> prompt;
    SequenceParams params;
    bool seeded = false;
    std::optional<TextStream> text;
  };
  // A request inside the engine: the scheduler's Sequence plus what the
  // engine keeps beside it. Every Sequence the scheduler holds is a LiveSeq.
  struct LiveSeq final : Sequence {
    LiveSeq(uint64_t id, Prepared&& p, bool is_captured)
        : Sequence(id, std::move(p.prompt), std::move(p.params)), text(std::move(p.text)), captured(is_captured) {}
    std::optional<TextStream> text;  // detokenizer + stop strings, when the request has text
    bool captured;                   // events go to generate(), not poll()
    int32_t placeholder_row = -1;    // with a placeholder: its sample's row in the step in flight
  };
  // One launched step: its schedule, sampling arrays and outputs. There are two, so that step
  // N + 1 is planned into one while step N, launched from the other, runs.
  struct StepSlot {
    StepSchedule sched;
    std::vector<Sequence*> sampled;  // the sequence of each logits row, in row order
    std::vector<SamplingParams> row_params;
    std::vector<uint64_t> row_steps;
    std::vector<int32_t> hist_offsets, hist_tokens, hist_counts;
    std::vector<int32_t> out_tokens, out_top_ids;
    std::vector<float> out_logprobs, out_top_logprobs;
    int32_t max_logprobs = 0;
    std::vector<int32_t> prev_rows;  // ModelRunner::launch's: the placeholders' rows in the step before
    bool advanced = false;           // Scheduler::advance ran for it (before its finish)
    // The step before failed after this one took its samples (prev_rows): if this one fails, it
    // fails for that reason, and its requests still running go back to the queue.
    bool after_failure = false;
    // Requests that ended while this step ran (it may name them); destroyed after its finish.
    std::vector<std::unique_ptr<LiveSeq>> retired;
  };
  static LiveSeq& live(Sequence& s) noexcept { return static_cast<LiveSeq&>(s); }

  Result<RequestId> submit_impl(Request request, bool captured);
  // Encodes and checks a request (any thread); takes its prompt_tokens.
  Result<Prepared> prepare(Request request) const;
  RequestId enqueue(Prepared prepared, bool captured);
  void take_inboxes(StepStats& stats);
  // Fills slot's sampling arrays from its schedule, and its prev_rows from the placeholders.
  void build_sample_batch(StepSlot& slot);
  static SampleBatch sample_batch(const StepSlot& slot);
  Result<void> launch(StepSlot& slot);
  // Waits for the oldest launched step (slot) and commits it: tokens, stop checks, events; a failed
  // step ends its requests with the error. Returns the step's outcome.
  Result<void> finish_step(StepSlot& slot, StepStats& stats);
  // A failed step: the requests of `sched` still running end with `message` (error events);
  // every other request is untouched.
  void end_with_error(const StepSchedule& sched, const std::string& message, StepStats& stats);
  // Whether a step of slot may stay in flight across step() calls (overlap on, it samples, and none
  // of its rows needs the host's copy of the tokens before the next step: penalties).
  bool may_overlap(const StepSlot& slot) const;
  // Drops a finished request from live_ into retired_now_: a step's schedule may still name it.
  void retire(RequestId id);
  // Queues an event of `seq` for publication.
  void emit(const LiveSeq& seq, Event&& ev);
  // Ends `seq` with `reason` (its blocks freed) and queues its finish event
  // (`ev` carries the token, if any). The caller drops it from live_ later.
  void finish(LiveSeq& seq, Event ev, FinishReason reason, StepStats& stats);
  void publish_events();
  void update_metrics(const StepStats& stats);
  void loop();

  // ---- immutable after create ----
  EngineCoreConfig config_;
  RequestLimits limits_;
  std::unique_ptr<Tokenizer> tokenizer_;  // may be null; outlives every TextStream

  // ---- any thread ----
  std::atomic<uint64_t> next_id_{1};
  std::atomic<int64_t> unfinished_{0};  // accepted, finish event not yet published

  mutable std::mutex inbox_mutex_;
  std::vector<std::unique_ptr<LiveSeq>> inbox_;
  std::vector<RequestId> cancel_inbox_;

  mutable std::mutex events_mutex_;
  std::condition_variable events_cv_;
  std::vector<Event> events_;  // for poll()
  std::unordered_map<RequestId, std::vector<Event>> captured_events_;  // for generate()

  mutable std::mutex metrics_mutex_;
  EngineMetrics metrics_;

  std::mutex loop_mutex_;
  std::condition_variable loop_cv_;
  std::thread loop_thread_;
  bool loop_stop_ = false;
  std::atomic<bool> loop_running_{false};

  // ---- stepping thread (under step_mutex_) ----
  std::mutex step_mutex_;
  std::unique_ptr<ModelRunner> runner_;
  BlockManager blocks_;
  Scheduler scheduler_;
  std::unordered_map<RequestId, std::unique_ptr<LiveSeq>> live_;
  std::vector<Event> step_events_;           // this step's events for poll()
  std::vector<Event> step_captured_events_;  // ... and for generate()
  bool overlap_ = false;                     // config_.overlap resolved against the runner
  StepSlot slots_[2];
  StepSlot* inflight_ = nullptr;  // the step launched and not finished (overlapped steps)
  std::vector<std::unique_ptr<LiveSeq>> retired_now_;  // requests ended during this step() call
};

}  // namespace photon
