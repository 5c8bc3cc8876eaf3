// TextSession: an Engine together with its model folder's Tokenizer, serving
// requests whose prompt is token ids, text or a chat conversation, and whose
// events carry the generated text: each token's piece from an incremental
// detokenizer primed with the prompt (so a first word keeps its leading
// space), with stop strings matched on that text and held back until they
// are known not to match.
//
// This is what the C ABI's engine (capi/engine.cpp) is built on; it is
// internal for now and could become public C++ API as it is.
//
// A stop string is found when its request's events are polled, not in the
// step: the request is then cancelled in the engine, and whatever the engine
// generated for it after the stop (when the host steps ahead of polling) is
// dropped. Its last event has FinishReason::stop and stop_string_index set.
//
// Thread-safety: submit*, cancel, poll and metrics may be called from any
// thread at once; step as Engine::step. Not movable (owns a mutex).
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "photon/engine.hpp"
#include "photon/result.hpp"
#include "photon/tokenizer.hpp"

namespace photon {

struct TextOptions {
  bool detokenize = true;            // text pieces in events (when there is a tokenizer)
  bool skip_special_tokens = true;   // special tokens (EOS...) leave no text
  std::vector<std::string> stop_strings;  // non-empty strings; need a tokenizer
};

struct TextEvent {
  RequestId request = 0;
  int32_t token = -1;                      // -1: no token (cancelled, error)
  float logprob = 0.0f;
  std::vector<TokenLogprob> top_logprobs;
  FinishReason finish = FinishReason::none;
  int32_t stop_string_index = -1;          // finish by a stop string: its index
  std::string text;                        // the text this event adds (UTF-8, complete characters)
  std::string error;                       // finish == error: the failure
};

class TextSession {
 public:
  // Opens the engine; when load_tokenizer, also the tokenizer of
  // options.model_dir if the folder has tokenizer.json or tokenizer.model
  // (a folder without them opens without a tokenizer; a malformed one fails).
  static Result<std::unique_ptr<TextSession>> open(const EngineOptions& options, bool load_tokenizer);

  TextSession(const TextSession&) = delete;
  TextSession& operator=(const TextSession&) = delete;
  ~TextSession();

  Engine& engine() noexcept { return engine_; }
  const Engine& engine() const noexcept { return engine_; }
  // nullptr when the engine has no tokenizer.
  const Tokenizer* tokenizer() const noexcept { return tokenizer_ ? &*tokenizer_ : nullptr; }

  // Submits a request of token ids (request.prompt_tokens).
  Result<RequestId> submit(Request request, TextOptions text);
  // Encodes `prompt` into request.prompt_tokens, then submits.
  Result<RequestId> submit_text(std::string_view prompt, const EncodeOptions& encode, Request request,
                                TextOptions text);
  // Renders the conversation (generation prompt per `chat`), encodes it
  // without added special tokens, then submits.
  Result<RequestId> submit_chat(std::span<const ChatMessage> messages, const ChatOptions& chat, Request request,
                                TextOptions text);
  Result<void> cancel(RequestId id);

  // Hands pending events to `sink`, oldest first, until it refuses one
  // (returns false: that event stays first in line) or none are left.
  // Returns how many it took. `sink` runs under the session's lock, so
  // concurrent polls never split or reorder a request's events.
  size_t poll(const std::function<bool(TextEvent&)>& sink);
  // Whether some request is unfinished or some event undelivered.
  bool has_work() const;

 private:
  struct RequestText;
  TextSession(Engine engine, std::optional<Tokenizer> tokenizer);
  Result<RequestId> submit_prepared(Request request, TextOptions text);
  // Turns one engine event into at most one TextEvent appended to pending_.
  void translate(Event event);

  Engine engine_;
  std::optional<Tokenizer> tokenizer_;
  mutable std::mutex mutex_;  // guards texts_ and pending_
  std::unordered_map<RequestId, std::unique_ptr<RequestText>> texts_;
  std::deque<TextEvent> pending_;
  std::vector<Event> scratch_;  // engine events of one poll (under mutex_)
};

}  // namespace photon
