// The body of POST /v1/completions or /v1/chat/completions, parsed and
// checked, as a photon::Request plus the response options.
//
// Fields follow OpenAI's API, with vLLM's extensions top_k, min_p,
// repetition_penalty, ignore_eos, stop_token_ids, skip_special_tokens,
// return_token_ids, add_generation_prompt and chat_template_kwargs;
// docs/server.md lists them. Parsing never throws and never trusts a type.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "api_error.hpp"
#include "photon/engine.hpp"
#include "photon/tokenizer.hpp"

namespace photon::server {

enum class ApiKind {
  completion,  // /v1/completions: "prompt", answer in choices[].text
  chat,        // /v1/chat/completions: "messages", answer in choices[].message
};

struct GenerationRequest {
  ApiKind kind = ApiKind::completion;
  // Sampling, limits, stop conditions; the prompt is in prompt_tokens once
  // encode_prompt() ran (chat: `messages` until then).
  Request engine{};
  std::string prompt_text{};       // completions: a text prompt, encoded by encode_prompt()
  bool prompt_is_text = false;
  std::string model{};             // the "model" field; empty when absent
  bool stream = false;
  bool include_usage = false;      // stream_options.include_usage: a last chunk with usage
  bool logprobs = false;           // report the chosen tokens' logprobs (top ones: engine.logprobs)
  bool return_token_ids = false;   // token ids in the choices (vLLM extension)
};

// Parses a request body. The error is a 400 naming the field (or the body,
// when it is not a JSON object).
std::optional<ApiError> parse_generation_request(ApiKind kind, std::string_view body, GenerationRequest& out);

// Encodes the prompt into out.engine.prompt_tokens: a text prompt with the
// tokenizer's special tokens (BOS) added, as Engine::submit encodes
// Request::prompt; chat messages rendered by the model's chat template, then
// encoded without adding special tokens (the template wrote them). Token-id
// prompts are left as they are. Errors: 400 without a tokenizer, for a model
// without a (known) chat template, or for messages the template rejects.
std::optional<ApiError> encode_prompt(GenerationRequest& out, const Tokenizer* tokenizer);

}  // namespace photon::server
