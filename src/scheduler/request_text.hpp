// The text side of a request: prompt text / chat messages -> token ids (on
// the submitting thread), and generated ids -> streamed text with stop
// strings (on the stepping thread).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "photon/engine.hpp"
#include "photon/result.hpp"
#include "photon/tokenizer.hpp"

namespace photon {

// The prompt ids of `request`: prompt_tokens as given, or its text / chat
// messages encoded with `tokenizer` (nullptr: none). Errors: invalid_argument
// (not exactly one prompt form), invalid_state (text without a tokenizer),
// the tokenizer's errors.
Result<std::vector<int32_t>> request_prompt_ids(const Request& request, const Tokenizer* tokenizer);
// The same, moving prompt_tokens out of `request` instead of copying them.
Result<std::vector<int32_t>> take_prompt_ids(Request& request, const Tokenizer* tokenizer);

// Streams one request's generated text: detokenizes id by id and holds back
// text that may begin a stop string. Borrows the tokenizer.
// Thread-compatibility: one thread (the stepping thread).
class TextStream {
 public:
  // The text continues `prompt`'s (DetokenizerStream::continue_after).
  // Errors: invalid_argument (an empty stop string).
  static Result<TextStream> create(const Tokenizer& tokenizer, const Request& request,
                                   std::span<const int32_t> prompt);

  // Appends the text `token` completes to `out`; true when a stop string was
  // found (`out` then ends right before it and the stream is done).
  bool feed(int32_t token, std::string& out);
  // Appends the held-back text at the end of generation (without a stop string).
  void finish(std::string& out);
  // The index in Request::stop of the stop string that cut the text; -1 when none did.
  int32_t stop_index() const noexcept { return stops_.stopped_index(); }

 private:
  TextStream(DetokenizerStream detok, StopStringMatcher stops) noexcept
      : detok_(std::move(detok)), stops_(std::move(stops)) {}
  DetokenizerStream detok_;
  StopStringMatcher stops_;
};

}  // namespace photon
