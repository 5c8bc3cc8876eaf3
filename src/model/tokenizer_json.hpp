// Reads tokenizer.json with a streaming (SAX) parser: the two large parts,
// model.vocab (~150k entries) and model.merges (~150k-300k pairs), go straight
// into flat vectors; the rest of the file becomes an ordinary JSON tree.
// A DOM of the whole file costs ~10x more time and memory (one map node
// per vocabulary entry).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "photon/result.hpp"

namespace photon {

struct TokenizerJson {
  // The file without model.vocab and model.merges (replaced by null).
  nlohmann::json root;
  bool has_vocab = false, has_merges = false;
  std::vector<std::pair<std::string, int64_t>> vocab;         // in file order
  std::vector<std::pair<std::string, std::string>> merges;    // rank = index
};

// file_not_found / io_error / bad_json (with position) / tokenizer_error for a
// malformed vocab or merges entry; messages name the path.
Result<TokenizerJson> read_tokenizer_json(const std::string& path);

}  // namespace photon
