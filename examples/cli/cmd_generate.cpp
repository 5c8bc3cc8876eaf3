// photon generate --model DIR (--tokens 1,2,3 | --prompt TEXT) [--max-tokens N] [sampling flags] [--json]
//                 [--int8 | --int8-lm-head [--int8-group G]]
// One request on the engine. Greedy unless --temperature is given. Stops after
// an EOS id ("stop": config.json's eos_token_id and the tokenizer's), a
// --stop string, or N tokens ("length"). --prompt streams the text as it is
// generated (unless --json); --tokens prints the ids.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli_model.hpp"
#include "cli_sampling.hpp"
#include "cli_weights.hpp"
#include "commands.hpp"
#include "photon/engine.hpp"

namespace photon::cli {
namespace {

struct GenerateArgs {
  std::string model;
  std::string tokens;
  std::string prompt;
  std::string backend = "auto";
  int32_t max_tokens = 16;
  int32_t threads = 0;
  bool logprobs = false;
  bool json = false;
  bool ignore_eos = false;
  WeightFlags weights;
  std::vector<std::string> stop;
  SamplingFlags sampling;
};

void run(const GenerateArgs& a) {
  if (a.tokens.empty() == a.prompt.empty()) fail("give exactly one of --tokens and --prompt");
  EngineOptions opts;
  opts.model_dir = a.model;
  opts.backend = a.backend;
  opts.threads = a.threads;
  opts.weights = engine_weights(a.weights);
  opts.int8_group_size = a.weights.group;
  opts.max_seqs = 1;  // one request: the default KV budget is capped at one full-length sequence
  Engine engine = unwrap(Engine::open(opts));

  Request req;
  if (!a.prompt.empty()) req.prompt = a.prompt;
  else req.prompt_tokens = unwrap(parse_token_list(a.tokens, engine.vocab_size()));
  req.max_tokens = a.max_tokens;
  req.ignore_eos = a.ignore_eos;
  req.stop = a.stop;
  req.sampling = sampling_options(a.sampling);
  const RequestId id = unwrap(engine.submit(std::move(req)));

  const bool stream = !a.json && !a.prompt.empty();
  if (stream) {
    fmt::print("{}", a.prompt);
    std::fflush(stdout);
  }
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  std::string text;
  FinishReason finish = FinishReason::none;
  std::vector<Event> events;
  while (finish == FinishReason::none) {
    auto step = engine.step();
    events.clear();
    engine.poll(events);
    for (const Event& e : events) {
      if (e.request != id) continue;
      if (e.token >= 0) {
        tokens.push_back(e.token);
        logprobs.push_back(e.logprob);
      }
      text += e.text;
      if (stream && !e.text.empty()) {
        fmt::print("{}", e.text);
        std::fflush(stdout);
      }
      if (e.finish == FinishReason::error) fail(e.error);
      if (e.finish != FinishReason::none) finish = e.finish;
    }
    if (!step && finish == FinishReason::none) cli::fail(step.error());
  }
  const char* reason = finish_reason_name(finish);
  if (a.json) {
    nlohmann::json out = {{"tokens", tokens}, {"finish_reason", reason}};
    if (a.logprobs) out["logprobs"] = logprobs;
    if (engine.tokenizer() != nullptr) out["text"] = text;
    fmt::print("{}\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  } else if (stream) {
    fmt::print("\n");
  } else {
    fmt::print("{}\nfinish_reason: {}\n", fmt::join(tokens, " "), reason);
  }
}

void setup(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  app.add_option("--model", args->model, "Hugging Face model folder (config.json + *.safetensors)")->required();
  app.add_option("--tokens", args->tokens, "comma-separated prompt token ids");
  app.add_option("--prompt", args->prompt, "prompt text, encoded with the folder's tokenizer; the answer streams");
  app.add_option("--max-tokens", args->max_tokens, "tokens to generate at most (0: as the context allows)")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  app.add_option("--stop", args->stop, "a string that ends generation (repeatable)");
  app.add_flag("--logprobs", args->logprobs, "with --json: add each token's log-probability");
  app.add_flag("--json", args->json, "print {\"tokens\": [...], \"finish_reason\": ... [, \"text\": ...]}");
  app.add_flag("--ignore-eos", args->ignore_eos, "do not stop on EOS ids");
  app.add_option("--backend", args->backend, "cpu, cuda or auto")->capture_default_str();
  app.add_option("--threads", args->threads, "CPU backend threads (0: all cores)")->check(CLI::Range(0, 1024));
  add_weight_flags(app, args->weights);
  add_sampling_flags(app, args->sampling);
  app.callback([args] { run(*args); });
}

const CliRegistrar registrar{{"generate", "generate from prompt token ids or text on the engine", setup}};

}  // namespace
}  // namespace photon::cli
