// DetokenizerStream: token bytes accumulate in `pending`; each feed converts
// the longest prefix that can no longer change (everything but an incomplete
// character at the very end) with the same replacement rule decode() uses,
// so the concatenated output equals decode() of all ids.
#include <fmt/core.h>

#include "model/tokenizer_impl.hpp"
#include "model/utf8.hpp"
#include "photon/tokenizer.hpp"

namespace photon {

struct DetokenizerStream::State {
  const Tokenizer::Impl* tok = nullptr;
  bool skip_special = false;
  bool per_byte = false;
  DecodeState decode;
  std::string pending;  // bytes of an incomplete trailing character (0..3 bytes)
  std::string out;      // the text returned by the last call
};

DetokenizerStream::DetokenizerStream(const Tokenizer& tokenizer, const DecodeOptions& options)
    : state_(std::make_unique<State>()) {
  state_->tok = tokenizer.impl_.get();
  state_->skip_special = options.skip_special_tokens;
  state_->per_byte = state_->tok->model->lossy_mode() == LossyMode::per_byte;
}
DetokenizerStream::DetokenizerStream(DetokenizerStream&&) noexcept = default;
DetokenizerStream& DetokenizerStream::operator=(DetokenizerStream&&) noexcept = default;
DetokenizerStream::~DetokenizerStream() = default;

Result<std::string_view> DetokenizerStream::feed(int32_t id) {
  State& s = *state_;
  if (!s.tok->valid_id(id))
    return fail(Errc::out_of_range, fmt::format("detokenize: token id {} is not in the vocabulary", id));
  s.out.clear();
  s.tok->append_bytes(id, s.skip_special, s.decode, s.pending);
  const size_t used = utf8::append_lossy(s.pending, s.out, false, s.per_byte);
  s.pending.erase(0, used);
  return std::string_view(s.out);
}

std::string_view DetokenizerStream::finish() {
  State& s = *state_;
  s.out.clear();
  utf8::append_lossy(s.pending, s.out, true, s.per_byte);
  s.pending.clear();
  s.decode = DecodeState{};
  return s.out;
}

void DetokenizerStream::reset() {
  state_->pending.clear();
  state_->out.clear();
  state_->decode = DecodeState{};
}

size_t DetokenizerStream::pending_bytes() const noexcept { return state_->pending.size(); }

}  // namespace photon
