// The OpenAI response bodies of one generation: the whole answer
// (non-streamed) or its server-sent-event chunks, built from the request's
// engine events.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "generation_request.hpp"
#include "photon/engine.hpp"
#include "photon/tokenizer.hpp"

namespace photon::server {

// What the bodies say besides the generated tokens.
struct ResponseContext {
  ApiKind kind = ApiKind::completion;
  std::string id{};                    // "cmpl-..." or "chatcmpl-..."
  int64_t created = 0;                 // Unix seconds
  std::string model{};                 // the served model name
  bool logprobs = false;
  bool return_token_ids = false;
  std::vector<int32_t> prompt_tokens{};
  const Tokenizer* tokenizer = nullptr;  // token texts in logprobs; may be null ("token_id:N")
  std::vector<std::string> stop{};         // the request's stop strings and stop token ids,
  std::vector<int32_t> stop_token_ids{};   //   for stop_reason
};

// Accumulates one request's events; thread-compatible.
class ResponseBuilder {
 public:
  explicit ResponseBuilder(ResponseContext ctx);

  // Folds in the request's next event.
  void add(const Event& e);
  bool finished() const noexcept { return finish_ != FinishReason::none; }
  FinishReason finish() const noexcept { return finish_; }
  const std::string& error() const noexcept { return error_; }
  int32_t completion_tokens() const noexcept { return int32_t(tokens_.size()); }

  // Streaming: the chunk for what was added since the last call; nullopt when
  // that holds nothing to send (no text, no logprobs, no finish).
  std::optional<nlohmann::json> take_chunk();
  // Streaming chat: the first chunk, {"delta": {"role": "assistant"}}.
  nlohmann::json role_chunk() const;
  // Streaming with include_usage: the last chunk, no choices, the usage.
  nlohmann::json usage_chunk() const;
  // Non-streamed: the whole response.
  nlohmann::json body() const;

 private:
  nlohmann::json chunk_base() const;
  nlohmann::json usage() const;
  nlohmann::json logprobs_json(size_t from, size_t to) const;
  std::string token_text(int32_t id) const;

  ResponseContext ctx_;
  std::string text_;
  std::vector<int32_t> tokens_;
  std::vector<float> token_logprobs_;
  std::vector<std::vector<TokenLogprob>> top_;   // [tokens_.size()]
  std::vector<size_t> text_offset_;              // [tokens_.size()]: bytes of text_ before the token's event
  FinishReason finish_ = FinishReason::none;
  nlohmann::json stop_reason_;  // vLLM's: the stop string or stop token id that ended the request, else null
  std::string error_;
  size_t sent_text_ = 0, sent_tokens_ = 0;       // streaming: what take_chunk() already returned
  bool sent_finish_ = false;
};

// JSON text with invalid UTF-8 replaced (U+FFFD), never throwing.
std::string dump_json(const nlohmann::json& j);

}  // namespace photon::server
