// photon batch --model DIR --requests FILE.jsonl [--kv-blocks N] [--block-size B]
//              [--max-batch-tokens T] [--max-seqs S] [--backend B] [--threads N] [--int8 | --int8-lm-head [--int8-group G]]
//
// Every line of FILE is one request (batch_request.hpp), submitted at once
// and served concurrently by the engine. One output line per request, in
// input order: {"id", "tokens", "finish_reason"[, "text"][, "logprobs", "top_logprobs"][, "error"]}.
// A summary (steps, tokens/s, prefix-cache hit rate, preemptions) goes to stderr.
#include <fmt/format.h>

#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "batch_request.hpp"
#include "cli_weights.hpp"
#include "commands.hpp"
#include "photon/engine.hpp"

namespace photon::cli {
namespace {

using nlohmann::json;

struct BatchArgs {
  std::string model, requests, backend = "auto";
  int32_t kv_blocks = 0, block_size = 16, max_batch_tokens = 2048, max_seqs = 256, threads = 0;
  WeightFlags weights;
};

std::vector<BatchLine> read_requests(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail(fmt::format("cannot open --requests file {}", path));
  std::vector<BatchLine> lines;
  std::string text;
  for (size_t line_no = 1; std::getline(in, text); ++line_no) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    lines.push_back(unwrap(parse_batch_line(text, line_no)));
  }
  if (lines.empty()) fail(fmt::format("--requests file {} holds no request", path));
  return lines;
}

void run(const BatchArgs& a) {
  std::vector<BatchLine> lines = read_requests(a.requests);
  EngineOptions opts;
  opts.model_dir = a.model;
  opts.backend = a.backend;
  opts.threads = a.threads;
  opts.kv_blocks = a.kv_blocks;
  opts.block_size = a.block_size;
  opts.max_batch_tokens = a.max_batch_tokens;
  opts.max_seqs = a.max_seqs;
  opts.weights = engine_weights(a.weights);
  opts.int8_group_size = a.weights.group;
  Engine engine = unwrap(Engine::open(opts));

  std::map<RequestId, size_t> index;
  for (size_t i = 0; i < lines.size(); ++i) {
    auto id = engine.submit(lines[i].request);
    if (!id) fail(fmt::format("request {}: {} ({})", lines[i].id.dump(), id.error().message, errc_name(id.error().code)));
    index.emplace(*id, i);
  }
  std::vector<json> out(lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    out[i] = {{"id", lines[i].id}, {"tokens", json::array()}};
    if (engine.tokenizer() != nullptr) out[i]["text"] = "";
    if (lines[i].request.logprobs > 0) out[i]["logprobs"] = out[i]["top_logprobs"] = json::array();
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Event> events;
  while (engine.has_work()) {
    auto step = engine.step();
    if (!step) fmt::print(stderr, "warning: a step failed: {} (its requests end with an error)\n", step.error().message);
    events.clear();
    engine.poll(events);
    for (Event& e : events) {
      json& o = out[index.at(e.request)];
      if (e.token >= 0) {
        o["tokens"].push_back(e.token);
        if (o.contains("logprobs")) {
          o["logprobs"].push_back(e.logprob);
          json top = json::array();
          for (const TokenLogprob& t : e.top_logprobs) top.push_back({t.token, t.logprob});
          o["top_logprobs"].push_back(std::move(top));
        }
      }
      if (o.contains("text")) o["text"] = o["text"].get<std::string>() + e.text;
      if (e.finish != FinishReason::none) o["finish_reason"] = finish_reason_name(e.finish);
      if (e.finish == FinishReason::error) o["error"] = e.error;
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (const json& o : out) fmt::print("{}\n", o.dump(-1, ' ', false, json::error_handler_t::replace));
  const EngineMetrics m = engine.metrics();
  fmt::print(stderr,
             "batch: {} requests on {} in {:.3f} s: {} steps, {} tokens computed ({:.1f}/step), {} generated "
             "({:.1f} tokens/s), prefix-cache hit rate {:.1f}%, {} preemptions, KV {} blocks x {}\n",
             lines.size(), engine.backend_name(), seconds, m.steps, m.tokens_scheduled, m.tokens_per_step,
             m.tokens_generated, seconds > 0 ? double(m.tokens_generated) / seconds : 0.0, 100.0 * m.prefix_hit_rate,
             m.preemptions, m.kv_blocks_total, m.block_size);
}

void setup(CLI::App& app) {
  auto args = std::make_shared<BatchArgs>();
  app.add_option("--model", args->model, "Hugging Face model folder (config.json + *.safetensors)")->required();
  app.add_option("--requests", args->requests, "JSON Lines file, one request per line")->required();
  app.add_option("--kv-blocks", args->kv_blocks, "KV cache blocks (0: the engine's default budget)")
      ->check(CLI::Range(0, 1 << 30));
  app.add_option("--block-size", args->block_size, "tokens per KV block")->capture_default_str();
  app.add_option("--max-batch-tokens", args->max_batch_tokens, "tokens per step (prefill chunks + decodes)")
      ->capture_default_str();
  app.add_option("--max-seqs", args->max_seqs, "sequences running at once")->capture_default_str();
  app.add_option("--backend", args->backend, "cpu, cuda or auto")->capture_default_str();
  app.add_option("--threads", args->threads, "CPU backend threads (0: all cores)")->check(CLI::Range(0, 1024));
  add_weight_flags(app, args->weights);
  app.callback([args] { run(*args); });
}

const CliRegistrar registrar{{"batch", "serve a JSON Lines file of requests concurrently on the engine", setup}};

}  // namespace
}  // namespace photon::cli
