#include "scheduler/engine_core.hpp"

#include <algorithm>
#include <chrono>
#include <string>

#include "core/try.hpp"
#include "scheduler/mix64.hpp"

namespace photon {

namespace {

Result<void> check_config(const EngineCoreConfig& c) {
  auto bad = [](const char* field, int64_t v, const char* rule) {
    return fail(Errc::invalid_argument, std::string("engine option ") + field + " = " + std::to_string(v) + ": " + rule);
  };
  if (c.num_blocks < 1) return bad("kv_blocks", c.num_blocks, "the KV cache needs at least one block");
  if (c.block_size < 1 || c.block_size > 1024) return bad("block_size", c.block_size, "must be in [1, 1024]");
  if (c.max_batch_tokens < 1) return bad("max_batch_tokens", c.max_batch_tokens, "must be >= 1");
  if (c.max_seqs < 1) return bad("max_seqs", c.max_seqs, "must be >= 1");
  if (c.vocab_size < 1) return bad("vocab_size", c.vocab_size, "must be >= 1");
  if (c.max_model_len < 1) return bad("max_position_embeddings", c.max_model_len, "must be >= 1");
  return {};
}

}  // namespace

Result<std::unique_ptr<EngineCore>> EngineCore::create(EngineCoreConfig config, std::unique_ptr<ModelRunner> runner,
                                                       std::unique_ptr<Tokenizer> tokenizer) {
  PHOTON_TRY(check_config(config));
  if (!runner) return fail(Errc::invalid_argument, "engine core: no model runner");
  return std::unique_ptr<EngineCore>(new EngineCore(std::move(config), std::move(runner), std::move(tokenizer)));
}

EngineCore::EngineCore(EngineCoreConfig config, std::unique_ptr<ModelRunner> runner,
                       std::unique_ptr<Tokenizer> tokenizer)
    : config_(std::move(config)),
      tokenizer_(std::move(tokenizer)),
      runner_(std::move(runner)),
      blocks_(config_.num_blocks, config_.block_size, config_.prefix_caching),
      scheduler_(SchedulerOptions{config_.max_batch_tokens, config_.max_seqs}, blocks_) {
  limits_.vocab_size = config_.vocab_size;
  limits_.max_model_len = config_.max_model_len;
  limits_.kv_capacity_tokens = kv_capacity_tokens();
  limits_.eos_token_ids = config_.eos_token_ids;
  overlap_ = config_.overlap == StepOverlap::on ||
             (config_.overlap == StepOverlap::automatic && runner_->overlaps_steps());
  update_metrics(StepStats{});
}

EngineCore::~EngineCore() {
  stop_loop();
  std::lock_guard step_lock(step_mutex_);
  if (inflight_ != nullptr) (void)runner_->finish();  // the runner may still write its outputs
}

// ---- any thread ------------------------------------------------------------

Result<EngineCore::Prepared> EngineCore::prepare(Request request) const {
  Prepared p;
  PHOTON_ASSIGN_OR_RETURN(p.prompt, take_prompt_ids(request, tokenizer_.get()));
  PHOTON_ASSIGN_OR_RETURN(p.params, resolve_request(request, p.prompt, limits_, 0));
  p.seeded = request.sampling.seed.has_value();
  if (!request.stop.empty() && tokenizer_ == nullptr)
    return fail(Errc::invalid_state, "request.stop needs a tokenizer, and the engine has none");
  if (tokenizer_ != nullptr && (request.detokenize || !request.stop.empty())) {
    PHOTON_ASSIGN_OR_RETURN(TextStream text, TextStream::create(*tokenizer_, request, p.prompt));
    p.text.emplace(std::move(text));
  }
  return p;
}

Result<RequestId> EngineCore::submit_impl(Request request, bool captured) {
  PHOTON_ASSIGN_OR_RETURN(Prepared p, prepare(std::move(request)));
  return enqueue(std::move(p), captured);
}

RequestId EngineCore::enqueue(Prepared prepared, bool captured) {
  const RequestId id = next_id_.fetch_add(1, std::memory_order_relaxed);
  if (!prepared.seeded) prepared.params.sampling.seed = mix64(config_.seed_salt ^ mix64(id));
  auto seq = std::make_unique<LiveSeq>(id, std::move(prepared), captured);
  {
    std::lock_guard lk(inbox_mutex_);
    inbox_.push_back(std::move(seq));
    unfinished_.fetch_add(1, std::memory_order_acq_rel);
  }
  { std::lock_guard lk(loop_mutex_); }  // a sleeping loop thread re-checks has_work()
  loop_cv_.notify_one();
  return id;
}

Result<void> EngineCore::cancel(RequestId id) {
  if (id == 0 || id >= next_id_.load(std::memory_order_relaxed))
    return fail(Errc::unknown_request, "cancel: no request with id " + std::to_string(id));
  {
    std::lock_guard lk(inbox_mutex_);
    cancel_inbox_.push_back(id);
  }
  { std::lock_guard lk(loop_mutex_); }
  loop_cv_.notify_one();
  return {};
}

size_t EngineCore::poll(std::vector<Event>& out) { return poll(out, std::chrono::milliseconds(0)); }

size_t EngineCore::poll(std::vector<Event>& out, std::chrono::milliseconds timeout) {
  std::unique_lock lk(events_mutex_);
  if (events_.empty() && timeout.count() > 0) events_cv_.wait_for(lk, timeout, [this] { return !events_.empty(); });
  const size_t n = events_.size();
  if (out.empty()) {
    out.swap(events_);  // no copy; the buffers circulate between the step and the host
  } else {
    for (Event& e : events_) out.push_back(std::move(e));
  }
  events_.clear();
  return n;
}

EngineMetrics EngineCore::metrics() const {
  EngineMetrics m;
  {
    std::lock_guard lk(metrics_mutex_);
    m = metrics_;
  }
  std::lock_guard lk(inbox_mutex_);
  m.waiting += int32_t(inbox_.size());
  return m;
}

// ---- the step --------------------------------------------------------------

void EngineCore::take_inboxes(StepStats& stats) {
  std::vector<std::unique_ptr<LiveSeq>> submitted;
  std::vector<RequestId> cancelled;
  {
    std::lock_guard lk(inbox_mutex_);
    submitted.swap(inbox_);
    cancelled.swap(cancel_inbox_);
  }
  for (auto& p : submitted) {
    scheduler_.add(p.get());
    live_.emplace(p->id(), std::move(p));
  }
  for (RequestId id : cancelled) {
    auto it = live_.find(id);
    if (it == live_.end()) continue;  // already finished
    Event ev;
    ev.request = id;
    finish(*it->second, std::move(ev), FinishReason::cancelled, stats);
    retire(id);
  }
}

void EngineCore::retire(RequestId id) {
  auto it = live_.find(id);
  if (it == live_.end()) return;
  retired_now_.push_back(std::move(it->second));
  live_.erase(it);
}

void EngineCore::build_sample_batch(StepSlot& slot) {
  slot.sampled.clear();
  for (const ScheduledSeq& s : slot.sched.seqs)
    if (s.samples) slot.sampled.push_back(s.seq);
  const size_t R = slot.sampled.size();
  slot.row_params.resize(R);
  slot.row_steps.resize(R);
  slot.hist_offsets.assign(1, 0);
  slot.hist_tokens.clear();
  slot.hist_counts.clear();
  slot.max_logprobs = 0;
  for (size_t r = 0; r < R; ++r) {
    const Sequence& seq = *slot.sampled[r];
    slot.row_params[r] = seq.params().sampling;
    slot.row_steps[r] = seq.sample_step();
    if (seq.tracks_penalties()) {
      const auto toks = seq.penalty_counts().tokens();
      const auto counts = seq.penalty_counts().output_counts();
      slot.hist_tokens.insert(slot.hist_tokens.end(), toks.begin(), toks.end());
      slot.hist_counts.insert(slot.hist_counts.end(), counts.begin(), counts.end());
    }
    slot.hist_offsets.push_back(int32_t(slot.hist_tokens.size()));
    slot.max_logprobs = std::max(slot.max_logprobs, slot.row_params[r].num_logprobs);
  }
  slot.out_tokens.assign(R, -1);
  slot.out_logprobs.assign(R, 0.0f);
  slot.out_top_ids.assign(R * size_t(slot.max_logprobs), -1);
  slot.out_top_logprobs.assign(R * size_t(slot.max_logprobs), 0.0f);
  // A token at a placeholder's place takes the sample of the step in flight (its row there).
  slot.prev_rows.clear();
  const BatchPlan& plan = slot.sched.plan;
  for (size_t s = 0; s < slot.sched.seqs.size(); ++s) {
    const LiveSeq& seq = live(*slot.sched.seqs[s].seq);
    if (!seq.has_placeholder()) continue;
    const int32_t last = plan.query_start[s + 1] - 1;  // the sequence's last token in the plan
    if (plan.positions[size_t(last)] != seq.num_tokens() - 1) continue;
    if (slot.prev_rows.empty()) slot.prev_rows.assign(size_t(plan.num_tokens()), -1);
    slot.prev_rows[size_t(last)] = seq.placeholder_row;
  }
}

SampleBatch EngineCore::sample_batch(const StepSlot& slot) {
  SampleBatch batch;
  batch.num_rows = int32_t(slot.sampled.size());
  batch.params = slot.row_params.data();
  batch.steps = slot.row_steps.data();
  batch.history_offsets = slot.hist_offsets.data();
  batch.history_tokens = slot.hist_tokens.data();
  batch.history_output_counts = slot.hist_counts.data();
  batch.max_logprobs = slot.max_logprobs;
  return batch;
}

Result<void> EngineCore::launch(StepSlot& slot) {
  slot.advanced = false;
  slot.after_failure = false;
  const bool top = slot.max_logprobs > 0;
  SampleOutput out{slot.out_tokens.data(), slot.out_logprobs.data(), top ? slot.out_top_ids.data() : nullptr,
                   top ? slot.out_top_logprobs.data() : nullptr};
  return runner_->launch(slot.sched.plan, sample_batch(slot), out, slot.prev_rows);
}

bool EngineCore::may_overlap(const StepSlot& slot) const {
  if (!overlap_ || slot.sampled.empty()) return false;
  for (const Sequence* seq : slot.sampled)
    if (seq->tracks_penalties()) return false;  // the next step's history needs this step's token
  return true;
}

void EngineCore::emit(const LiveSeq& seq, Event&& ev) {
  (seq.captured ? step_captured_events_ : step_events_).push_back(std::move(ev));
}

void EngineCore::finish(LiveSeq& seq, Event ev, FinishReason reason, StepStats& stats) {
  scheduler_.finish(&seq);
  if (seq.text) {
    seq.text->finish(ev.text);  // held-back text (nothing after a stop string)
    ev.stop_string = seq.text->stop_index();
  }
  ev.finish = reason;
  emit(seq, std::move(ev));
  ++stats.finished;
}

Result<StepStats> EngineCore::step() {
  std::lock_guard step_lock(step_mutex_);
  StepStats stats;
  step_events_.clear();
  step_captured_events_.clear();
  take_inboxes(stats);
  // The step in flight (overlapped steps): its sequences advance now, and each of its samples gets
  // a placeholder that the next step takes on the device, unless the sequence ends with it.
  StepSlot* prev = inflight_;
  if (prev != nullptr) {
    scheduler_.advance(prev->sched);
    prev->advanced = true;
    for (size_t r = 0; r < prev->sampled.size(); ++r) {
      LiveSeq& seq = live(*prev->sampled[r]);
      if (seq.status != SeqStatus::running || seq.num_generated() + 1 >= seq.params().max_tokens) continue;
      seq.append_placeholder();
      seq.placeholder_row = int32_t(r);
    }
  }
  StepSlot& cur = prev == &slots_[0] ? slots_[1] : slots_[0];
  scheduler_.schedule(cur.sched);
  stats.preempted = int32_t(cur.sched.preempted.size());
  build_sample_batch(cur);
  // A step whose launch would run it to its end (CUDA: anything but a sampled decode graph) goes
  // after the step in flight has finished, so that its tokens are not held back by this one.
  const bool early = !cur.sched.empty() && overlap_ &&
                     (config_.overlap == StepOverlap::on || runner_->launch_returns_early(cur.sched.plan, sample_batch(cur)));
  Result<void> outcome;
  if (prev != nullptr && !early) {
    // Scheduled again once it has: its samples are in and the requests that ended are out.
    outcome = finish_step(*prev, stats);
    prev = nullptr;
    scheduler_.schedule(cur.sched);
    stats.preempted += int32_t(cur.sched.preempted.size());
    build_sample_batch(cur);
  }
  Result<void> launched;
  if (!cur.sched.empty()) {
    stats.seqs = int32_t(cur.sched.seqs.size());
    stats.tokens = cur.sched.plan.num_tokens();
    launched = launch(cur);
  }
  const bool running = !cur.sched.empty() && launched.has_value();
  inflight_ = running ? &cur : nullptr;
  if (prev != nullptr) outcome = finish_step(*prev, stats);
  // A step that took the samples of a failed step finishes now, before anything takes its own.
  if (running && !outcome) cur.after_failure = !cur.prev_rows.empty();
  if (!launched) {
    end_with_error(cur.sched, launched.error().message, stats);
    if (outcome) outcome = std::move(launched);
  }
  if (running && (!early || !may_overlap(cur) || cur.after_failure)) {
    Result<void> done = finish_step(cur, stats);
    inflight_ = nullptr;
    if (outcome) outcome = std::move(done);
  }
  // What ended in this call is destroyed now, or, when a step is in flight that may name it, after
  // that step's finish.
  if (inflight_ != nullptr) {
    for (auto& seq : retired_now_) inflight_->retired.push_back(std::move(seq));
  }
  retired_now_.clear();
  publish_events();
  update_metrics(stats);
  if (!outcome) return fail(outcome.error().code, "engine step: " + outcome.error().message);
  return stats;
}

void EngineCore::end_with_error(const StepSchedule& sched, const std::string& message, StepStats& stats) {
  for (const ScheduledSeq& s : sched.seqs) {
    LiveSeq& seq = live(*s.seq);
    if (seq.status == SeqStatus::finished) continue;
    Event ev;
    ev.request = seq.id();
    ev.error = message;
    finish(seq, std::move(ev), FinishReason::error, stats);
    retire(seq.id());
  }
}

Result<void> EngineCore::finish_step(StepSlot& slot, StepStats& stats) {
  Result<void> outcome = runner_->finish();
  if (!outcome && slot.after_failure) {
    // It failed with the step before (whose requests ended): the others run again from the queue.
    for (const ScheduledSeq& s : slot.sched.seqs) scheduler_.requeue(s.seq);
    slot.retired.clear();
    return {};
  }
  if (!outcome) {
    end_with_error(slot.sched, outcome.error().message, stats);
    slot.retired.clear();
    return outcome;
  }
  if (!slot.advanced) scheduler_.advance(slot.sched);
  scheduler_.register_computed(slot.sched);  // before a finished request's blocks are released
  for (size_t r = 0; r < slot.sampled.size(); ++r) {
    LiveSeq& seq = live(*slot.sampled[r]);
    if (seq.status == SeqStatus::finished) continue;  // it ended at the step before: its row is dropped
    Event ev;
    ev.request = seq.id();
    const int32_t tok = slot.out_tokens[r];
    if (tok < 0 || tok >= config_.vocab_size) {
      ev.error = "the sampler returned token " + std::to_string(tok) + " outside the vocabulary";
      finish(seq, std::move(ev), FinishReason::error, stats);
      retire(seq.id());
      continue;
    }
    if (seq.has_placeholder()) {
      seq.fill_placeholder(tok);
    } else {
      seq.append_token(tok);
    }
    ++stats.sampled;
    ev.token = tok;
    ev.logprob = slot.out_logprobs[r];
    const int32_t n_top = seq.params().sampling.num_logprobs;
    for (int32_t k = 0; k < n_top; ++k) {
      const size_t i = r * size_t(slot.max_logprobs) + size_t(k);
      ev.top_logprobs.push_back({slot.out_top_ids[i], slot.out_top_logprobs[i]});
    }
    const auto& stops = seq.params().stop_token_ids;
    FinishReason reason = FinishReason::none;
    if (seq.text && seq.text->feed(tok, ev.text)) reason = FinishReason::stop;  // a stop string
    else if (std::binary_search(stops.begin(), stops.end(), tok)) reason = FinishReason::stop;
    else if (seq.num_generated() >= seq.params().max_tokens) reason = FinishReason::length;
    if (reason != FinishReason::none) {
      finish(seq, std::move(ev), reason, stats);
      retire(seq.id());
    } else {
      emit(seq, std::move(ev));
    }
  }
  slot.retired.clear();
  return outcome;
}

void EngineCore::publish_events() {
  if (step_events_.empty() && step_captured_events_.empty()) return;
  int64_t finished = 0;
  for (const Event& e : step_events_) finished += e.finish != FinishReason::none;
  for (const Event& e : step_captured_events_) finished += e.finish != FinishReason::none;
  {
    std::lock_guard lk(events_mutex_);
    if (events_.empty()) {
      events_.swap(step_events_);
    } else {
      for (Event& e : step_events_) events_.push_back(std::move(e));
    }
    for (Event& e : step_captured_events_) captured_events_[e.request].push_back(std::move(e));
  }
  step_events_.clear();
  step_captured_events_.clear();
  // After the events are visible: has_work() == false implies every finish event can be polled.
  unfinished_.fetch_sub(finished, std::memory_order_acq_rel);
  events_cv_.notify_all();
}

void EngineCore::update_metrics(const StepStats& stats) {
  const BlockManagerStats bs = blocks_.stats();
  std::lock_guard lk(metrics_mutex_);
  EngineMetrics& m = metrics_;
  m.running = scheduler_.num_running();
  m.waiting = scheduler_.num_waiting();
  m.kv_blocks_total = bs.num_blocks;
  m.kv_blocks_used = bs.used;
  m.kv_blocks_cached = bs.cached;
  m.block_size = config_.block_size;
  m.kv_usage = bs.usage();
  m.prefix_hit_rate = bs.hit_rate();
  if (stats.seqs > 0) ++m.steps;
  m.tokens_scheduled += uint64_t(stats.tokens);
  m.tokens_generated += uint64_t(stats.sampled);
  m.preemptions = scheduler_.num_preemptions();
  m.tokens_per_step = m.steps ? double(m.tokens_scheduled) / double(m.steps) : 0.0;
}

// ---- generate and the loop thread ------------------------------------------

Result<std::vector<Completion>> EngineCore::generate(std::span<const Request> requests) {
  // Check every request first so that none runs when one is malformed.
  std::vector<Prepared> prepared;
  for (size_t i = 0; i < requests.size(); ++i) {
    auto p = prepare(requests[i]);
    if (!p) return fail(p.error().code, "requests[" + std::to_string(i) + "]: " + p.error().message);
    prepared.push_back(std::move(*p));
  }
  std::vector<Completion> done(requests.size());
  std::unordered_map<RequestId, size_t> index;
  for (size_t i = 0; i < requests.size(); ++i) {
    const RequestId id = enqueue(std::move(prepared[i]), true);
    done[i].request = id;
    index.emplace(id, i);
  }
  size_t remaining = requests.size();
  auto collect = [&] {  // under events_mutex_
    for (auto it = index.begin(); it != index.end();) {
      auto ev = captured_events_.find(it->first);
      bool finished = false;
      if (ev != captured_events_.end()) {
        Completion& c = done[it->second];
        for (Event& e : ev->second) {
          c.text += e.text;
          if (e.token >= 0) {
            c.tokens.push_back(e.token);
            c.logprobs.push_back(e.logprob);
            if (!e.top_logprobs.empty()) c.top_logprobs.push_back(std::move(e.top_logprobs));
          }
          if (e.finish != FinishReason::none) {
            c.finish = e.finish;
            c.error = std::move(e.error);
            c.stop_string = e.stop_string;
            finished = true;
          }
        }
        captured_events_.erase(ev);
      }
      if (finished) {
        --remaining;
        it = index.erase(it);
      } else {
        ++it;
      }
    }
  };
  while (true) {
    {
      std::unique_lock lk(events_mutex_);
      collect();
      if (remaining == 0) break;
      if (loop_running_.load(std::memory_order_acquire)) {
        // The loop thread steps; wake on its events (and re-check that it still runs).
        events_cv_.wait_for(lk, std::chrono::milliseconds(20));
        continue;
      }
    }
    // A failed step ends its requests with error events, collected above.
    (void)step();
  }
  return done;
}

Result<void> EngineCore::start_loop() {
  std::lock_guard lk(loop_mutex_);
  if (loop_thread_.joinable()) return fail(Errc::invalid_state, "start_loop: the engine loop is already running");
  loop_stop_ = false;
  loop_running_.store(true, std::memory_order_release);
  loop_thread_ = std::thread([this] { loop(); });
  return {};
}

void EngineCore::stop_loop() {
  {
    std::lock_guard lk(loop_mutex_);
    if (!loop_thread_.joinable()) return;
    loop_stop_ = true;
  }
  loop_cv_.notify_all();
  loop_thread_.join();
  loop_running_.store(false, std::memory_order_release);
}

void EngineCore::loop() {
  std::unique_lock lk(loop_mutex_);
  while (!loop_stop_) {
    if (!has_work()) {
      loop_cv_.wait(lk, [this] { return loop_stop_ || has_work(); });
      continue;
    }
    lk.unlock();
    (void)step();  // failures reach the requests as error events
    lk.lock();
  }
}

}  // namespace photon
