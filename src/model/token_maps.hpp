// Open-addressing hash tables for the tokenizer's hot lookups (a std::
// unordered_map costs a pointer chase and an allocation per entry; these are
// flat arrays sized once at load).
//   StringIdMap: byte string -> token id; keys live in one arena.
//   MergeMap:    (left id, right id) -> (merge rank, merged id).
// Built once, then read-only: concurrent const lookups are safe.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace photon {

inline uint64_t hash_bytes(std::string_view s) noexcept {
  // FNV-1a over 8-byte words, then a final avalanche (keys are short).
  uint64_t h = 0xcbf29ce484222325ull ^ s.size();
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
    h ^= h >> 29;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, s.data() + i, s.size() - i);
  h = (h ^ tail) * 0x9E3779B97F4A7C15ull;
  h ^= h >> 32;
  h *= 0xD6E8FEB86659FD93ull;
  h ^= h >> 32;
  return h;
}

inline uint64_t mix64(uint64_t x) noexcept {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

class StringIdMap {
 public:
  void reserve(size_t n) {
    size_t cap = 16;
    while (cap < n * 2) cap <<= 1;
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
  }
  // Inserts or overwrites.
  void insert(std::string_view key, int32_t id) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    put(key, id);
  }
  // -1 when absent.
  int32_t find(std::string_view key) const noexcept {
    if (slots_.empty()) return -1;
    const uint64_t h = hash_bytes(key);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.id < 0) return -1;
      if (s.hash == h && s.len == key.size() && std::memcmp(arena_.data() + s.offset, key.data(), key.size()) == 0)
        return s.id;
    }
  }
  size_t size() const noexcept { return size_; }

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t offset = 0;  // into arena_
    uint32_t len = 0;
    int32_t id = -1;
  };
  void put(std::string_view key, int32_t id) {
    const uint64_t h = hash_bytes(key);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.id < 0) {
        s = Slot{h, static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(key.size()), id};
        arena_.append(key);
        ++size_;
        return;
      }
      if (s.hash == h && s.len == key.size() && std::memcmp(arena_.data() + s.offset, key.data(), key.size()) == 0) {
        s.id = id;
        return;
      }
    }
  }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    const size_t cap = old.empty() ? 16 : old.size() * 2;
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
    for (const Slot& s : old) {
      if (s.id < 0) continue;
      for (size_t i = s.hash & mask_;; i = (i + 1) & mask_) {
        if (slots_[i].id < 0) {
          slots_[i] = s;
          break;
        }
      }
    }
  }
  std::vector<Slot> slots_;
  std::string arena_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

class MergeMap {
 public:
  struct Value {
    int32_t rank;
    int32_t id;
  };
  void reserve(size_t n) {
    size_t cap = 16;
    while (cap < n * 2) cap <<= 1;
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
    size_ = 0;
  }
  // Inserts or overwrites (a later duplicate merge wins, as in tokenizers).
  void insert(int32_t left, int32_t right, Value v) {
    if ((size_ + 1) * 2 > slots_.size()) rehash(slots_.empty() ? 16 : slots_.size() * 2);
    const uint64_t key = pack(left, right);
    for (size_t i = mix64(key) & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.key == kEmpty) {
        s = Slot{key, v};
        ++size_;
        return;
      }
      if (s.key == key) {
        s.value = v;
        return;
      }
    }
  }
  // nullptr when (left, right) is not a merge.
  const Value* find(int32_t left, int32_t right) const noexcept {
    if (slots_.empty()) return nullptr;
    const uint64_t key = pack(left, right);
    for (size_t i = mix64(key) & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == key) return &s.value;
      if (s.key == kEmpty) return nullptr;
    }
  }
  size_t size() const noexcept { return size_; }

 private:
  static constexpr uint64_t kEmpty = ~0ull;
  static uint64_t pack(int32_t l, int32_t r) noexcept {
    return (static_cast<uint64_t>(static_cast<uint32_t>(l)) << 32) | static_cast<uint32_t>(r);
  }
  struct Slot {
    uint64_t key = kEmpty;
    Value value{0, 0};
  };
  void rehash(size_t cap) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
    for (const Slot& s : old) {
      if (s.key == kEmpty) continue;
      for (size_t i = mix64(s.key) & mask_;; i = (i + 1) & mask_) {
        if (slots_[i].key == kEmpty) {
          slots_[i] = s;
          break;
        }
      }
    }
  }
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace photon
