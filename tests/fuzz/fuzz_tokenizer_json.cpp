// Fuzz target: tokenizer.json text loaded by Tokenizer::load (the SAX reader,
// the BPE model, added tokens, normalizer / pre-tokenizer / post-processor),
// then, when it loads, every operation a loaded tokenizer offers: encoding
// fixed texts, decoding (all at once and streamed), token_to_piece.
// Properties: encoded ids are tokens of the vocabulary; streamed decoding
// equals decode().
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_util.hpp"
#include "photon/tokenizer.hpp"

namespace {

const photon::fuzz::ScratchDir& scratch() {
  static const photon::fuzz::ScratchDir dir;
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace photon;
  const auto& dir = scratch();
  dir.write("tokenizer.json", fuzz::as_text(data, size));
  auto tok = Tokenizer::load(dir.str());
  if (!tok) {
    FUZZ_CHECK(!tok.error().message.empty());
    return 0;
  }
  const int32_t vocab = tok->vocab_size();
  FUZZ_CHECK(vocab >= 0);
  for (const char* text : {"", "Hello, world!", "  spaces\tand\nnewlines  ", "caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80",
                           "<|begin_of_text|>special<|eot_id|>", "\xff\xfe invalid utf-8 \xc0", "1234567890 -= 3.14"}) {
    for (bool special : {true, false}) {
      auto ids = tok->encode(text, EncodeOptions{.add_special_tokens = special});
      if (!ids) continue;
      for (int32_t id : *ids) FUZZ_CHECK(id >= 0 && id < vocab && tok->token_to_piece(id).has_value());
      auto whole = tok->decode(*ids);
      FUZZ_CHECK(whole.has_value());
      DetokenizerStream stream(*tok);
      std::string streamed;
      for (int32_t id : *ids) {
        auto piece = stream.feed(id);
        FUZZ_CHECK(piece.has_value());
        streamed += *piece;
      }
      streamed += stream.finish();
      FUZZ_CHECK(streamed == *whole);
    }
  }
  // Ids without a token (gaps in the vocabulary) are out_of_range, never a crash.
  for (int32_t id = 0; id < vocab && id < 4096; ++id) (void)tok->token_to_piece(id);
  FUZZ_CHECK(!tok->token_to_piece(vocab).has_value());
  return 0;
}
