#include "model/unicode_text.hpp"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/stringpiece.h>
#include <unicode/uchar.h>

#include <fmt/core.h>

#include "model/utf8.hpp"

namespace photon::unicode {

bool is_white_space(uint32_t cp) noexcept {
  if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
  switch (cp) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

bool is_python_space(uint32_t cp) noexcept { return is_white_space(cp) || (cp >= 0x1C && cp <= 0x1F); }

bool is_alphanumeric(uint32_t cp) noexcept {
  const auto c = static_cast<UChar32>(cp);
  if (u_hasBinaryProperty(c, UCHAR_ALPHABETIC)) return true;
  const int8_t type = u_charType(c);
  return type == U_DECIMAL_DIGIT_NUMBER || type == U_LETTER_NUMBER || type == U_OTHER_NUMBER;
}

namespace {

// Byte length of the code point that ends at s[end-1] (valid UTF-8).
size_t last_codepoint_start(std::string_view s, size_t end) noexcept {
  size_t i = end - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  return i;
}

}  // namespace

std::string_view python_lstrip(std::string_view s) noexcept {
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i;
    if (!is_python_space(utf8::next_codepoint(s, j))) break;
    i = j;
  }
  return s.substr(i);
}

std::string_view python_rstrip(std::string_view s) noexcept {
  size_t end = s.size();
  while (end > 0) {
    const size_t b = last_codepoint_start(s, end);
    size_t j = b;
    if (!is_python_space(utf8::next_codepoint(s, j))) break;
    end = b;
  }
  return s.substr(0, end);
}

std::string_view python_strip(std::string_view s) noexcept { return python_rstrip(python_lstrip(s)); }

Result<void> normalize(NormalForm form, std::string_view text, std::string& out) {
  out.clear();
  // Code points below U+0300 (UTF-8 lead bytes below 0xCC) are all NFC
  // quick-check "yes" and none combines with a preceding character, so such
  // text is NFC already. NFD/NFKC/NFKD change Latin-1 characters (é, U+00A0),
  // so their fast path is ASCII only.
  const unsigned char limit = form == NormalForm::nfc ? 0xCC : 0x80;
  bool trivial = true;
  for (char c : text)
    if (static_cast<unsigned char>(c) >= limit) {
      trivial = false;
      break;
    }
  if (trivial) {
    out.assign(text);
    return {};
  }
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* n = nullptr;
  switch (form) {
    case NormalForm::nfc: n = icu::Normalizer2::getNFCInstance(status); break;
    case NormalForm::nfd: n = icu::Normalizer2::getNFDInstance(status); break;
    case NormalForm::nfkc: n = icu::Normalizer2::getNFKCInstance(status); break;
    case NormalForm::nfkd: n = icu::Normalizer2::getNFKDInstance(status); break;
  }
  if (U_FAILURE(status) || !n) return fail(Errc::internal, fmt::format("ICU normalizer: {}", u_errorName(status)));
  const icu::StringPiece sp(text.data(), static_cast<int32_t>(text.size()));
  if (n->isNormalizedUTF8(sp, status) && U_SUCCESS(status)) {
    out.assign(text);
    return {};
  }
  status = U_ZERO_ERROR;
  out.reserve(text.size() + 16);
  icu::StringByteSink<std::string> sink(&out);
  n->normalizeUTF8(0, sp, sink, nullptr, status);
  if (U_FAILURE(status)) return fail(Errc::internal, fmt::format("ICU normalization failed: {}", u_errorName(status)));
  return {};
}

}  // namespace photon::unicode
