// photon chat --model DIR: an interactive chat on the engine.
//
// Each user line is added to the conversation; the engine renders the whole
// conversation with the model's chat template (Request::messages), its
// prefix cache reuses the earlier turns' KV blocks, and the answer's text
// streams to stdout as it is sampled (Event::text). Ctrl-C stops the current answer (what was
// written so far stays in the history); Ctrl-C or Ctrl-D at the prompt ends
// the chat. /reset forgets the conversation, /exit leaves.
#include <fmt/core.h>

#include <atomic>
#include <csignal>
#include <iostream>
#include <memory>
#include <optional>
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

// Streams the answer to the conversation so far; returns its text. nullopt
// when the conversation no longer fits the context.
std::optional<std::string> answer(Engine& engine, const ChatArgs& a, const std::vector<ChatMessage>& history) {
  Request req;
  req.messages = history;
  req.sampling.temperature = a.temperature;
  req.sampling.top_p = a.top_p;
  req.sampling.top_k = a.top_k;
  if (a.seed >= 0) req.sampling.seed = static_cast<uint64_t>(a.seed);
  req.max_tokens = a.max_tokens;
  req.chat = {.add_generation_prompt = true, .enable_thinking = a.enable_thinking, .date_string = a.date_string};
  auto submitted = engine.submit(req);
  if (!submitted && submitted.error().code == Errc::capacity_exceeded && a.max_tokens > 0) {
    req.max_tokens = 0;  // a shorter answer: whatever room the context has left
    submitted = engine.submit(req);
  }
  if (!submitted && submitted.error().code == Errc::capacity_exceeded) return std::nullopt;
  const RequestId id = unwrap(std::move(submitted));

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
      text += e.text;
      fmt::print("{}", e.text);
      std::fflush(stdout);
      if (e.finish != FinishReason::none) {
        done = true;
        if (e.finish == FinishReason::error) fmt::print(stderr, "\n[error: {}]", e.error);
        if (e.finish == FinishReason::length) fmt::print(stderr, "\n[max tokens reached]");
        if (e.finish == FinishReason::cancelled) fmt::print(stderr, "\n[stopped]");
      }
    }
    if (!step && !done) cli::fail(step.error());
  }
  fmt::print("\n");
  g_interrupted.store(false);
  return text;
}

void run(const ChatArgs& a) {
  {
    // Fail before loading the weights when the folder has no usable template.
    const Tokenizer tok = unwrap(Tokenizer::load(a.model));
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
    std::optional<std::string> reply = answer(engine, a, history);
    if (!reply) {
      fmt::print(stderr, "[the conversation no longer fits the context: /reset]\n");
      history.pop_back();
      continue;
    }
    history.push_back({"assistant", std::move(*reply), std::nullopt});
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
      ->default_val(1024)->check(CLI::Range(0, 1 << 30));
  app.add_option("--seed", args->seed, "Random seed (-1: a fresh one per answer)")->default_val(-1);
  app.add_option("--enable-thinking", args->enable_thinking, "Qwen3: let the model think first (true|false)")
      ->default_val(true);
  app.add_option("--date-string", args->date_string, "Llama 3.1/3.2: the Today Date (default: today)");
  app.callback([args] { run(*args); });
}}};

}  // namespace
}  // namespace photon::cli
