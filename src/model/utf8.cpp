#include "model/utf8.hpp"

#include <cstring>

namespace photon::utf8 {
namespace {

inline bool in(unsigned char c, unsigned char lo, unsigned char hi) { return c >= lo && c <= hi; }

}  // namespace

int sequence_length(std::string_view s, size_t i, bool* truncated) noexcept {
  if (truncated) *truncated = false;
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return 1;
  int need;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (in(b0, 0xC2, 0xDF)) {
    need = 1;
  } else if (b0 == 0xE0) {
    need = 2, lo = 0xA0;
  } else if (in(b0, 0xE1, 0xEC) || in(b0, 0xEE, 0xEF)) {
    need = 2;
  } else if (b0 == 0xED) {
    need = 2, hi = 0x9F;
  } else if (b0 == 0xF0) {
    need = 3, lo = 0x90;
  } else if (in(b0, 0xF1, 0xF3)) {
    need = 3;
  } else if (b0 == 0xF4) {
    need = 3, hi = 0x8F;
  } else {
    return -1;
  }
  for (int k = 1; k <= need; ++k) {
    if (i + k >= s.size()) {
      if (truncated) *truncated = true;
      return -k;
    }
    const auto c = static_cast<unsigned char>(s[i + k]);
    const bool ok = k == 1 ? in(c, lo, hi) : in(c, 0x80, 0xBF);
    if (!ok) return -k;
  }
  return need + 1;
}

bool is_valid(std::string_view s) noexcept {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    // ASCII fast path, 8 bytes at a time.
    while (i + 8 <= n) {
      uint64_t w;
      std::memcpy(&w, s.data() + i, 8);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= n) break;
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const int len = sequence_length(s, i);
    if (len < 0) return false;
    i += static_cast<size_t>(len);
  }
  return true;
}

size_t append_lossy(std::string_view in, std::string& out, bool final, bool per_byte) {
  size_t i = 0, run = 0;  // [run, i): valid bytes not yet copied
  const size_t n = in.size();
  while (i < n) {
    if (static_cast<unsigned char>(in[i]) < 0x80) {
      ++i;
      continue;
    }
    bool truncated = false;
    const int len = sequence_length(in, i, &truncated);
    if (len > 0) {
      i += static_cast<size_t>(len);
      continue;
    }
    out.append(in.substr(run, i - run));
    if (truncated && !final) return i;
    out.append(kReplacement);
    i += per_byte ? 1 : static_cast<size_t>(-len);
    run = i;
  }
  out.append(in.substr(run, n - run));
  return n;
}

std::string to_valid(std::string_view in) {
  std::string out;
  out.reserve(in.size() + 8);
  append_lossy(in, out, true);
  return out;
}

void append_codepoint(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

uint32_t next_codepoint(std::string_view s, size_t& i) noexcept {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  auto cont = [&](size_t k) { return static_cast<uint32_t>(static_cast<unsigned char>(s[i + k]) & 0x3F); };
  uint32_t cp;
  if (b0 < 0xE0) {
    cp = ((b0 & 0x1Fu) << 6) | cont(1);
    i += 2;
  } else if (b0 < 0xF0) {
    cp = ((b0 & 0x0Fu) << 12) | (cont(1) << 6) | cont(2);
    i += 3;
  } else {
    cp = ((b0 & 0x07u) << 18) | (cont(1) << 12) | (cont(2) << 6) | cont(3);
    i += 4;
  }
  return cp;
}

}  // namespace photon::utf8
