#include "api/text_session.hpp"

#include <algorithm>
#include <filesystem>
#include <utility>

#include "core/try.hpp"

namespace photon {

// Text state of one request: its detokenizer (primed with the prompt) and
// its stop-string matcher. `stopped`: a stop string ended it here while the
// engine may still send events, which are dropped until the engine's last.
struct TextSession::RequestText {
  std::optional<DetokenizerStream> detok;
  std::optional<StopStringMatcher> stops;
  bool emit_text = true;  // TextOptions::detokenize (detok may exist for the stop strings alone)
  bool stopped = false;
};

TextSession::TextSession(Engine engine, std::optional<Tokenizer> tokenizer)
    : engine_(std::move(engine)), tokenizer_(std::move(tokenizer)) {}

TextSession::~TextSession() = default;

Result<std::unique_ptr<TextSession>> TextSession::open(const EngineOptions& options, bool load_tokenizer) {
  std::optional<Tokenizer> tokenizer;
  if (load_tokenizer) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path dir(options.model_dir);
    if (fs::exists(dir / "tokenizer.json", ec) || fs::exists(dir / "tokenizer.model", ec)) {
      PHOTON_ASSIGN_OR_RETURN(Tokenizer t, Tokenizer::load(options.model_dir));
      tokenizer.emplace(std::move(t));
    }
  }
  PHOTON_ASSIGN_OR_RETURN(Engine engine, Engine::open(options));
  return std::unique_ptr<TextSession>(new TextSession(std::move(engine), std::move(tokenizer)));
}

Result<RequestId> TextSession::submit(Request request, TextOptions text) {
  return submit_prepared(std::move(request), std::move(text));
}

Result<RequestId> TextSession::submit_text(std::string_view prompt, const EncodeOptions& encode, Request request,
                                           TextOptions text) {
  if (!tokenizer_) return fail(Errc::invalid_state, "a text prompt needs a tokenizer and the engine has none");
  request.prompt_tokens.clear();
  PHOTON_TRY(tokenizer_->encode_into(prompt, request.prompt_tokens, encode));
  return submit_prepared(std::move(request), std::move(text));
}

Result<RequestId> TextSession::submit_chat(std::span<const ChatMessage> messages, const ChatOptions& chat,
                                           Request request, TextOptions text) {
  if (!tokenizer_) return fail(Errc::invalid_state, "a chat prompt needs a tokenizer and the engine has none");
  PHOTON_ASSIGN_OR_RETURN(std::string rendered, tokenizer_->render_chat(messages, chat));
  EncodeOptions encode;
  encode.add_special_tokens = false;  // the template wrote them
  request.prompt_tokens.clear();
  PHOTON_TRY(tokenizer_->encode_into(rendered, request.prompt_tokens, encode));
  return submit_prepared(std::move(request), std::move(text));
}

Result<RequestId> TextSession::submit_prepared(Request request, TextOptions text) {
  auto state = std::make_unique<RequestText>();
  state->emit_text = text.detokenize;
  if (!text.stop_strings.empty()) {
    if (!tokenizer_) return fail(Errc::invalid_state, "stop strings need a tokenizer and the engine has none");
    PHOTON_ASSIGN_OR_RETURN(StopStringMatcher m, StopStringMatcher::create(std::move(text.stop_strings)));
    state->stops.emplace(std::move(m));
  }
  if (tokenizer_ && (text.detokenize || state->stops)) {
    DecodeOptions decode;
    decode.skip_special_tokens = text.skip_special_tokens;
    state->detok.emplace(*tokenizer_, decode);
    // Prime with the prompt so the first generated piece is decoded in
    // context; the prompt's own text is not emitted.
    for (int32_t id : request.prompt_tokens) {
      if (!state->detok->feed(id)) break;  // an id the tokenizer lacks: the engine rejects it below
    }
  }
  if (tokenizer_ && !request.ignore_eos) {
    // generation_config.json may list end ids that config.json lacks.
    for (int32_t id : tokenizer_->eos_token_ids()) request.stop_token_ids.push_back(id);
  }
  std::lock_guard lock(mutex_);
  // Under the lock: no poll can translate this request's events before its
  // state is registered.
  PHOTON_ASSIGN_OR_RETURN(RequestId id, engine_.submit(std::move(request)));
  texts_.emplace(id, std::move(state));
  return id;
}

Result<void> TextSession::cancel(RequestId id) { return engine_.cancel(id); }

void TextSession::translate(Event e) {
  auto it = texts_.find(e.request);
  RequestText* st = it == texts_.end() ? nullptr : it->second.get();
  const bool last = e.finish != FinishReason::none;
  if (st != nullptr && st->stopped) {  // ended by a stop string already
    if (last) texts_.erase(it);
    return;
  }
  TextEvent out;
  out.request = e.request;
  out.token = e.token;
  out.logprob = e.logprob;
  out.top_logprobs = std::move(e.top_logprobs);
  out.finish = e.finish;
  out.error = std::move(e.error);
  if (st != nullptr && st->detok) {
    std::string piece;
    if (e.token >= 0) {
      // An id of the model's (padded) vocabulary that the tokenizer lacks has no text.
      if (auto r = st->detok->feed(e.token)) piece.assign(*r);
    }
    if (last) piece.append(st->detok->finish());
    if (st->stops) {
      StopStringMatcher::Output o = st->stops->feed(piece);
      out.text.assign(o.text);
      if (o.stopped) {
        out.finish = FinishReason::stop;
        out.stop_string_index = st->stops->stopped_index();
        if (!last) {
          st->stopped = true;
          (void)engine_.cancel(e.request);  // it may have finished meanwhile: nothing to undo
        }
      } else if (last) {
        out.text.append(st->stops->finish());
      }
    } else {
      out.text = std::move(piece);
    }
    if (!st->emit_text) out.text.clear();
  }
  if (last && st != nullptr && !st->stopped) texts_.erase(it);
  pending_.push_back(std::move(out));
}

size_t TextSession::poll(const std::function<bool(TextEvent&)>& sink) {
  std::lock_guard lock(mutex_);
  scratch_.clear();
  engine_.poll(scratch_);
  for (Event& e : scratch_) translate(std::move(e));
  scratch_.clear();
  size_t n = 0;
  while (!pending_.empty() && sink(pending_.front())) {
    pending_.pop_front();
    ++n;
  }
  return n;
}

bool TextSession::has_work() const {
  {
    std::lock_guard lock(mutex_);
    if (!pending_.empty()) return true;
  }
  return engine_.has_work();
}

}  // namespace photon
