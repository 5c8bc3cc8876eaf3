#include "scheduler/request_text.hpp"

#include "core/try.hpp"

namespace photon {

namespace {
Result<void> check_prompt_forms(const Request& request) {
  const int forms = int(!request.prompt_tokens.empty()) + int(!request.prompt.empty()) + int(!request.messages.empty());
  if (forms == 0)
    return fail(Errc::invalid_argument, "request has no prompt: give prompt_tokens, prompt or messages");
  if (forms > 1)
    return fail(Errc::invalid_argument, "request gives more than one of prompt_tokens, prompt and messages");
  return {};
}

Result<std::vector<int32_t>> encode_text_prompt(const Request& request, const Tokenizer* tokenizer) {
  if (tokenizer == nullptr)
    return fail(Errc::invalid_state, std::string("request.") + (request.prompt.empty() ? "messages" : "prompt") +
                                         " needs a tokenizer, and the engine has none (the model folder has no "
                                         "tokenizer.json or tokenizer.model, or load_tokenizer was off)");
  if (!request.prompt.empty()) return tokenizer->encode(request.prompt);
  PHOTON_ASSIGN_OR_RETURN(std::string text, tokenizer->render_chat(request.messages, request.chat));
  EncodeOptions enc;
  enc.add_special_tokens = false;  // the template wrote them
  return tokenizer->encode(text, enc);
}
}  // namespace

Result<std::vector<int32_t>> request_prompt_ids(const Request& request, const Tokenizer* tokenizer) {
  PHOTON_TRY(check_prompt_forms(request));
  if (!request.prompt_tokens.empty()) return request.prompt_tokens;
  return encode_text_prompt(request, tokenizer);
}

Result<std::vector<int32_t>> take_prompt_ids(Request& request, const Tokenizer* tokenizer) {
  PHOTON_TRY(check_prompt_forms(request));
  if (!request.prompt_tokens.empty()) return std::move(request.prompt_tokens);
  return encode_text_prompt(request, tokenizer);
}

Result<TextStream> TextStream::create(const Tokenizer& tokenizer, const Request& request,
                                      std::span<const int32_t> prompt) {
  auto stops = StopStringMatcher::create(request.stop);
  if (!stops) return fail(stops.error().code, "request." + stops.error().message);
  DecodeOptions dec;
  dec.skip_special_tokens = request.skip_special_tokens;
  DetokenizerStream detok(tokenizer, dec);
  detok.continue_after(prompt);  // the generated text continues the prompt's
  return TextStream(std::move(detok), std::move(*stops));
}

bool TextStream::feed(int32_t token, std::string& out) {
  // An id the model has but the tokenizer lacks (padded vocabularies) adds no text.
  auto piece = detok_.feed(token);
  if (!piece) return false;
  const StopStringMatcher::Output o = stops_.feed(*piece);
  out.append(o.text);
  return o.stopped;
}

void TextStream::finish(std::string& out) {
  if (stops_.stopped()) return;
  const StopStringMatcher::Output o = stops_.feed(detok_.finish());
  out.append(o.text);
  if (!o.stopped) out.append(stops_.finish());
}

}  // namespace photon
