// Byte-level BPE from a Hugging Face tokenizer.json (Llama 3.x, Qwen2/3,
// GPT-2 family): normalizer -> pre-tokenizer pieces -> ranked merges over
// the bytes of each piece.
//
// Supported tokenizer.json content (anything else is a tokenizer_error that
// names the field): normalizer null / NFC / NFD / NFKC / NFKD / Sequence of
// those; pre_tokenizer Split (Regex or String pattern, any behavior, invert)
// and ByteLevel (add_prefix_space, use_regex), alone or in a Sequence;
// model BPE without dropout, continuing_subword_prefix or end_of_word_suffix,
// with ignore_merges; decoder ByteLevel (or null).
//
// Immutable after load; encode and decode are thread-safe.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/added_tokens.hpp"
#include "model/bpe_word_cache.hpp"
#include "model/regex_splitter.hpp"
#include "model/token_maps.hpp"
#include "model/tokenizer_json.hpp"
#include "model/tokenizer_model.hpp"
#include "model/unicode_text.hpp"

namespace photon {

class BpeModel final : public TokenizerModel {
 public:
  // `tj`: the parsed tokenizer.json; `added`: its added_tokens (their ids
  // may lie outside the model vocabulary). `file` names the file in messages.
  static Result<std::unique_ptr<BpeModel>> from_json(const TokenizerJson& tj,
                                                     const std::vector<AddedToken>& added,
                                                     const std::string& file);

  std::string_view kind() const noexcept override { return "bpe"; }
  int32_t size() const noexcept override { return static_cast<int32_t>(token_bytes_.size()); }
  Result<void> encode(std::string_view text, std::vector<int32_t>& out) const override;
  void append_token_bytes(int32_t id, DecodeState& state, std::string& out) const override;
  std::optional<int32_t> token_to_id(std::string_view token) const override;
  LossyMode lossy_mode() const noexcept override { return LossyMode::maximal_subpart; }

  bool has_id(int32_t id) const noexcept override { return id >= 0 && id < size() && present_[id]; }

  // Ids of one pre-token: the vocabulary entry itself when ignore_merges, a
  // cached result, or BPE over its bytes.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;
  // BPE over the bytes of one pre-token, uncached (exposed for tests).
  // `heap_threshold`: pieces of more bytes use the heap-ordered merge instead
  // of the scan.
  void merge_word(std::string_view word, std::vector<int32_t>& out, size_t heap_threshold = kHeapThreshold) const;
  static constexpr size_t kHeapThreshold = 48;
  static constexpr size_t kScanMax = 256;  // the scan's stack arrays

 private:
  struct PreTokenizerStep {
    std::shared_ptr<const RegexSplitter> regex;  // null for a ByteLevel step without regex
    SplitBehavior behavior = SplitBehavior::isolated;
    bool invert = false;
    bool byte_level = false;
    bool add_prefix_space = false;  // ByteLevel only
  };
  BpeModel() = default;
  Result<void> parse_normalizer(const nlohmann::json& j, const std::string& file);
  Result<void> parse_pre_tokenizer(const nlohmann::json& j, const std::string& file);
  void merge_scan(std::string_view word, std::vector<int32_t>& out) const;
  void merge_heap(std::string_view word, std::vector<int32_t>& out) const;

  std::vector<unicode::NormalForm> normalizers_;
  std::vector<PreTokenizerStep> pre_tokenizer_;
  StringIdMap text_vocab_;   // vocabulary text as written in the file ("Ġthe") -> id
  StringIdMap bytes_vocab_;  // token bytes (" the") -> id, model vocabulary only
  MergeMap merges_;
  int32_t byte_ids_[256] = {};
  std::vector<std::string> token_bytes_;  // id -> bytes it decodes to (added tokens included)
  std::vector<uint8_t> present_;          // id -> 1 when some token has this id
  bool ignore_merges_ = false;
  mutable BpeWordCache cache_;  // thread-safe (see bpe_word_cache.hpp)
};

}  // namespace photon
