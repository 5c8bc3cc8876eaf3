// The settings a Hugging Face folder keeps beside its tokenizer:
// tokenizer_config.json (special token names, add_bos/eos, chat template,
// or chat_template.jinja), generation_config.json (eos ids), config.json
// (eos ids when generation_config.json is absent). Every file is optional.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "photon/result.hpp"

namespace photon {

struct TokenizerSettings {
  std::optional<std::string> bos_token, eos_token, pad_token, unk_token;  // token texts
  std::optional<bool> add_bos_token, add_eos_token;
  std::string chat_template;             // empty: none
  std::vector<int32_t> extra_eos_ids;    // generation_config.json (or config.json) eos_token_id
  std::optional<int32_t> config_bos_id;  // generation_config.json (or config.json) bos_token_id
  std::optional<int32_t> config_pad_id;
};

// Reads the optional files of `dir`. Errors: bad_json for unparsable JSON,
// tokenizer_error for a field of the wrong type (the message names file and field).
Result<TokenizerSettings> read_tokenizer_settings(const std::string& dir);

}  // namespace photon
