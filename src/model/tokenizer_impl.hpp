// Tokenizer::Impl: what a loaded tokenizer holds. Internal (src/ only): the
// detokenizer stream and the tests reach the model through it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/added_tokens.hpp"
#include "model/tokenizer_model.hpp"
#include "photon/tokenizer.hpp"

namespace photon {

struct Tokenizer::Impl {
  std::string dir;
  std::unique_ptr<TokenizerModel> model;
  AddedTokenMatcher added;        // tokens matched in raw text before the model runs
  std::vector<uint8_t> special;   // id -> 1 for special tokens
  std::vector<int32_t> prefix_ids, suffix_ids;  // added around a sequence when add_special_tokens
  int32_t bos_id = -1, eos_id = -1, pad_id = -1;
  std::vector<int32_t> eos_ids;   // sorted, unique
  std::string chat_template;
  std::string bos_token;          // tokenizer_config.json's bos_token text (chat templates)
  ChatTemplateKind template_kind = ChatTemplateKind::none;

  // Appends the decoded bytes of one id (valid id) to `bytes`.
  void append_bytes(int32_t id, bool skip_special, DecodeState& state, std::string& bytes) const {
    if (skip_special && special[id]) return;
    model->append_token_bytes(id, state, bytes);
  }
  bool valid_id(int32_t id) const noexcept { return model->has_id(id); }
};

// The internals of a loaded tokenizer (for src/ and the tests).
const Tokenizer::Impl& tokenizer_impl(const Tokenizer& t) noexcept;

}  // namespace photon
