#include "model/added_tokens.hpp"

#include "model/unicode_text.hpp"
#include "model/utf8.hpp"

namespace photon {
namespace {

// tokenizers' single_word test: a word character is alphanumeric (Rust's
// char::is_alphanumeric) or '_'.
bool is_word_char(uint32_t cp) {
  if (cp < 0x80) return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_';
  return unicode::is_alphanumeric(cp);
}

uint32_t codepoint_before(std::string_view s, size_t pos) {
  size_t b = pos - 1;
  while (b > 0 && (static_cast<unsigned char>(s[b]) & 0xC0) == 0x80) --b;
  return utf8::next_codepoint(s, b);
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedToken>& tokens) {
  nodes_.emplace_back();
  for (const auto& t : tokens) {
    if (t.content.empty()) continue;
    int32_t node = 0;
    for (unsigned char c : t.content) {
      int32_t nx = child(node, c);
      if (nx < 0) {
        nx = static_cast<int32_t>(nodes_.size());
        nodes_[node].next.emplace_back(c, nx);
        nodes_.emplace_back();
      }
      node = nx;
    }
    // A later token with the same content replaces the earlier one.
    if (nodes_[node].token >= 0) {
      tokens_[nodes_[node].token] = t;
    } else {
      nodes_[node].token = static_cast<int32_t>(tokens_.size());
      tokens_.push_back(t);
    }
    first_byte_[static_cast<unsigned char>(t.content[0])] = true;
  }
}

int32_t AddedTokenMatcher::child(int32_t node, unsigned char c) const noexcept {
  for (const auto& [byte, idx] : nodes_[node].next)
    if (byte == c) return idx;
  return -1;
}

void AddedTokenMatcher::split(std::string_view text, bool skip_special, std::vector<Piece>& out) const {
  const size_t n = text.size();
  size_t text_start = 0;  // start of the ordinary text not yet emitted
  size_t i = 0;
  while (i < n) {
    if (!first_byte_[static_cast<unsigned char>(text[i])]) {
      ++i;
      continue;
    }
    // Longest token starting at i.
    int32_t node = 0, best = -1;
    size_t best_end = 0;
    for (size_t j = i; j < n; ++j) {
      node = child(node, static_cast<unsigned char>(text[j]));
      if (node < 0) break;
      const int32_t t = nodes_[node].token;
      if (t >= 0 && !(skip_special && tokens_[t].special)) {
        best = t;
        best_end = j + 1;
      }
    }
    if (best < 0) {
      ++i;
      continue;
    }
    const AddedToken& tok = tokens_[best];
    size_t start = i, end = best_end;
    if (tok.single_word) {
      const bool left_ok = start == 0 || !is_word_char(codepoint_before(text, start));
      size_t e = end;
      const bool right_ok = end == n || !is_word_char(utf8::next_codepoint(text, e));
      if (!left_ok || !right_ok) {
        i = best_end;  // like tokenizers: the rejected match is not retried shorter
        continue;
      }
    }
    if (tok.lstrip) {
      while (start > text_start) {
        size_t b = start - 1;
        while (b > text_start && (static_cast<unsigned char>(text[b]) & 0xC0) == 0x80) --b;
        size_t k = b;
        if (!unicode::is_white_space(utf8::next_codepoint(text, k))) break;
        start = b;
      }
    }
    if (tok.rstrip) {
      while (end < n) {
        size_t k = end;
        if (!unicode::is_white_space(utf8::next_codepoint(text, k))) break;
        end = k;
      }
    }
    if (start > text_start) out.push_back({text.substr(text_start, start - text_start), -1});
    out.push_back({text.substr(start, end - start), tok.id});
    text_start = i = end;
  }
  if (n > text_start) out.push_back({text.substr(text_start), -1});
}

}  // namespace photon
