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
  // continue_after(): what decode(context) shows for the context's incomplete
  // trailing bytes (U+FFFD), while those bytes still wait in `pending`. If the
  // next bytes make them invalid for good, the same replacement leads the
  // resolved text, and is dropped (the context's text already has it).
  std::string context_tail;

  // Once `used` > 0 bytes of pending were converted into `out`, the context's
  // trailing bytes are resolved: drop their replacement if it leads `out`.
  void settle_context_tail(size_t used) {
    if (context_tail.empty() || used == 0) return;
    if (out.compare(0, context_tail.size(), context_tail) == 0) out.erase(0, context_tail.size());
    context_tail.clear();
  }
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

void DetokenizerStream::continue_after(std::span<const int32_t> context) {
  State& s = *state_;
  reset();
  std::string bytes;
  for (const int32_t id : context)
    if (s.tok->valid_id(id)) s.tok->append_bytes(id, s.skip_special, s.decode, bytes);
  // Keep only an incomplete trailing character: the next feeds complete it.
  std::string complete;
  const size_t used = utf8::append_lossy(bytes, complete, false, s.per_byte);
  s.pending.assign(bytes, used, std::string::npos);
  if (!s.pending.empty()) utf8::append_lossy(s.pending, s.context_tail, true, s.per_byte);
}


Result<std::string_view> DetokenizerStream::feed(int32_t id) {
  State& s = *state_;
  if (!s.tok->valid_id(id))
    return fail(Errc::out_of_range, fmt::format("detokenize: token id {} is not in the vocabulary", id));
  s.out.clear();
  s.tok->append_bytes(id, s.skip_special, s.decode, s.pending);
  const size_t used = utf8::append_lossy(s.pending, s.out, false, s.per_byte);
  s.pending.erase(0, used);
  s.settle_context_tail(used);
  return std::string_view(s.out);
}

std::string_view DetokenizerStream::finish() {
  State& s = *state_;
  s.out.clear();
  utf8::append_lossy(s.pending, s.out, true, s.per_byte);
  s.settle_context_tail(s.pending.size());
  s.pending.clear();
  s.decode = DecodeState{};
  return s.out;
}

void DetokenizerStream::reset() {
  state_->context_tail.clear();
  state_->pending.clear();
  state_->out.clear();
  state_->decode = DecodeState{};
}

size_t DetokenizerStream::pending_bytes() const noexcept { return state_->pending.size(); }

}  // namespace photon
