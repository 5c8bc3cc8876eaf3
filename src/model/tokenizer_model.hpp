// The model-specific half of a Tokenizer: how ordinary text (no added tokens
// in it) becomes ids, and what bytes each id decodes to. Implemented by
// BpeModel (tokenizer.json) and SentencePieceModel (tokenizer.model).
// Implementations are immutable after load: const members are thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "photon/result.hpp"

namespace photon {

// How invalid UTF-8 in decoded bytes is replaced by U+FFFD.
enum class LossyMode {
  maximal_subpart,  // one U+FFFD per maximal invalid subsequence (tokenizers, Rust)
  per_byte,         // one U+FFFD per invalid byte (SentencePiece)
};

// Decoding state carried from token to token (SentencePiece strips the
// leading space of the text's first piece only).
struct DecodeState {
  bool at_start = true;     // SentencePiece's is_bos_ws
  bool bos_ws_seen = false;  // the previous piece had its leading space consumed
  bool any_text = false;     // some bytes were produced
};

class TokenizerModel {
 public:
  virtual ~TokenizerModel() = default;
  virtual std::string_view kind() const noexcept = 0;
  // Ids are [0, size()); has_id() is false for gaps in the id range.
  virtual int32_t size() const noexcept = 0;
  virtual bool has_id(int32_t id) const noexcept { return id >= 0 && id < size(); }
  // Appends the ids of `text` (valid UTF-8, already split around added tokens).
  virtual Result<void> encode(std::string_view text, std::vector<int32_t>& out) const = 0;
  // Appends the bytes of token `id` (0 <= id < size()) and advances `state`.
  virtual void append_token_bytes(int32_t id, DecodeState& state, std::string& out) const = 0;
  // The id whose vocabulary text is `token`, if any.
  virtual std::optional<int32_t> token_to_id(std::string_view token) const = 0;
  virtual LossyMode lossy_mode() const noexcept = 0;
};

}  // namespace photon
