// SchedulerSim: drives Scheduler + BlockManager + FakeKvModel step by step
// the way the engine does, checking every invariant after every step.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "scheduler/block_manager.hpp"
#include "scheduler/scheduler.hpp"
#include "scheduler/sequence.hpp"
#include "fake_model.hpp"

namespace photon::test {

struct SimRequest {
  std::vector<int32_t> prompt;
  int32_t max_tokens = 1;
  int32_t arrival_step = 0;  // added before this step's schedule
  int32_t cancel_step = -1;  // finished (cancelled) before this step's schedule, if still alive
};

struct SimConfig {
  int32_t num_blocks = 64;
  int32_t block_size = 4;
  int32_t max_batch_tokens = 64;
  int32_t max_seqs = 16;
  bool prefix_caching = true;
  int32_t vocab = 997;
};

struct SimResult {
  std::vector<std::vector<int32_t>> outputs;  // generated tokens per request
  std::vector<bool> cancelled;
  std::vector<size_t> admission_order;  // request indices at their first admission
  int32_t steps = 0;
  uint64_t preemptions = 0;
  BlockManagerStats final_stats;
};

inline SimResult run_sim(const SimConfig& cfg, const std::vector<SimRequest>& reqs) {
  BlockManager blocks(cfg.num_blocks, cfg.block_size, cfg.prefix_caching);
  Scheduler sched(SchedulerOptions{cfg.max_batch_tokens, cfg.max_seqs}, blocks);
  FakeKvModel model(cfg.num_blocks, cfg.block_size, cfg.vocab);
  std::vector<std::unique_ptr<Sequence>> seqs(reqs.size());
  std::vector<bool> admitted(reqs.size(), false);
  SimResult res;
  res.outputs.resize(reqs.size());
  res.cancelled.assign(reqs.size(), false);
  size_t num_done = 0;
  StepSchedule step;
  std::vector<int32_t> next;
  const int32_t last_arrival = reqs.empty() ? 0 : std::max_element(reqs.begin(), reqs.end(), [](auto& a, auto& b) {
                                                    return a.arrival_step < b.arrival_step;
                                                  })->arrival_step;
  for (int32_t t = 0; num_done < reqs.size(); ++t) {
    REQUIRE(t < 200000);  // no livelock
    for (size_t i = 0; i < reqs.size(); ++i) {
      if (reqs[i].arrival_step == t) {
        SequenceParams p;
        p.max_tokens = reqs[i].max_tokens;
        seqs[i] = std::make_unique<Sequence>(uint64_t(i), reqs[i].prompt, p);
        sched.add(seqs[i].get());
      }
    }
    for (size_t i = 0; i < reqs.size(); ++i) {
      if (reqs[i].cancel_step == t && seqs[i] && seqs[i]->status != SeqStatus::finished) {
        sched.finish(seqs[i].get());
        res.cancelled[i] = true;
        ++num_done;
      }
    }
    sched.schedule(step);
    // Budgets.
    REQUIRE(step.plan.num_tokens() <= cfg.max_batch_tokens);
    REQUIRE(step.plan.num_seqs() <= cfg.max_seqs);
    REQUIRE(sched.num_running() <= cfg.max_seqs);
    REQUIRE(blocks.check_invariants().has_value());
    if (step.empty()) {
      // Nothing runnable is only fine while waiting for arrivals.
      REQUIRE((t < last_arrival || num_done == reqs.size()));
      continue;
    }
    // Every scheduled sequence runs once, and ref counts equal the table entries.
    std::set<const Sequence*> seen;
    for (const ScheduledSeq& s : step.seqs) {
      REQUIRE(s.seq->status == SeqStatus::running);
      REQUIRE(seen.insert(s.seq).second);
      REQUIRE(s.num_new_tokens >= 1);
    }
    std::vector<int32_t> refs(size_t(cfg.num_blocks), 0);
    for (const Sequence* s : sched.running())
      for (int32_t b : s->block_table) ++refs[size_t(b)];
    for (int32_t b = 0; b < cfg.num_blocks; ++b) REQUIRE(blocks.ref_count(b) == refs[size_t(b)]);
    for (size_t i = 0; i < reqs.size(); ++i) {
      if (seqs[i] && !admitted[i] && seqs[i]->status == SeqStatus::running) {
        admitted[i] = true;
        res.admission_order.push_back(i);
      }
    }

    auto fwd = model.forward(step.plan, next);
    REQUIRE(fwd.has_value());
    REQUIRE(int32_t(next.size()) == step.num_sampled);
    sched.commit(step);
    size_t r = 0;
    for (const ScheduledSeq& s : step.seqs) {
      if (!s.samples) continue;
      s.seq->append_token(next[r++]);
      if (s.seq->num_generated() == s.seq->params().max_tokens) {
        sched.finish(s.seq);
        ++num_done;
      }
    }
    res.steps = t + 1;
  }
  for (size_t i = 0; i < reqs.size(); ++i)
    if (seqs[i])
      res.outputs[i].assign(seqs[i]->tokens().begin() + seqs[i]->prompt_len(), seqs[i]->tokens().end());
  REQUIRE(blocks.check_invariants().has_value());
  res.final_stats = blocks.stats();
  res.preemptions = sched.num_preemptions();
  for (int32_t b = 0; b < cfg.num_blocks; ++b) REQUIRE(blocks.ref_count(b) == 0);
  return res;
}

// Requests in `groups` prefix families: each prompt = its family's shared
// prefix (shared_len tokens) + a private suffix of 1..max_suffix tokens.
struct SimWorkload {
  int32_t num_requests = 8;
  int32_t groups = 2;
  int32_t shared_len = 0;
  int32_t max_suffix = 12;
  int32_t max_new = 8;
  int32_t arrival_spread = 0;  // arrival steps drawn in [0, arrival_spread]
  uint32_t seed = 1;
};

inline std::vector<SimRequest> make_workload(const SimWorkload& w, int32_t vocab) {
  std::mt19937 rng(w.seed);
  auto uni = [&](int32_t lo, int32_t hi) { return std::uniform_int_distribution<int32_t>(lo, hi)(rng); };
  std::vector<std::vector<int32_t>> prefixes(size_t(std::max(1, w.groups)));
  for (auto& p : prefixes)
    for (int32_t i = 0; i < w.shared_len; ++i) p.push_back(uni(0, vocab - 1));
  std::vector<SimRequest> reqs(size_t(w.num_requests));
  for (auto& r : reqs) {
    r.prompt = prefixes[size_t(uni(0, int32_t(prefixes.size()) - 1))];
    const int32_t suffix = uni(1, w.max_suffix);
    for (int32_t i = 0; i < suffix; ++i) r.prompt.push_back(uni(0, vocab - 1));
    r.max_tokens = uni(1, w.max_new);
    r.arrival_step = uni(0, w.arrival_spread);
  }
  // Arrival order = index order within a step; sort by step for readable tables.
  std::stable_sort(reqs.begin(), reqs.end(), [](auto& a, auto& b) { return a.arrival_step < b.arrival_step; });
  return reqs;
}

}  // namespace photon::test
