// photon batch --model DIR --requests FILE.jsonl [--kv-blocks N] [--block-size B]
//              [--max-batch-tokens T] [--max-seqs S] [--backend B] [--threads N] [--int8 [--int8-group G]]
//
// Every line of FILE is one request, submitted at once and served
// concurrently by the engine:
//   {"id": <any JSON>, "tokens": [ids] | "prompt": "text" | "messages": [{"role", "content"}],
//    "max_tokens": N, "temperature": x, "top_k": k, "top_p": p, "min_p": p, "seed": s,
//    "repetition_penalty": x, "presence_penalty": x, "frequency_penalty": x,
//    "stop_token_ids": [ids], "stop": ["text"], "ignore_eos": bool, "logprobs": n}
// Sampling defaults to greedy (temperature 0). One output line per request, in
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

#include "commands.hpp"
#include "photon/engine.hpp"

namespace photon::cli {
namespace {

using nlohmann::json;

struct BatchArgs {
  std::string model, requests, backend = "auto";
  int32_t kv_blocks = 0, block_size = 16, max_batch_tokens = 2048, max_seqs = 256, threads = 0;
  bool int8 = false;
  int32_t int8_group = 128;
};

struct Line {
  json id;
  Request request;
};

template <class T>
T get_field(const json& j, const char* key, size_t line_no) {
  try {
    return j.at(key).get<T>();
  } catch (const json::exception&) {
    fail(fmt::format("{} line {}: field \"{}\" has the wrong type ({})", "requests", line_no, key,
                     j.at(key).type_name()));
  }
}

Line parse_line(const std::string& text, size_t line_no) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) fail(fmt::format("requests line {}: not a JSON object", line_no));
  Line l;
  l.id = j.contains("id") ? j["id"] : json(line_no);
  Request& r = l.request;
  r.sampling.temperature = 0.0f;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const char* key = k.c_str();
    if (k == "id") continue;
    else if (k == "tokens") r.prompt_tokens = get_field<std::vector<int32_t>>(j, key, line_no);
    else if (k == "prompt") r.prompt = get_field<std::string>(j, key, line_no);
    else if (k == "messages") {
      if (!it->is_array()) fail(fmt::format("requests line {}: \"messages\" is not an array", line_no));
      for (const json& m : *it) {
        if (!m.is_object() || !m.contains("role") || !m.contains("content") || !m["role"].is_string() ||
            !m["content"].is_string())
          fail(fmt::format("requests line {}: each message needs string \"role\" and \"content\"", line_no));
        r.messages.push_back({m["role"].get<std::string>(), m["content"].get<std::string>(), std::nullopt});
      }
    } else if (k == "max_tokens") r.max_tokens = get_field<int32_t>(j, key, line_no);
    else if (k == "temperature") r.sampling.temperature = get_field<float>(j, key, line_no);
    else if (k == "top_k") r.sampling.top_k = get_field<int32_t>(j, key, line_no);
    else if (k == "top_p") r.sampling.top_p = get_field<float>(j, key, line_no);
    else if (k == "min_p") r.sampling.min_p = get_field<float>(j, key, line_no);
    else if (k == "seed") r.sampling.seed = get_field<uint64_t>(j, key, line_no);
    else if (k == "repetition_penalty") r.sampling.repetition_penalty = get_field<float>(j, key, line_no);
    else if (k == "presence_penalty") r.sampling.presence_penalty = get_field<float>(j, key, line_no);
    else if (k == "frequency_penalty") r.sampling.frequency_penalty = get_field<float>(j, key, line_no);
    else if (k == "stop_token_ids") r.stop_token_ids = get_field<std::vector<int32_t>>(j, key, line_no);
    else if (k == "stop") r.stop = it->is_string() ? std::vector<std::string>{it->get<std::string>()}
                                                   : get_field<std::vector<std::string>>(j, key, line_no);
    else if (k == "ignore_eos") r.ignore_eos = get_field<bool>(j, key, line_no);
    else if (k == "logprobs") r.logprobs = get_field<int32_t>(j, key, line_no);
    else fail(fmt::format("requests line {}: unknown field \"{}\"", line_no, k));
  }
  return l;
}

std::vector<Line> read_requests(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail(fmt::format("cannot open --requests file {}", path));
  std::vector<Line> lines;
  std::string text;
  for (size_t line_no = 1; std::getline(in, text); ++line_no) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    lines.push_back(parse_line(text, line_no));
  }
  if (lines.empty()) fail(fmt::format("--requests file {} holds no request", path));
  return lines;
}

void run(const BatchArgs& a) {
  std::vector<Line> lines = read_requests(a.requests);
  EngineOptions opts;
  opts.model_dir = a.model;
  opts.backend = a.backend;
  opts.threads = a.threads;
  opts.kv_blocks = a.kv_blocks;
  opts.block_size = a.block_size;
  opts.max_batch_tokens = a.max_batch_tokens;
  opts.max_seqs = a.max_seqs;
  opts.weights = a.int8 ? "int8" : "auto";
  opts.int8_group_size = a.int8_group;
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
  app.add_flag("--int8", args->int8, "quantize the linear layers to group-wise int8 at load (cpu backend)");
  app.add_option("--int8-group", args->int8_group, "with --int8: input features per scale")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.callback([args] { run(*args); });
}

const CliRegistrar registrar{{"batch", "serve a JSON Lines file of requests concurrently on the engine", setup}};

}  // namespace
}  // namespace photon::cli
