// photon bench: speed of a model on a backend, on a real model folder or on
// random bf16 weights of any config.json (speed does not depend on weight
// values); --int8 quantizes the linear layers to group-wise int8 at load. Reports single-stream decode tok/s, time to first token, prefill
// tok/s, aggregate decode tok/s of B sequences decoding together (for each
// prompt/output shape), peak device memory, and the decode step's achieved
// memory bandwidth against the measured device-to-device copy bandwidth.
// Every step ends with the backend's sampler, as in serving. --json prints
// one JSON object for scripts.
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_driver.hpp"
#include "bench_engine.hpp"
#include "cli_weights.hpp"
#include "commands.hpp"
#include "core/cpu_backend.hpp"
#include "model/config.hpp"
#include "model/model.hpp"
#if defined(PHOTON_HAVE_CUDA)
#include "cuda/cuda_backend.hpp"
#endif

namespace photon::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct BenchArgs {
  std::string model, config, backend = "cuda";
  bool random_weights = false;
  bool json = false;
  std::vector<int32_t> batches = {1, 4, 16, 64, 256};
  std::vector<std::string> shapes = {"128x128", "512x256"};  // prompt x generated tokens of the batched runs
  std::vector<int32_t> ttft_prompts = {100, 128, 1000};
  int32_t prefill_prompt = 512;
  int32_t decode_prompt = 128, decode_tokens = 128;
  int32_t max_batch_tokens = 2048;
  int32_t kv_sequences = 0;  // sequences the KV pool holds (0: the largest batch)
  int32_t repeats = 5;
  float temperature = 1.0f;
  uint64_t seed = 1;
  bool cuda_graphs = true;
  bool engine = false;        // also run the batched shapes through the engine
  bool mma_decode_matmul = false;
  bool decode_attention_clusters = true;
  bool persistent_decode = false;
  bool overlap_steps = true;
  bool lm_head_screen = true;  // ModelLoadOptions::lm_head_screen
  bool pack_activations = false;  // ModelLoadOptions::pack_activations
  int32_t workspace_pad_mib = 0;  // diagnostic: MiB allocated between the KV pool and the workspaces
  bool skinny_decode_matmul = true;
  WeightFlags weights;  // --int8, --int8-lm-head, --int8-group (ModelLoadOptions' int8 fields)
};

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

std::pair<int32_t, int32_t> parse_shape(const std::string& s) {
  const size_t x = s.find('x');
  if (x == std::string::npos) fail("--shapes: '" + s + "' is not PROMPTxGENERATED (e.g. 128x128)");
  try {
    const int32_t p = std::stoi(s.substr(0, x)), g = std::stoi(s.substr(x + 1));
    if (p < 1 || g < 1) fail("--shapes: '" + s + "' needs positive lengths");
    return {p, g};
  } catch (const std::logic_error&) {
    fail("--shapes: '" + s + "' is not PROMPTxGENERATED (e.g. 128x128)");
  }
}

// Bytes a decode step must read: every linear weight (the LM head included)
// plus the K and V of `context` tokens per sequence; the embedding table is
// read only for the step's rows unless it is the (tied) LM head. With
// int8_group > 0 the layers' linear weights are int8 codes (1 byte each) plus
// one f32 scale per int8_group inputs of a row; the LM head stays bf16 unless int8_head.
double decode_bytes_per_step(const ModelConfig& c, int64_t batch, int64_t context, int32_t int8_group,
                             int32_t head_group) {
  const double H = c.hidden_size, I = c.intermediate_size, L = c.num_layers;
  auto linear = [&](double N, int64_t K, int32_t group) {  // one [N, K] weight, int8 at group > 0
    if (group <= 0) return 2.0 * N * double(K);
    return N * (double(K) + 4.0 * double((K + group - 1) / group));
  };
  const double per_layer = linear(double(c.qkv_dim()), c.hidden_size, int8_group) +
                           linear(H, c.q_dim(), int8_group) + linear(2.0 * I, c.hidden_size, int8_group) +
                           linear(H, c.intermediate_size, int8_group);
  const double head = linear(double(c.vocab_size), c.hidden_size, head_group);
  const double weights = L * per_layer + head;
  const double kv = 2.0 * 2.0 * L * double(c.kv_dim()) * double(context) * double(batch);
  return weights + kv;
}

struct Setup {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model;
  std::string device;
  double copy_bandwidth = 0;  // bytes/s, read + write
};

Setup open_model(const BenchArgs& a) {
  Setup s;
  if (a.backend == "cuda") {
#if defined(PHOTON_HAVE_CUDA)
    s.backend = unwrap(make_cuda_backend(CudaBackendOptions{.cuda_graphs = a.cuda_graphs,
                                                            .mma_decode_matmul = a.mma_decode_matmul,
                                                            .decode_attention_clusters = a.decode_attention_clusters,
                                                            .skinny_decode_matmul = a.skinny_decode_matmul,
                                                            .persistent_decode = a.persistent_decode}));
    s.device = cuda_device_name(*s.backend);
    s.copy_bandwidth = unwrap(cuda_copy_bandwidth(*s.backend, size_t(2) << 30, 20));
#else
    fail("--backend cuda: this build of photon has no CUDA backend");
#endif
  } else if (a.backend == "cpu") {
    s.backend = unwrap(make_cpu_backend(CpuBackendOptions{.num_threads = 0}));
    s.device = "cpu";
  } else {
    fail("--backend must be cuda or cpu");
  }
  ModelLoadOptions load;
  set_load_weights(a.weights, load);
  load.lm_head_screen = a.lm_head_screen;
  load.pack_activations = a.pack_activations;
  // Random weights drawn and int8 weights quantized on every core, for the load only.
  std::unique_ptr<ThreadPool> load_pool;
  if (load.int8_weights || a.random_weights) {
    load_pool = unwrap(ThreadPool::create(int32_t(std::max(1u, std::thread::hardware_concurrency())) - 1));
    load.pool = load_pool.get();
  }
  if (a.random_weights) {
    if (a.config.empty()) fail("--random-weights needs --config FILE");
    std::ifstream f(a.config);
    if (!f) fail("cannot read --config " + a.config);
    std::stringstream text;
    text << f.rdbuf();
    const ModelConfig config = unwrap(ModelConfig::parse(text.str(), a.config));
    s.model = unwrap(Model::create_random(config, *s.backend, a.seed, load));
  } else {
    if (a.model.empty()) fail("give --model DIR, or --config FILE --random-weights");
    s.model = unwrap(Model::load(a.model, *s.backend, load));
  }
  return s;
}

// The LM head screen's screened steps and the ids their draws rescored, so far (zeros without CUDA).
std::pair<int64_t, int64_t> screen_counts(const Backend& b) {
#if defined(PHOTON_HAVE_CUDA)
  return {cuda_screened_steps(b), unwrap(cuda_screen_rescored_ids(b))};
#else
  (void)b;
  return {0, 0};
#endif
}

void run_bench(const BenchArgs& a) {
  std::vector<std::pair<int32_t, int32_t>> shapes;
  for (const auto& s : a.shapes) shapes.push_back(parse_shape(s));
  const auto t_load = Clock::now();
  Setup s = open_model(a);
  const double load_s = seconds_since(t_load);
  Backend& b = *s.backend;
  Model& m = *s.model;
  const ModelConfig& c = m.config();
  const int32_t int8_group = a.weights.any_int8() ? a.weights.group : 0;  // 0: the linear weights are bf16
  // One-row steps stream the LM head screen at this group (0: none; docs/lm-head-screen.md).
  const int32_t screen_group = a.lm_head_screen && !a.weights.int8_lm_head && a.cuda_graphs
                                   ? b.lm_head_screen_group(c.vocab_size, c.hidden_size)
                                   : 0;

  // One KV pool for the largest run (or --kv-sequences): every sequence owns blocks_per_seq blocks.
  constexpr int32_t kBlock = 16;
  int32_t longest = a.decode_prompt + a.decode_tokens + 1;
  for (int32_t p : a.ttft_prompts) longest = std::max(longest, p + 1);
  longest = std::max(longest, a.prefill_prompt + 1);
  int32_t max_b = 1;
  for (auto [p, g] : shapes) longest = std::max(longest, p + g + 1);
  for (int32_t bsz : a.batches) max_b = std::max(max_b, bsz);
  const int32_t blocks_per_seq = (longest + kBlock - 1) / kBlock;
  if (a.kv_sequences > 0 && a.kv_sequences < max_b)
    fail(fmt::format("--kv-sequences {} is below the largest batch {}", a.kv_sequences, max_b));
  const int32_t pool_seqs = a.kv_sequences > 0 ? a.kv_sequences : max_b;
  unwrap(m.init_kv_cache(pool_seqs * blocks_per_seq, kBlock));
  // Where the workspaces land moves the single stream by up to ~2 us per token (docs/performance.md,
  // row 117); the pad shifts them for placement experiments and is held until the end of the run.
  Buffer workspace_pad;
  if (a.workspace_pad_mib > 0) workspace_pad = unwrap(b.allocate(size_t(a.workspace_pad_mib) << 20));
  unwrap(m.reserve(std::max(a.max_batch_tokens, longest), max_b));
  SamplingParams sp;
  sp.temperature = a.temperature;
  sp.seed = a.seed;
  LockstepDriver d(b, m, kBlock, blocks_per_seq, sp, a.seed);
  d.set_overlap(a.overlap_steps);

  nlohmann::json out;
  out["device"] = s.device;
  out["backend"] = a.backend;
  out["model"] = a.random_weights ? a.config + " (random bf16 weights)" : a.model;
  out["weights"] = int8_group > 0
                       ? fmt::format("int8, group {}{}", a.weights.group, a.weights.int8_lm_head ? ", LM head too" : "")
                       : std::string("checkpoint dtype");
  out["architecture"] = c.architecture;
  out["kv_pool_sequences"] = pool_seqs;
  out["load_seconds"] = load_s;
  out["temperature"] = a.temperature;
  out["cuda_graphs"] = a.cuda_graphs;
  out["mma_decode_matmul"] = a.mma_decode_matmul;
  out["decode_attention_clusters"] = a.decode_attention_clusters;
  out["persistent_decode"] = a.persistent_decode;
  out["overlap_steps"] = a.overlap_steps && b.overlaps_steps();
  out["lm_head_screen"] = screen_group > 0;
  out["pack_activations"] = a.pack_activations;
  out["workspace_pad_mib"] = a.workspace_pad_mib;
  out["skinny_decode_matmul"] = a.skinny_decode_matmul;
  out["copy_bandwidth_GBps"] = s.copy_bandwidth / 1e9;

  // Warm-up: one pass of every step shape used below (graph capture, cuBLASLt heuristics).
  d.start(1, a.decode_prompt);
  unwrap(d.prefill(a.max_batch_tokens));
  unwrap(d.decode(4));

  // Single-stream decode.
  {
    std::vector<double> rates;
    double step_s = 0;
    const auto screen0 = screen_counts(b);
    for (int32_t r = 0; r < std::max(1, a.repeats / 2); ++r) {
      d.start(1, a.decode_prompt);
      unwrap(d.prefill(a.max_batch_tokens));
      const auto t0 = Clock::now();
      unwrap(d.decode(a.decode_tokens - 1));
      const double t = seconds_since(t0);
      rates.push_back(double(a.decode_tokens - 1) / t);
      step_s = t / double(a.decode_tokens - 1);
    }
    const double tok_s = median(rates);
    const auto screen1 = screen_counts(b);
    const int64_t screened = screen1.first - screen0.first;
    const double bytes =
        decode_bytes_per_step(c, 1, a.decode_prompt + a.decode_tokens / 2, int8_group,
                              a.weights.int8_lm_head ? int8_group : screen_group);
    out["single_stream"] = {{"prompt", a.decode_prompt},
                            {"generated", a.decode_tokens},
                            {"decode_tok_s", tok_s},
                            {"ms_per_token", 1e3 / tok_s},
                            {"bytes_per_step", bytes},
                            {"achieved_GBps", bytes * tok_s / 1e9},
                            {"floor_tok_s", s.copy_bandwidth > 0 ? s.copy_bandwidth / bytes : 0.0},
                            {"screened_steps", screened},
                            {"screen_rescored_ids_per_step",
                             screened > 0 ? double(screen1.second - screen0.second) / double(screened) : 0.0}};
    (void)step_s;
  }

  // Time to first token: one prefill step of the whole prompt plus sampling.
  {
    nlohmann::json ttft = nlohmann::json::array();
    std::vector<int32_t> prompts = a.ttft_prompts;  // each length once, the prefill figure's included
    if (std::find(prompts.begin(), prompts.end(), a.prefill_prompt) == prompts.end())
      prompts.push_back(a.prefill_prompt);
    for (int32_t p : prompts) {
      std::vector<double> times;
      for (int32_t r = 0; r <= a.repeats; ++r) {
        d.start(1, p);
        const auto t0 = Clock::now();
        unwrap(d.prefill(std::max(a.max_batch_tokens, p)));
        if (r > 0) times.push_back(seconds_since(t0));  // the first run warms up this shape
      }
      const double t = median(times);
      ttft.push_back({{"prompt", p}, {"ttft_ms", t * 1e3}, {"prefill_tok_s", double(p) / t}});
    }
    out["ttft"] = ttft;
  }

  // Aggregate decode of B sequences in lockstep.
  {
    nlohmann::json runs = nlohmann::json::array();
    for (auto [prompt, gen] : shapes) {
      for (int32_t bsz : a.batches) {
        d.start(bsz, prompt);  // untimed warm-up of this shape's steps (graphs, cuBLASLt heuristics)
        unwrap(d.prefill(a.max_batch_tokens));
        unwrap(d.decode(2));
        d.start(bsz, prompt);
        const auto t0 = Clock::now();
        const int32_t prefill_steps = unwrap(d.prefill(a.max_batch_tokens));
        const double prefill_s = seconds_since(t0);
        const auto t1 = Clock::now();
        unwrap(d.decode(gen - 1));
        const double decode_s = seconds_since(t1);
        const double agg = double(bsz) * double(gen - 1) / decode_s;
        const double bytes = decode_bytes_per_step(c, bsz, prompt + gen / 2, int8_group,
                                                   a.weights.int8_lm_head ? int8_group : bsz == 1 ? screen_group : 0);
        runs.push_back({{"batch", bsz},
                        {"prompt", prompt},
                        {"generated", gen},
                        {"prefill_steps", prefill_steps},
                        {"prefill_tok_s", double(bsz) * prompt / prefill_s},
                        {"decode_tok_s", agg},
                        {"ms_per_step", 1e3 * decode_s / double(gen - 1)},
                        {"achieved_GBps", bytes * double(gen - 1) / decode_s / 1e9},
                        {"floor_tok_s", s.copy_bandwidth > 0 ? double(bsz) * s.copy_bandwidth / bytes : 0.0},
                        {"end_to_end_tok_s", double(bsz) * gen / (prefill_s + decode_s)}});
      }
    }
    out["batched"] = runs;
  }
  const MemoryStats mem = b.memory_stats();
  out["peak_device_memory_GiB"] = double(mem.peak_in_use) / double(1ull << 30);

  if (a.engine) {
    EngineBenchArgs ea;
    ea.batches = a.batches;
    ea.shapes = shapes;
    ea.max_batch_tokens = a.max_batch_tokens;
    ea.temperature = a.temperature;
    ea.seed = a.seed;
    ea.overlap_steps = a.overlap_steps;
    out["engine"] = run_engine_bench(std::move(s.backend), std::move(s.model), pool_seqs * blocks_per_seq, kBlock, ea);
  }

  if (a.json) {
    fmt::print("{}\n", out.dump(2));
    return;
  }
  fmt::print("photon bench: {} on {} ({}), weights {}, load {:.1f} s, copy bandwidth {:.0f} GB/s\n",
             out["model"].get<std::string>(), s.device, a.backend, out["weights"].get<std::string>(), load_s,
             s.copy_bandwidth / 1e9);
  const auto& ss = out["single_stream"];
  fmt::print("single stream: {:.1f} tok/s ({:.3f} ms/token), {:.0f} GB/s achieved, floor {:.0f} tok/s\n",
             ss["decode_tok_s"].get<double>(), ss["ms_per_token"].get<double>(), ss["achieved_GBps"].get<double>(),
             ss["floor_tok_s"].get<double>());
  for (const auto& t : out["ttft"])
    fmt::print("TTFT {:5d}-token prompt: {:8.2f} ms ({:.0f} prompt tok/s)\n", t["prompt"].get<int>(),
               t["ttft_ms"].get<double>(), t["prefill_tok_s"].get<double>());
  fmt::print("{:>6} {:>7} {:>6} {:>12} {:>12} {:>10} {:>10} {:>12}\n", "batch", "prompt", "gen", "decode tok/s",
             "prefill tok/s", "ms/step", "GB/s", "floor tok/s");
  for (const auto& r : out["batched"])
    fmt::print("{:>6} {:>7} {:>6} {:>12.0f} {:>12.0f} {:>10.3f} {:>10.0f} {:>12.0f}\n", r["batch"].get<int>(),
               r["prompt"].get<int>(), r["generated"].get<int>(), r["decode_tok_s"].get<double>(),
               r["prefill_tok_s"].get<double>(), r["ms_per_step"].get<double>(), r["achieved_GBps"].get<double>(),
               r["floor_tok_s"].get<double>());
  fmt::print("peak device memory: {:.2f} GiB\n", out["peak_device_memory_GiB"].get<double>());
  if (!out.contains("engine")) return;
  fmt::print("through the engine (requests submitted at once; decode tok/s and ms/step while all B decode):\n");
  fmt::print("{:>6} {:>7} {:>6} {:>13} {:>12} {:>10} {:>10} {:>10}\n", "batch", "prompt", "gen", "output tok/s",
             "decode tok/s", "ms/step", "TTFT p50", "TTFT max");
  for (const auto& r : out["engine"])
    fmt::print("{:>6} {:>7} {:>6} {:>13.0f} {:>12.0f} {:>10.3f} {:>10.2f} {:>10.2f}\n", r["batch"].get<int>(),
               r["prompt"].get<int>(), r["generated"].get<int>(), r["output_tok_s"].get<double>(),
               r["decode_tok_s"].get<double>(), r["ms_per_decode_step"].get<double>(), r["ttft_ms_p50"].get<double>(),
               r["ttft_ms_max"].get<double>());
}

const CliRegistrar kRegister{{"bench", "Measure decode, prefill and batched throughput of a model on a backend",
                              [](CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  app.add_option("--model", a->model, "Hugging Face model folder");
  app.add_option("--config", a->config, "config.json of the shape to build (with --random-weights)");
  app.add_flag("--random-weights", a->random_weights, "Random bf16 weights of --config's shape instead of a checkpoint");
  app.add_option("--backend", a->backend, "cuda or cpu")->default_val("cuda");
  app.add_option("--batches", a->batches, "Concurrent sequences of the batched runs")->delimiter(',');
  app.add_option("--shapes", a->shapes, "PROMPTxGENERATED token counts of the batched runs")->delimiter(',');
  app.add_option("--ttft-prompts", a->ttft_prompts, "Prompt lengths whose time to first token is measured")
      ->delimiter(',');
  app.add_option("--prefill-prompt", a->prefill_prompt, "Prompt length of the prefill tok/s figure")->default_val(512);
  app.add_option("--decode-prompt", a->decode_prompt, "Prompt of the single-stream decode run")->default_val(128);
  app.add_option("--decode-tokens", a->decode_tokens, "Tokens generated by the single-stream run")->default_val(128);
  app.add_option("--max-batch-tokens", a->max_batch_tokens, "Tokens per prefill step")->default_val(2048);
  app.add_option("--kv-sequences", a->kv_sequences,
                 "Sequences of the longest run's length the KV pool holds (0: the largest batch); a larger pool "
                 "shows the cache layout's cost at the engine's usual pool sizes (docs/kv-cache-layout.md)")
      ->default_val(0);
  app.add_option("--repeats", a->repeats, "Timed repeats of the single-stream and TTFT runs")->default_val(5);
  app.add_option("--temperature", a->temperature, "Sampling temperature of every step (0 = greedy)")->default_val(1.0);
  app.add_option("--seed", a->seed, "Seed of the random weights, prompts and sampling")->default_val(1);
  app.add_option("--cuda-graphs", a->cuda_graphs, "Replay decode steps from CUDA graphs (true|false)")->default_val(true);
  app.add_flag("--engine", a->engine,
               "Also run the batched shapes through the engine (scheduler, chunked prefill, events)");
  app.add_option("--mma-decode-matmul", a->mma_decode_matmul,
                 "2..64-row matmuls on the tensor-core gemv_mma kernel instead of cuBLASLt (true|false)")
      ->default_val(false);
  app.add_option("--decode-attention-clusters", a->decode_attention_clusters,
                 "sm_90+: merge decode attention's context splits inside a thread-block cluster (true|false)")
      ->default_val(true);
  app.add_option("--skinny-decode-matmul", a->skinny_decode_matmul,
                 "decode batches' small matmuls (and gate/up + SwiGLU, int8 matmuls) on the skinny tensor-core "
                 "kernels (true|false)")
      ->default_val(true);
  app.add_option("--overlap-steps", a->overlap_steps,
                 "Launch decode step N + 1 before reading step N's tokens, which it takes on the device (true|false)")
      ->default_val(true);
  app.add_option("--lm-head-screen", a->lm_head_screen,
                 "Single-sequence decode steps stream an int8 copy of the bf16 LM head and draw exactly by "
                 "rescoring the ids its error bound cannot rule out (true|false; docs/lm-head-screen.md)")
      ->default_val(true);
  app.add_option("--pack-activations", a->pack_activations,
                 "Every step's activations packed back to back in one workspace for its own token count "
                 "(true|false; docs/performance.md, row 118)")
      ->default_val(false);
  app.add_option("--workspace-pad-mib", a->workspace_pad_mib,
                 "Diagnostic: MiB of device memory allocated between the KV pool and the model's workspaces, "
                 "to move where they land (docs/performance.md, row 117)")
      ->default_val(0)
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--persistent-decode", a->persistent_decode,
                 "sm_90+: single-sequence decode steps run every layer in one persistent kernel (true|false)")
      ->default_val(false);
  app.add_flag("--json", a->json, "Print one JSON object");
  add_weight_flags(app, a->weights);
  app.callback([a] {
    if (a->decode_tokens < 2 || a->repeats < 1 || a->max_batch_tokens < 1) fail("--decode-tokens >= 2, --repeats >= 1");
    if (a->kv_sequences < 0) fail("--kv-sequences must be 0 or positive");
    for (int32_t bsz : a->batches)
      if (bsz < 1) fail("--batches: batch sizes must be positive");
    run_bench(*a);
  });
}}};

}  // namespace
}  // namespace photon::cli
