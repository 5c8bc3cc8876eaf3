// BlockHashIndex: prefix-cache hash -> block id, a fixed-capacity open
// addressing table (linear probing, backward-shift deletion). It holds at
// most one entry per KV block, so it is sized once (load <= 1/2) and never
// allocates afterwards: registering and evicting blocks on the step path
// costs no malloc. Keys are already well-mixed 64-bit hashes.
// Thread-compatibility: one thread (the BlockManager's).
#pragma once

#include <cstdint>
#include <vector>

namespace photon {

class BlockHashIndex {
 public:
  explicit BlockHashIndex(int32_t max_entries) {
    size_t cap = 16;
    while (cap < 2 * size_t(max_entries > 0 ? max_entries : 1)) cap *= 2;
    keys_.assign(cap, 0);
    values_.assign(cap, -1);
    mask_ = cap - 1;
  }

  // The block registered under `hash`, or -1.
  int32_t find(uint64_t hash) const noexcept {
    for (size_t i = hash & mask_;; i = (i + 1) & mask_) {
      if (values_[i] < 0) return -1;
      if (keys_[i] == hash) return values_[i];
    }
  }
  bool contains(uint64_t hash) const noexcept { return find(hash) >= 0; }

  // Adds hash -> block; `hash` must be absent and size() < max_entries.
  void insert(uint64_t hash, int32_t block) noexcept {
    size_t i = hash & mask_;
    while (values_[i] >= 0) i = (i + 1) & mask_;
    keys_[i] = hash;
    values_[i] = block;
    ++size_;
  }

  // Removes `hash` if present.
  void erase(uint64_t hash) noexcept {
    size_t i = hash & mask_;
    for (;; i = (i + 1) & mask_) {
      if (values_[i] < 0) return;
      if (keys_[i] == hash) break;
    }
    // Shift later members of the probe run back so that no lookup stops early.
    for (size_t j = (i + 1) & mask_;; j = (j + 1) & mask_) {
      if (values_[j] < 0) break;
      const size_t home = keys_[j] & mask_;
      // Entry j may move to i when its home is not in the cyclic range (i, j].
      const bool movable = i <= j ? (home <= i || home > j) : (home <= i && home > j);
      if (movable) {
        keys_[i] = keys_[j];
        values_[i] = values_[j];
        i = j;
      }
    }
    values_[i] = -1;
    --size_;
  }

  size_t size() const noexcept { return size_; }

 private:
  std::vector<uint64_t> keys_;
  std::vector<int32_t> values_;  // -1: empty slot
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace photon
