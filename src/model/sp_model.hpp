// SentencePiece tokenizer.model (Llama-2 style) through libsentencepiece.
// Encoding is the library's; decoding re-implements its DecodeIds piece by
// piece (so it can stream): control pieces (<s>, </s>) are invisible, <unk>
// is the model's trainer_spec.unk_surface (default " \u2047 "), byte pieces
// <0xXX> are raw bytes (invalid UTF-8 becomes one U+FFFD per byte), "▁" is a
// space, and the leading "▁" of the text is dropped when the model adds a
// dummy prefix or removes extra whitespace.
//
// Immutable after load; thread-safe (SentencePieceProcessor's const methods are).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/added_tokens.hpp"
#include "model/tokenizer_model.hpp"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace photon {

class SentencePieceModel final : public TokenizerModel {
 public:
  static Result<std::unique_ptr<SentencePieceModel>> load(const std::string& path);
  ~SentencePieceModel() override;

  std::string_view kind() const noexcept override { return "sentencepiece"; }
  int32_t size() const noexcept override { return static_cast<int32_t>(pieces_.size()); }
  Result<void> encode(std::string_view text, std::vector<int32_t>& out) const override;
  void append_token_bytes(int32_t id, DecodeState& state, std::string& out) const override;
  std::optional<int32_t> token_to_id(std::string_view token) const override;
  LossyMode lossy_mode() const noexcept override { return LossyMode::per_byte; }

  // Control and unknown pieces (<s>, </s>, <unk>) as special tokens, for the
  // added-token matcher.
  std::vector<AddedToken> special_tokens() const;
  int32_t bos_id() const noexcept { return bos_id_; }
  int32_t eos_id() const noexcept { return eos_id_; }
  int32_t pad_id() const noexcept { return pad_id_; }
  // The library itself (tests compare against its DecodeIds).
  const sentencepiece::SentencePieceProcessor& processor() const noexcept { return *sp_; }

 private:
  enum class Kind : uint8_t { normal, control, unknown, byte };
  struct Piece {
    std::string text;  // "▁" already replaced by " "; for bytes: the one byte
    Kind kind = Kind::normal;
    bool leading_space = false;  // the piece began with "▁"
  };
  SentencePieceModel() = default;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::vector<Piece> pieces_;
  bool strip_leading_space_ = true;  // add_dummy_prefix || remove_extra_whitespaces
  bool remove_extra_whitespaces_ = false;
  std::string unk_surface_;  // what <unk> decodes to (the model's trainer_spec.unk_surface)
  int32_t bos_id_ = -1, eos_id_ = -1, pad_id_ = -1;
};

}  // namespace photon
