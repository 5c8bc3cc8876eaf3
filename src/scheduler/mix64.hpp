// mix64: a 64-bit integer mixer (the splitmix64 finalizer), for hashes and
// seed derivation. Pure function.
#pragma once

#include <cstdint>

namespace photon {

constexpr uint64_t mix64(uint64_t x) noexcept {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

}  // namespace photon
