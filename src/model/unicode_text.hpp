// Unicode helpers of the tokenizer: whitespace classes as the reference
// implementations define them, stripping, and ICU-backed normalization forms.
// Thread-safety: all functions are safe to call concurrently.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "photon/result.hpp"

namespace photon::unicode {

// Unicode White_Space (Rust's char::is_whitespace; tokenizers' lstrip/rstrip).
bool is_white_space(uint32_t cp) noexcept;
// Python's str.isspace(): White_Space plus U+001C..U+001F (Jinja's trim filter).
bool is_python_space(uint32_t cp) noexcept;
// Rust's char::is_alphanumeric(): Alphabetic, or general category Nd/Nl/No.
bool is_alphanumeric(uint32_t cp) noexcept;

// Python str.strip() / lstrip() / rstrip() without arguments, on valid UTF-8.
std::string_view python_strip(std::string_view s) noexcept;
std::string_view python_lstrip(std::string_view s) noexcept;
std::string_view python_rstrip(std::string_view s) noexcept;

enum class NormalForm { nfc, nfd, nfkc, nfkd };

// Normalizes valid UTF-8 text into `out` (replacing its content). Text that is
// already normalized (always the case for ASCII) is copied without ICU work.
Result<void> normalize(NormalForm form, std::string_view text, std::string& out);

}  // namespace photon::unicode
