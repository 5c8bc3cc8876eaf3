// Table-driven scheduler scenarios over the fake KV model: outputs equal the
// directly computed continuation whatever the budgets, chunking, preemption
// and prefix sharing; budgets hold every step; admission is FIFO; every
// block comes back.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "scheduler_sim.hpp"

using namespace photon;
using namespace photon::test;

namespace {

struct Scenario {
  const char* name;
  SimConfig cfg;
  SimWorkload load;
  bool expect_preemption;
  bool expect_prefix_hits;
};

// KV capacity is num_blocks * block_size tokens; each request needs at most
// shared_len + max_suffix + max_new of them.
const Scenario kScenarios[] = {
    {"single request", {64, 4, 64, 16, true, 997}, {1, 1, 0, 12, 8, 0, 1}, false, false},
    {"one token per step", {64, 4, 1, 16, true, 997}, {8, 2, 0, 9, 5, 3, 2}, false, false},
    {"small chunks, few seqs", {64, 4, 7, 4, true, 997}, {16, 2, 0, 20, 6, 10, 3}, false, false},
    {"block size 1", {200, 1, 16, 8, true, 997}, {12, 3, 6, 10, 6, 4, 4}, false, true},
    {"odd block size", {60, 5, 23, 64, true, 997}, {24, 3, 11, 14, 9, 6, 5}, false, true},
    {"forced preemption", {12, 4, 32, 16, true, 997}, {24, 4, 0, 14, 16, 5, 6}, true, false},
    {"forced preemption, no prefix cache", {12, 4, 32, 16, false, 997}, {24, 4, 0, 14, 16, 5, 7}, true, false},
    {"preemption with shared prefixes", {16, 4, 13, 16, true, 997}, {32, 2, 24, 8, 12, 8, 8}, true, true},
    {"long shared prefixes", {400, 4, 128, 64, true, 997}, {64, 3, 60, 10, 6, 20, 9}, false, true},
    {"64 concurrent, chunk 1", {128, 8, 1, 64, true, 997}, {64, 4, 9, 6, 3, 0, 10}, false, true},
    {"64 staggered, tight KV", {40, 2, 48, 64, true, 997}, {64, 4, 20, 16, 20, 40, 11}, true, true},
};

}  // namespace

TEST_CASE("scheduler scenarios match the directly computed continuation", "[scheduler]") {
  for (const Scenario& sc : kScenarios) {
    SECTION(sc.name) {
      const auto reqs = make_workload(sc.load, sc.cfg.vocab);
      for (const auto& r : reqs)
        REQUIRE(int32_t(r.prompt.size()) + r.max_tokens <= sc.cfg.num_blocks * sc.cfg.block_size);
      const SimResult res = run_sim(sc.cfg, reqs);
      for (size_t i = 0; i < reqs.size(); ++i) {
        INFO("request " << i);
        CHECK(res.outputs[i] == fake_reference(reqs[i].prompt, reqs[i].max_tokens, sc.cfg.vocab));
      }
      // FIFO: first admissions follow arrival order.
      REQUIRE(res.admission_order.size() == reqs.size());
      for (size_t i = 0; i < reqs.size(); ++i) CHECK(res.admission_order[i] == i);
      CHECK(res.final_stats.used == 0);
      CHECK(res.final_stats.free + res.final_stats.cached == sc.cfg.num_blocks);
      if (sc.expect_preemption) CHECK(res.preemptions > 0);
      if (sc.expect_prefix_hits) CHECK(res.final_stats.hit_tokens > 0);
      if (!sc.cfg.prefix_caching) CHECK(res.final_stats.cached == 0);
    }
  }
}

TEST_CASE("cancelled requests return their blocks and leave the others intact", "[scheduler]") {
  SimConfig cfg{24, 4, 20, 8, true, 997};
  auto reqs = make_workload({20, 3, 8, 10, 12, 6, 21}, cfg.vocab);
  // Cancel every third request at various moments: before arrival has no
  // effect, while waiting, mid-prefill, mid-decode.
  for (size_t i = 0; i < reqs.size(); i += 3) reqs[i].cancel_step = reqs[i].arrival_step + int32_t(i % 7);
  const SimResult res = run_sim(cfg, reqs);
  size_t cancelled = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    INFO("request " << i);
    const auto ref = fake_reference(reqs[i].prompt, reqs[i].max_tokens, cfg.vocab);
    if (res.cancelled[i]) {
      ++cancelled;
      CHECK(res.outputs[i].size() < ref.size());
      CHECK(std::equal(res.outputs[i].begin(), res.outputs[i].end(), ref.begin()));
    } else {
      CHECK(res.outputs[i] == ref);
    }
  }
  CHECK(cancelled > 0);
  CHECK(res.final_stats.used == 0);
}

TEST_CASE("same workload gives the same schedule every run", "[scheduler]") {
  SimConfig cfg{16, 4, 9, 5, true, 997};
  const auto reqs = make_workload({20, 2, 10, 10, 10, 8, 22}, cfg.vocab);
  const SimResult a = run_sim(cfg, reqs);
  const SimResult b = run_sim(cfg, reqs);
  CHECK(a.steps == b.steps);
  CHECK(a.preemptions == b.preemptions);
  CHECK(a.outputs == b.outputs);
  CHECK(a.final_stats.hit_tokens == b.final_stats.hit_tokens);
}

TEST_CASE("a step never exceeds max_batch_tokens and prefill is chunked", "[scheduler]") {
  BlockManager blocks(32, 4, false);
  Scheduler sched(SchedulerOptions{5, 4}, blocks);
  std::vector<int32_t> prompt(13);
  for (int32_t i = 0; i < 13; ++i) prompt[size_t(i)] = i;
  Sequence a(1, prompt, SequenceParams{});
  sched.add(&a);
  StepSchedule step;
  std::vector<int32_t> chunks;
  for (int i = 0; i < 3; ++i) {
    sched.schedule(step);
    REQUIRE(step.seqs.size() == 1);
    chunks.push_back(step.seqs[0].num_new_tokens);
    CHECK(step.plan.positions.front() == a.num_computed_tokens);
    CHECK(step.seqs[0].samples == (i == 2));
    CHECK(step.plan.num_logits() == (i == 2 ? 1 : 0));
    sched.commit(step);
  }
  CHECK(chunks == std::vector<int32_t>{5, 5, 3});
  CHECK(a.num_computed_tokens == 13);
}

TEST_CASE("preemption takes the newest running sequence and requeues it first", "[scheduler]") {
  // 4 blocks of 2 tokens: two 3-token prompts take 2 blocks each; the first
  // decode step needs a third block for one of them.
  BlockManager blocks(4, 2, false);
  Scheduler sched(SchedulerOptions{64, 8}, blocks);
  SequenceParams p;
  p.max_tokens = 4;
  Sequence a(1, std::vector<int32_t>{1, 2, 3}, p), b(2, std::vector<int32_t>{4, 5, 6}, p),
      c(3, std::vector<int32_t>{7}, p);
  sched.add(&a);
  sched.add(&b);
  sched.add(&c);
  StepSchedule step;
  sched.schedule(step);  // a and b admitted (2 blocks each); c waits (no block left)
  REQUIRE(step.seqs.size() == 2);
  CHECK(sched.num_waiting() == 1);
  sched.commit(step);
  a.append_token(10);
  b.append_token(11);
  sched.schedule(step);  // a's 4th token fits in its 2nd block; so does b's
  REQUIRE(step.seqs.size() == 2);
  sched.commit(step);
  a.append_token(12);
  b.append_token(13);
  sched.schedule(step);  // a needs a 3rd block: b (newest) is preempted
  REQUIRE(step.seqs.size() == 1);
  CHECK(step.seqs[0].seq == &a);
  REQUIRE(step.preempted == std::vector<Sequence*>{&b});
  CHECK(b.status == SeqStatus::preempted);
  CHECK(b.num_computed_tokens == 0);
  CHECK(b.block_table.empty());
  CHECK(b.num_tokens() == 5);  // generated tokens kept
  REQUIRE(sched.waiting().size() == 2);
  CHECK(sched.waiting().front() == &b);  // ahead of c, which arrived later
  CHECK(blocks.check_invariants().has_value());
}

TEST_CASE("a lone sequence that runs out of blocks preempts itself", "[scheduler]") {
  BlockManager blocks(2, 2, false);
  Scheduler sched(SchedulerOptions{64, 8}, blocks);
  Sequence a(1, std::vector<int32_t>{1, 2, 3, 4}, SequenceParams{});
  sched.add(&a);
  StepSchedule step;
  sched.schedule(step);
  sched.commit(step);
  a.append_token(5);  // position 4 would need a 3rd block
  sched.schedule(step);
  CHECK(step.empty());
  CHECK(step.preempted == std::vector<Sequence*>{&a});
  CHECK(sched.num_running() == 0);
  CHECK(blocks.stats().used == 0);
}

TEST_CASE("max_seqs caps the running set", "[scheduler]") {
  BlockManager blocks(64, 4, true);
  Scheduler sched(SchedulerOptions{100, 3}, blocks);
  std::vector<std::unique_ptr<Sequence>> seqs;
  for (int i = 0; i < 5; ++i) {
    seqs.push_back(std::make_unique<Sequence>(uint64_t(i), std::vector<int32_t>{i, i + 1}, SequenceParams{}));
    sched.add(seqs.back().get());
  }
  StepSchedule step;
  sched.schedule(step);
  CHECK(step.seqs.size() == 3);
  CHECK(sched.num_running() == 3);
  CHECK(sched.num_waiting() == 2);
  CHECK(sched.waiting().front() == seqs[3].get());
}
