// photon chat --model DIR: an interactive chat on the engine.
//
// Each user line is added to the conversation, the whole conversation is
// rendered with the model's chat template and generated from (the engine's
// prefix cache reuses the earlier turns' KV blocks), and the answer streams
// to stdout as it is sampled. Ctrl-C stops the current answer (what was
// written so far stays in the history); Ctrl-C or Ctrl-D at the prompt ends
// the chat. /reset forgets the conversation, /exit leaves.
#include <fmt/core.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "photon/engine.hpp"
#include "photon/tokenizer.hpp"

namespace photon::cli {
namespace {

// Set by SIGINT; the chat loop polls it. (Process-wide, as signals are.)
std::atomic<bool> g_interrupted{false};

extern "C" void on_sigint(int) { g_interrupted.store(true); }

// SIGINT without SA_RESTART, so a blocking read at the prompt returns; the
// previous handler comes back when the chat ends.
class SigintScope {
 public:
  SigintScope() {
    struct sigaction sa {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;
    sigaction(SIGINT, &sa, &old_);
  }
  ~SigintScope() { sigaction(SIGINT, &old_, nullptr); }
  SigintScope(const SigintScope&) = delete;
  SigintScope& operator=(const SigintScope&) = delete;

 private:
  struct sigaction old_ {};
};

struct ChatArgs {
  std::string model, system, backend = "auto", date_string;
  float temperature = 0.7f, top_p = 0.95f;
  int32_t top_k = 0, max_tokens = 1024, threads = 0;
  bool enable_thinking = true;
  int64_t seed = -1;
};

// Streams one answer of at most `max_tokens` tokens; returns its text
// (special tokens left out).
std::string answer(Engine& engine, const Tokenizer& tok, const ChatArgs& a, std::vector<int32_t> prompt,
                   int32_t max_tokens) {
  Request req;
  req.prompt_tokens = std::move(prompt);
  req.sampling.temperature = a.temperature;
  req.sampling.top_p = a.top_p;
  req.sampling.top_k = a.top_k;
  if (a.seed >= 0) req.sampling.seed = static_cast<uint64_t>(a.seed);
  req.max_tokens = max_tokens;
  req.stop_token_ids.assign(tok.eos_token_ids().begin(), tok.eos_token_ids().end());
  const RequestId id = unwrap(engine.submit(std::move(req)));

  DetokenizerStream stream(tok, {.skip_special_tokens = true});
  std::string text;
  std::vector<Event> events;
  bool done = false, cancel_sent = false;
  while (!done) {
    if (g_interrupted.load() && !cancel_sent) {
      unwrap(engine.cancel(id));
      cancel_sent = true;
    }
    auto step = engine.step();
    events.clear();
    engine.poll(events);
    for (const Event& e : events) {
      if (e.request != id) continue;
      if (e.token >= 0 && !(e.finish == FinishReason::stop && tok.is_eos(e.token))) {
        const std::string_view piece = unwrap(stream.feed(e.token));
        text += piece;
        fmt::print("{}", piece);
        std::fflush(stdout);
      }
      if (e.finish != FinishReason::none) {
        done = true;
        if (e.finish == FinishReason::error) fmt::print(stderr, "\n[error: {}]", e.error);
        if (e.finish == FinishReason::length) fmt::print(stderr, "\n[max tokens reached]");
        if (e.finish == FinishReason::cancelled) fmt::print(stderr, "\n[stopped]");
      }
    }
    if (!step && !done) cli::fail(step.error());
  }
  const std::string_view tail = stream.finish();
  text += tail;
  fmt::print("{}\n", tail);
  g_interrupted.store(false);
  return text;
}

void run(const ChatArgs& a) {
  const Tokenizer tok = unwrap(Tokenizer::load(a.model));
  if (tok.chat_template_kind() == ChatTemplateKind::none || tok.chat_template_kind() == ChatTemplateKind::unknown) {
    // Fail before loading the weights: render_chat's error says why.
    const std::vector<ChatMessage> probe{{"user", "hi", std::nullopt}};
    unwrap(tok.render_chat(probe));
  }
  EngineOptions opts;
  opts.model_dir = a.model;
  opts.backend = a.backend;
  opts.threads = a.threads;
  Engine engine = unwrap(Engine::open(opts));
  fmt::print(stderr, "photon chat: {} on {} ({} tokens of context). /reset forgets, /exit leaves, Ctrl-C stops an answer.\n",
             a.model, engine.backend_name(), engine.max_model_len());

  const SigintScope sigint;
  std::vector<ChatMessage> history;
  if (!a.system.empty()) history.push_back({"system", a.system, std::nullopt});
  const size_t base = history.size();
  for (;;) {
    fmt::print("> ");
    std::fflush(stdout);
    std::string line;
    if (!std::getline(std::cin, line)) {  // Ctrl-D, or Ctrl-C at the prompt
      fmt::print("\n");
      return;
    }
    if (line == "/exit" || line == "/quit") return;
    if (line == "/reset") {
      history.resize(base);
      fmt::print(stderr, "[conversation cleared]\n");
      continue;
    }
    if (line.empty()) continue;
    history.push_back({"user", line, std::nullopt});
    const std::string prompt_text = unwrap(tok.render_chat(
        history, {.add_generation_prompt = true, .enable_thinking = a.enable_thinking, .date_string = a.date_string}));
    std::vector<int32_t> prompt = unwrap(tok.encode(prompt_text, {.add_special_tokens = false}));
    // Room left in the context (and the KV cache) for the answer.
    const int64_t room = std::min<int64_t>(engine.max_model_len(), engine.kv_capacity_tokens()) -
                         static_cast<int64_t>(prompt.size());
    if (room < 1) {
      fmt::print(stderr, "[the conversation no longer fits the context ({} tokens): /reset]\n", prompt.size());
      history.pop_back();
      continue;
    }
    const auto max_tokens = static_cast<int32_t>(a.max_tokens > 0 ? std::min<int64_t>(a.max_tokens, room) : room);
    history.push_back({"assistant", answer(engine, tok, a, std::move(prompt), max_tokens), std::nullopt});
  }
}

const CliRegistrar kRegister{{"chat", "Interactive chat with a model folder (streams answers)", [](CLI::App& app) {
  auto args = std::make_shared<ChatArgs>();
  app.add_option("--model", args->model, "Hugging Face model folder with a chat template")->required();
  app.add_option("--system", args->system, "System message");
  app.add_option("--backend", args->backend, "cpu, cuda or auto")->default_val("auto");
  app.add_option("--threads", args->threads, "CPU backend threads (0: all cores)")->default_val(0);
  app.add_option("--temperature", args->temperature, "Sampling temperature (0: greedy)")->default_val(0.7f);
  app.add_option("--top-p", args->top_p, "Nucleus sampling mass")->default_val(0.95f);
  app.add_option("--top-k", args->top_k, "Keep the k most likely tokens (0: off)")->default_val(0);
  app.add_option("--max-tokens", args->max_tokens, "Tokens per answer at most (0: as the context allows)")
      ->default_val(1024);
  app.add_option("--seed", args->seed, "Random seed (-1: a fresh one per answer)")->default_val(-1);
  app.add_option("--enable-thinking", args->enable_thinking, "Qwen3: let the model think first (true|false)")
      ->default_val(true);
  app.add_option("--date-string", args->date_string, "Llama 3.1/3.2: the Today Date (default: today)");
  app.callback([args] { run(*args); });
}}};

}  // namespace
}  // namespace photon::cli
