// Host-side cost of one engine step at 256 running sequences (a program, not
// a test). Goal (issue 3): under 50 us per step.
//
// BM_SchedulePlan: Scheduler::schedule alone, 256 decoding sequences of
//   `ctx` tokens (steady state: the same step planned again; no allocation).
// BM_EngineStep: EngineCore::step() end to end with a runner that does no
//   device work (it returns fixed token ids): inbox drain, schedule, BatchPlan,
//   sampling arrays, commit + prefix-cache registration, token append, stop
//   checks, events, metrics, plus poll() of the events and re-submission of a
//   request for each one that finished (continuous-batching churn: prompts of
//   `ctx` - 256 tokens sharing a long prefix, max_tokens uniform in [1, 512],
//   so ~1 request ends and one is admitted per step). Warmed up to steady
//   state before timing.
// Usage: photon_scheduler_bench [--benchmark_filter=...] [--benchmark_repetitions=N]
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <vector>

#include "scheduler/block_manager.hpp"
#include "scheduler/engine_core.hpp"
#include "scheduler/scheduler.hpp"

using namespace photon;

namespace {

constexpr int32_t kVocab = 32000;
constexpr int32_t kBlockSize = 16;

// A ModelRunner without a model: sampled ids are a fixed function of the row.
class NoDeviceRunner final : public ModelRunner {
 public:
  Result<void> execute(const BatchPlan& plan, const SampleBatch& batch, const SampleOutput& out) override {
    for (int32_t r = 0; r < batch.num_rows; ++r) {
      out.token_ids[r] = int32_t((batch.steps[r] * 7919 + uint64_t(r)) % uint64_t(kVocab - 10)) + 10;
      out.logprobs[r] = -1.0f;
    }
    benchmark::DoNotOptimize(plan.input_ids.data());
    return {};
  }
};

std::vector<int32_t> random_tokens(std::mt19937& rng, int32_t n) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = std::uniform_int_distribution<int32_t>(10, kVocab - 1)(rng);
  return t;
}

void BM_SchedulePlan(benchmark::State& state) {
  const auto seqs = int32_t(state.range(0));
  const auto ctx = int32_t(state.range(1));
  const int32_t blocks_per_seq = (ctx + kBlockSize) / kBlockSize;
  BlockManager blocks(seqs * blocks_per_seq + 16, kBlockSize, true);
  Scheduler sched(SchedulerOptions{8192, seqs}, blocks);
  std::mt19937 rng(1);
  std::vector<std::unique_ptr<Sequence>> pool;
  StepSchedule step;
  for (int32_t i = 0; i < seqs; ++i) {
    pool.push_back(std::make_unique<Sequence>(uint64_t(i), random_tokens(rng, ctx), SequenceParams{}));
    sched.add(pool.back().get());
  }
  // Prefill everything, then append one token each: every later schedule() is a decode step.
  while (sched.num_waiting() > 0 || pool.front()->num_computed_tokens < ctx) {
    sched.schedule(step);
    sched.commit(step);
  }
  for (auto& s : pool) s->append_token(5);
  for (auto _ : state) {
    sched.schedule(step);
    benchmark::DoNotOptimize(step.plan.block_tables.data());
  }
  state.counters["seqs/step"] = double(step.plan.num_seqs());
  state.counters["tokens/step"] = double(step.plan.num_tokens());
}
BENCHMARK(BM_SchedulePlan)->Args({256, 1024})->Args({256, 4096})->Unit(benchmark::kMicrosecond);

void BM_EngineStep(benchmark::State& state) {
  const auto seqs = int32_t(state.range(0));
  const auto ctx = int32_t(state.range(1));
  EngineCoreConfig cfg;
  cfg.block_size = kBlockSize;
  cfg.num_blocks = seqs * ((ctx + 512) / kBlockSize + 1) + 1024;
  cfg.max_batch_tokens = 8192;
  cfg.max_seqs = seqs;
  cfg.vocab_size = kVocab;
  cfg.max_model_len = ctx + 1024;
  cfg.eos_token_ids = {2};
  auto core = EngineCore::create(cfg, std::make_unique<NoDeviceRunner>());
  if (!core) {
    state.SkipWithError(core.error().message.c_str());
    return;
  }
  EngineCore& engine = **core;
  std::mt19937 rng(2);
  const std::vector<int32_t> shared = random_tokens(rng, std::max(0, ctx - 256 - 16));
  auto submit_one = [&] {
    Request r;
    r.prompt_tokens = shared;
    const auto own = random_tokens(rng, 16);
    r.prompt_tokens.insert(r.prompt_tokens.end(), own.begin(), own.end());
    r.max_tokens = std::uniform_int_distribution<int32_t>(1, 512)(rng);
    r.sampling.temperature = 0.0f;
    r.ignore_eos = true;
    (void)engine.submit(r);
  };
  std::vector<Event> events;
  auto one_step = [&] {
    auto st = engine.step();
    events.clear();
    engine.poll(events);
    for (const Event& e : events)
      if (e.finish != FinishReason::none) submit_one();
    return st;
  };
  for (int32_t i = 0; i < seqs; ++i) submit_one();
  for (int i = 0; i < 2000; ++i) (void)one_step();  // steady state
  int64_t tokens = 0, stepped_seqs = 0;
  for (auto _ : state) {
    auto st = one_step();
    if (!st) {
      state.SkipWithError(st.error().message.c_str());
      return;
    }
    tokens += st->tokens;
    stepped_seqs += st->seqs;
  }
  state.counters["seqs/step"] = benchmark::Counter(double(stepped_seqs), benchmark::Counter::kAvgIterations);
  state.counters["tokens/step"] = benchmark::Counter(double(tokens), benchmark::Counter::kAvgIterations);
  const EngineMetrics m = engine.metrics();
  state.counters["prefix_hit"] = m.prefix_hit_rate;
  state.counters["kv_usage"] = m.kv_usage;
}
BENCHMARK(BM_EngineStep)->Args({256, 1024})->Args({256, 4096})->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
