// Added (and special) tokens found in text before the model splits it, as
// tokenizers' AddedVocabulary does: leftmost-longest matches, non-overlapping,
// with the lstrip / rstrip / single_word options of each token.
//
// Built once at load; find() is const and thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace photon {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;
  bool lstrip = false;       // the match also takes the whitespace before it
  bool rstrip = false;       // ... and after it
  bool single_word = false;  // only when not inside a word
  bool normalized = false;   // matched in normalized text rather than raw text
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  // `tokens` with empty content are ignored.
  explicit AddedTokenMatcher(const std::vector<AddedToken>& tokens);

  bool empty() const noexcept { return tokens_.empty(); }

  struct Piece {
    std::string_view text;  // ordinary text (id < 0) or the matched span
    int32_t id = -1;        // the token's id when this piece is a token
  };
  // Splits `text` into ordinary text and token pieces, appended to `out` in
  // order (empty text pieces omitted). With skip_special, tokens marked
  // special are not matched (their text stays ordinary text).
  void split(std::string_view text, bool skip_special, std::vector<Piece>& out) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> next;  // byte -> node index
    int32_t token = -1;                                   // index into tokens_ when a token ends here
  };
  int32_t child(int32_t node, unsigned char c) const noexcept;
  std::vector<Node> nodes_;
  std::vector<AddedToken> tokens_;
  bool first_byte_[256] = {};
};

}  // namespace photon
