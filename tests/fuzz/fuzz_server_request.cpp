// Fuzz target: the body of a photon-server generation request
// (examples/server/generation_request.hpp). The first byte picks the endpoint
// (even: /v1/completions, odd: /v1/chat/completions), the rest is the body.
// An accepted request then has its prompt encoded with a small Llama-3-style
// tokenizer (chat: rendered by its template first).
// Properties: a rejected body is a 400 with a message; an accepted one has a
// prompt (text, token ids or messages) and sampling values inside the ranges
// the server documents.
#include <cmath>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include "fuzz_util.hpp"
#include "generation_request.hpp"

namespace {

std::string read_text(const char* path) {
  std::ifstream f(path, std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  FUZZ_CHECK(!s.empty());
  return s;
}

// The small tokenizer of the corpus with the Llama 3 chat template, loaded once.
const photon::Tokenizer& tokenizer() {
  static const photon::fuzz::ScratchDir dir;
  static const std::unique_ptr<photon::Tokenizer> tok = [] {
    dir.write("tokenizer.json", read_text(PHOTON_FUZZ_BASE_TOKENIZER));
    dir.write("tokenizer_config.json", read_text(PHOTON_FUZZ_BASE_TOKENIZER_CONFIG));
    auto t = photon::Tokenizer::load(dir.str());
    FUZZ_CHECK(t.has_value());
    return std::make_unique<photon::Tokenizer>(std::move(*t));
  }();
  return *tok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace photon::server;
  if (size == 0) return 0;
  const ApiKind kind = data[0] % 2 == 0 ? ApiKind::completion : ApiKind::chat;
  GenerationRequest req;
  const auto error = parse_generation_request(kind, photon::fuzz::as_text(data + 1, size - 1), req);
  if (error) {
    FUZZ_CHECK(error->status == 400 && !error->message.empty());
    return 0;
  }
  const photon::Request& r = req.engine;
  if (kind == ApiKind::completion) FUZZ_CHECK(req.prompt_is_text || !r.prompt_tokens.empty());
  else FUZZ_CHECK(!r.messages.empty());
  const photon::SamplingOptions& s = r.sampling;
  FUZZ_CHECK(std::isfinite(s.temperature) && s.temperature >= 0);
  FUZZ_CHECK(s.top_p > 0 && s.top_p <= 1 && s.top_k >= 0);
  FUZZ_CHECK(s.min_p >= 0 && s.min_p <= 1);
  FUZZ_CHECK(std::isfinite(s.repetition_penalty) && s.repetition_penalty > 0);
  FUZZ_CHECK(std::abs(s.presence_penalty) <= 2 && std::abs(s.frequency_penalty) <= 2);
  FUZZ_CHECK(r.logprobs >= 0 && r.logprobs <= 20 && r.max_tokens >= 0);
  const auto encoded = encode_prompt(req, &tokenizer());
  if (encoded) {
    FUZZ_CHECK(!encoded->message.empty());
    return 0;
  }
  for (int32_t id : r.prompt_tokens) FUZZ_CHECK(id >= 0);
  return 0;
}
