#include "scheduler/scheduler.hpp"

#include <algorithm>

namespace photon {

void StepSchedule::clear() noexcept {
  plan.clear();
  seqs.clear();
  preempted.clear();
  num_sampled = 0;
}

Scheduler::Scheduler(const SchedulerOptions& options, BlockManager& blocks) : options_(options), blocks_(blocks) {
  running_.reserve(size_t(options_.max_seqs));
}

void Scheduler::add(Sequence* seq) {
  seq->status = SeqStatus::waiting;
  waiting_.push_back(seq);
}

void Scheduler::finish(Sequence* seq) {
  if (seq->status == SeqStatus::finished) return;
  if (seq->status == SeqStatus::running) {
    auto it = std::find(running_.begin(), running_.end(), seq);
    if (it != running_.end()) running_.erase(it);
  } else {
    auto it = std::find(waiting_.begin(), waiting_.end(), seq);
    if (it != waiting_.end()) waiting_.erase(it);
  }
  blocks_.release(*seq);
  seq->status = SeqStatus::finished;
}

void Scheduler::requeue(Sequence* seq) {
  if (seq->status != SeqStatus::running) return;
  auto it = std::find(running_.begin(), running_.end(), seq);
  if (it != running_.end()) running_.erase(it);
  preempt(seq);
}

void Scheduler::preempt(Sequence* seq) {
  blocks_.release(*seq);
  seq->num_cached_tokens = 0;
  seq->status = SeqStatus::preempted;
  waiting_.push_front(seq);
  ++num_preemptions_;
}

void Scheduler::schedule(StepSchedule& out) {
  out.clear();
  int32_t budget = options_.max_batch_tokens;

  // Phase 1: continue RUNNING sequences, oldest first.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence* seq = running_[i];
    const int32_t n = std::min(seq->num_uncomputed(), budget);
    if (n == 0) {  // nothing to compute (its sampled token not appended yet): skip
      ++i;
      continue;
    }
    bool preempted_self = false;
    while (!blocks_.allocate_slots(*seq, n)) {
      Sequence* victim = running_.back();
      running_.pop_back();
      preempt(victim);
      out.preempted.push_back(victim);
      if (victim == seq) {
        preempted_self = true;
        break;
      }
    }
    if (preempted_self) break;
    out.seqs.push_back({seq, n, seq->num_computed_tokens + n == seq->num_tokens()});
    budget -= n;
    ++i;
  }

  // Phase 2: admit WAITING sequences in order while everything fits.
  if (out.preempted.empty()) {
    while (!waiting_.empty() && budget > 0 && int32_t(running_.size()) < options_.max_seqs) {
      Sequence* seq = waiting_.front();
      blocks_.find_prefix(*seq, hit_);
      const int32_t n = std::min(seq->num_tokens() - hit_.num_tokens(blocks_.block_size()), budget);
      if (!blocks_.can_admit(hit_, n)) break;
      blocks_.admit(*seq, hit_, n);
      waiting_.pop_front();
      seq->status = SeqStatus::running;
      running_.push_back(seq);
      out.seqs.push_back({seq, n, seq->num_computed_tokens + n == seq->num_tokens()});
      budget -= n;
    }
  }

  // Flatten into the plan, block table rows straight into their final layout.
  const int32_t bs = blocks_.block_size();
  size_t widest = 0;
  for (const ScheduledSeq& s : out.seqs) widest = std::max(widest, s.seq->block_table.size());
  if (widest > 0) out.plan.set_block_table_width(int32_t(widest));
  for (const ScheduledSeq& s : out.seqs) {
    const Sequence& seq = *s.seq;
    out.plan.add_sequence(seq.tokens().data() + seq.num_computed_tokens, s.num_new_tokens, seq.num_computed_tokens,
                          seq.block_table.data(), int32_t(seq.block_table.size()), bs, s.samples);
    if (s.samples) ++out.num_sampled;
  }
  out.plan.finalize();
}

void Scheduler::advance(const StepSchedule& sched) {
  for (const ScheduledSeq& s : sched.seqs)
    if (s.seq->status == SeqStatus::running) s.seq->num_computed_tokens += s.num_new_tokens;
}

void Scheduler::register_computed(const StepSchedule& sched) {
  for (const ScheduledSeq& s : sched.seqs)
    if (s.seq->status == SeqStatus::running) blocks_.cache_computed_blocks(*s.seq);
}

}  // namespace photon
