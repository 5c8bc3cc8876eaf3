// GPT-2's byte <-> unicode map used by byte-level BPE vocabularies
// (tokenizers' ByteLevel pre-tokenizer and decoder): bytes 0x21..0x7E,
// 0xA1..0xAC and 0xAE..0xFF stand for the code point of the same value; the
// other 68 bytes map, in order, to U+0100.. . A vocabulary entry such as
// "Ġthe" is the byte string " the".
// Pure functions over a constant table; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace photon::byte_level {

// The code point byte `b` is written as.
uint32_t byte_to_codepoint(uint8_t b) noexcept;
// The byte a code point stands for, or -1 when it is not one of the 256.
int32_t codepoint_to_byte(uint32_t cp) noexcept;

// Byte-level text ("Ġthe") -> bytes (" the"); nullopt when a character is not
// in the map (or the text is not valid UTF-8).
std::optional<std::string> decode(std::string_view text);
// Bytes -> byte-level text.
std::string encode(std::string_view bytes);

}  // namespace photon::byte_level
