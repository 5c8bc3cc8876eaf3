#include "model/byte_level.hpp"

#include <array>

#include "model/utf8.hpp"

namespace photon::byte_level {
namespace {

struct Tables {
  std::array<uint32_t, 256> to_cp{};
  std::array<int16_t, 324> to_byte{};  // code points 0..323 cover every mapped value
  constexpr Tables() {
    for (auto& v : to_byte) v = -1;
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      to_cp[b] = printable ? b : next++;
      to_byte[to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};
constexpr Tables kTables;

}  // namespace

uint32_t byte_to_codepoint(uint8_t b) noexcept { return kTables.to_cp[b]; }

int32_t codepoint_to_byte(uint32_t cp) noexcept {
  return cp < kTables.to_byte.size() ? kTables.to_byte[cp] : -1;
}

std::optional<std::string> decode(std::string_view text) {
  if (!utf8::is_valid(text)) return std::nullopt;
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const int32_t b = codepoint_to_byte(utf8::next_codepoint(text, i));
    if (b < 0) return std::nullopt;
    out.push_back(static_cast<char>(b));
  }
  return out;
}

std::string encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) utf8::append_codepoint(byte_to_codepoint(static_cast<uint8_t>(c)), out);
  return out;
}

}  // namespace photon::byte_level
