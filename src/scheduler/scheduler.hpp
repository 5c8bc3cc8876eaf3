// Scheduler: picks each step's sequences and flattens them into a BatchPlan.
//
// Every step has two phases (one ragged batch, prefill chunks and decodes
// together):
//  1. RUNNING, oldest first: each gets its next tokens (one decode token, or
//     its next prefill chunk) within the step's token budget. When the pool
//     cannot give a sequence the block it needs, the newest RUNNING sequence
//     is preempted by recompute: its blocks are released, its computed-token
//     count reset (generated tokens kept) and it goes to the FRONT of WAITING.
//     That repeats until the block is found or the sequence itself was the
//     newest (then it is the one preempted).
//  2. WAITING, first in first out, only when phase 1 preempted nothing: the
//     head is admitted if max_seqs allows and the pool holds its cached
//     prefix plus blocks for its first chunk; the first head that does not
//     fit ends admission (no overtaking).
// A sequence's chunk is min(uncomputed tokens, remaining token budget), so
// prompts longer than max_batch_tokens are prefilled over several steps.
//
// Ownership: borrows the BlockManager and the Sequences (owned by the engine).
// Deterministic: the same calls in the same order give the same plans.
// Thread-compatibility: one thread (the engine's stepping thread).
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "core/batch_plan.hpp"
#include "scheduler/block_manager.hpp"
#include "scheduler/sequence.hpp"

namespace photon {

struct SchedulerOptions {
  int32_t max_batch_tokens = 2048;  // tokens per step, prefill and decode together (>= 1)
  int32_t max_seqs = 256;           // sequences per step and RUNNING at once (>= 1)
};

struct ScheduledSeq {
  Sequence* seq = nullptr;
  int32_t num_new_tokens = 0;  // tokens computed this step
  bool samples = false;        // reaches the end of its tokens: its logits row is sampled
};

// One step's schedule. plan.logits_rows lists the sampled sequences' rows in
// the order of `seqs` (skipping those with samples == false).
struct StepSchedule {
  BatchPlan plan;
  std::vector<ScheduledSeq> seqs;
  std::vector<Sequence*> preempted;  // preempted during this schedule call
  int32_t num_sampled = 0;

  bool empty() const noexcept { return seqs.empty(); }
  void clear() noexcept;
};

class Scheduler {
 public:
  Scheduler(const SchedulerOptions& options, BlockManager& blocks);

  const SchedulerOptions& options() const noexcept { return options_; }
  const BlockManager& block_manager() const noexcept { return blocks_; }

  // Queues a new sequence (status waiting) at the back of WAITING.
  void add(Sequence* seq);
  // Fills `out` with the next step. Leaves it empty when nothing can run.
  void schedule(StepSchedule& out);
  // After the forward pass of `sched` succeeded: advances each scheduled
  // sequence's num_computed_tokens and registers its newly full blocks in the
  // prefix cache. (The engine then appends sampled tokens.)
  void commit(const StepSchedule& sched) {
    advance(sched);
    register_computed(sched);
  }
  // The two halves of commit, for overlapped steps (the engine advances a step's sequences before
  // it is finished, so that the next step can be scheduled, and registers once its run is known
  // to be good). Both skip sequences that are no longer running.
  // advance: each running sequence's num_computed_tokens += its scheduled tokens.
  void advance(const StepSchedule& sched);
  // register_computed: the full blocks of computed tokens go to the prefix cache.
  void register_computed(const StepSchedule& sched);
  // Ends a sequence wherever it is (running or waiting): takes it out of its
  // queue, releases its blocks and marks it finished. The caller may destroy
  // it afterwards.
  void finish(Sequence* seq);
  // Takes a running sequence back to the front of WAITING as a preemption does (blocks released,
  // computed tokens forgotten, counted in num_preemptions): its last step cannot count.
  void requeue(Sequence* seq);

  int32_t num_running() const noexcept { return int32_t(running_.size()); }
  int32_t num_waiting() const noexcept { return int32_t(waiting_.size()); }
  bool has_work() const noexcept { return !running_.empty() || !waiting_.empty(); }
  // Queue contents in order.
  const std::vector<Sequence*>& running() const noexcept { return running_; }
  const std::deque<Sequence*>& waiting() const noexcept { return waiting_; }
  uint64_t num_preemptions() const noexcept { return num_preemptions_; }

 private:
  void preempt(Sequence* seq);

  SchedulerOptions options_;
  BlockManager& blocks_;
  std::vector<Sequence*> running_;  // admission order (oldest first)
  std::deque<Sequence*> waiting_;   // FIFO; preempted sequences re-enter at the front
  uint64_t num_preemptions_ = 0;
  PrefixHit hit_;  // scratch
};

}  // namespace photon
