// UTF-8 helpers for the tokenizers: validation, lossy conversion with the
// "maximal subpart" rule (one U+FFFD per maximal invalid subsequence, as
// Unicode ch. 3, WHATWG and Rust's String::from_utf8_lossy, hence Hugging
// Face's decode, do), and code point encoding/decoding.
// All functions are pure; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace photon::utf8 {

inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Length of the well-formed sequence starting at s[i] (1..4), or the negated
// length of the maximal invalid subpart there (-1..-3). When the input ends
// inside a sequence that was valid so far, returns -(bytes left) and sets
// *truncated (if given) to true.
int sequence_length(std::string_view s, size_t i, bool* truncated = nullptr) noexcept;

bool is_valid(std::string_view s) noexcept;

// Appends `in` to `out` with invalid subsequences replaced by U+FFFD: one per
// maximal invalid subpart, or one per invalid byte when `per_byte`
// (SentencePiece). When `final` is false, an incomplete sequence at the very
// end (a valid prefix of a character, 1..3 bytes) is left unconsumed.
// Returns the bytes consumed.
size_t append_lossy(std::string_view in, std::string& out, bool final = true, bool per_byte = false);

// `in` made valid (a copy only when it was not).
std::string to_valid(std::string_view in);

void append_codepoint(uint32_t cp, std::string& out);

// Decodes the code point at s[i] of a *valid* string and advances i.
uint32_t next_codepoint(std::string_view s, size_t& i) noexcept;

}  // namespace photon::utf8
