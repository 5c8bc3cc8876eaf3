#include "bench_engine.hpp"

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <unordered_map>

#include "commands.hpp"
#include "scheduler/backend_runner.hpp"
#include "scheduler/engine_core.hpp"

namespace photon::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

struct EngineRun {
  double total_s = 0;  // first submit to the last token
  // The full-batch window: from the end of the step that gave the last
  // request its first token to the end of the last step before any request
  // finished. Every step in it decodes all B requests; its time includes
  // everything the host does between steps (poll, this loop).
  double window_s = 0;
  int64_t window_tokens = 0, window_steps = 0;
  double window_step_s = 0;    // the part of window_s spent inside step()
  int64_t steps = 0;
  std::vector<double> ttft_s;  // per request
};

// Submits B random prompts of P tokens (G tokens each, EOS ignored) and steps until all finish.
EngineRun run_once(EngineCore& core, int32_t B, int32_t P, int32_t G, const EngineBenchArgs& a, std::mt19937_64& rng) {
  std::uniform_int_distribution<int32_t> token(0, core.config().vocab_size - 1);
  std::vector<Request> reqs(static_cast<size_t>(B));
  for (Request& r : reqs) {
    r.prompt_tokens.resize(size_t(P));
    for (int32_t& t : r.prompt_tokens) t = token(rng);
    r.max_tokens = G;
    r.ignore_eos = true;
    r.detokenize = false;
    r.sampling.temperature = a.temperature;
    r.sampling.seed = rng();
  }
  EngineRun run;
  run.ttft_s.assign(size_t(B), -1.0);
  std::unordered_map<RequestId, size_t> index;
  const auto t0 = Clock::now();
  for (size_t i = 0; i < reqs.size(); ++i) index[unwrap(core.submit(std::move(reqs[i])))] = i;

  int32_t finished = 0, with_first = 0;
  bool window_started = false, in_window = false;
  Clock::time_point t_window{}, t_end{};
  std::vector<Event> events;
  while (finished < B) {
    const auto ts = Clock::now();
    const StepStats stats = unwrap(core.step());
    const auto t_stepped = Clock::now();
    ++run.steps;
    events.clear();
    core.poll(events);
    const auto te = Clock::now();
    int64_t tokens = 0;
    bool any_finish = false;
    for (const Event& e : events) {
      if (e.finish == FinishReason::error) fail("engine bench: a step failed: " + e.error);
      const size_t i = index.at(e.request);
      if (e.token >= 0) {
        ++tokens;
        if (run.ttft_s[i] < 0) {
          run.ttft_s[i] = seconds_between(t0, te);
          ++with_first;
        }
      }
      if (e.finish != FinishReason::none) {
        ++finished;
        any_finish = true;
      }
    }
    if (any_finish) in_window = false;
    if (in_window) {
      run.window_tokens += tokens;
      ++run.window_steps;
      run.window_step_s += seconds_between(ts, t_stepped);
      run.window_s = seconds_between(t_window, te);
    }
    if (with_first == B && !window_started) {  // the window opens after this step
      window_started = true;
      in_window = !any_finish;
      t_window = te;
    }
    if (stats.tokens == 0 && finished < B && !core.has_work()) fail("engine bench: the engine stopped with requests left");
    t_end = te;
  }
  run.total_s = seconds_between(t0, t_end);
  return run;
}

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[std::min(v.size() - 1, size_t(q * double(v.size())))];
}

}  // namespace

nlohmann::json run_engine_bench(std::unique_ptr<Backend> backend, std::unique_ptr<Model> model, int32_t num_blocks,
                                int32_t block_size, const EngineBenchArgs& a) {
  int32_t max_b = 1;
  for (int32_t b : a.batches) max_b = std::max(max_b, b);
  const ModelConfig& mc = model->config();
  EngineCoreConfig cc;
  cc.num_blocks = num_blocks;
  cc.block_size = block_size;
  cc.max_batch_tokens = a.max_batch_tokens;
  cc.max_seqs = max_b;
  cc.prefix_caching = true;
  cc.vocab_size = mc.vocab_size;
  cc.max_model_len = mc.max_position_embeddings;
  cc.eos_token_ids = mc.eos_token_ids;
  cc.seed_salt = a.seed;
  cc.overlap = a.overlap_steps ? StepOverlap::automatic : StepOverlap::off;
  unwrap(model->reserve(a.max_batch_tokens, max_b));
  auto core = unwrap(EngineCore::create(std::move(cc), std::make_unique<BackendModelRunner>(std::move(backend), std::move(model))));
  std::mt19937_64 rng(a.seed);

  nlohmann::json rows = nlohmann::json::array();
  for (auto [prompt, gen] : a.shapes) {
    for (int32_t b : a.batches) {
      if (int64_t(b) * ((prompt + gen + block_size - 1) / block_size + 1) > num_blocks)
        fail("engine bench: the KV pool is too small for " + std::to_string(b) + " requests of " +
             std::to_string(prompt + gen) + " tokens");
      (void)run_once(*core, b, prompt, gen, a, rng);  // warm-up: graph capture per bucket and width, heuristics
      const EngineRun r = run_once(*core, b, prompt, gen, a, rng);
      rows.push_back({{"batch", b},
                      {"prompt", prompt},
                      {"generated", gen},
                      {"output_tok_s", double(b) * gen / r.total_s},
                      {"decode_tok_s", r.window_s > 0 ? double(r.window_tokens) / r.window_s : 0.0},
                      {"ms_per_decode_step", r.window_steps > 0 ? 1e3 * r.window_s / double(r.window_steps) : 0.0},
                      {"ms_in_step_per_decode_step", r.window_steps > 0 ? 1e3 * r.window_step_s / double(r.window_steps) : 0.0},
                      {"decode_window_steps", r.window_steps},
                      {"ttft_ms_p50", 1e3 * percentile(r.ttft_s, 0.5)},
                      {"ttft_ms_max", 1e3 * percentile(r.ttft_s, 1.0)},
                      {"steps", r.steps},
                      {"total_s", r.total_s}});
    }
  }
  return rows;
}

}  // namespace photon::cli
