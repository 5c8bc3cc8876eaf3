// A lock-free cache of BPE results per pre-token word, shared by all threads
// that encode with one tokenizer (words repeat: most of a text's pieces have
// been seen before, and BPE merging is the costliest step of encoding).
//
// Direct-mapped, 64-byte slots, each guarded by a sequence counter
// (seqlock): readers never block and retry nothing (a torn or busy slot is a
// miss), a writer that finds its slot busy skips the insert. Words of up to
// 24 bytes giving up to 6 ids are cached. All payload words are atomics, so
// concurrent use is free of data races.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

namespace photon {

class BpeWordCache {
 public:
  static constexpr size_t kMaxWordBytes = 24;
  static constexpr size_t kMaxIds = 6;

  explicit BpeWordCache(size_t slots_log2 = 15)
      : slots_(std::make_unique<Slot[]>(size_t{1} << slots_log2)), mask_((size_t{1} << slots_log2) - 1) {}

  // Appends the cached ids of `word` to `out`; false on a miss.
  bool find(std::string_view word, uint64_t hash, std::vector<int32_t>& out) const noexcept {
    if (word.size() > kMaxWordBytes) return false;
    const Slot& s = slots_[hash & mask_];
    const uint64_t v1 = s.version.load(std::memory_order_acquire);
    if (v1 & 1) return false;
    uint64_t key[3], ids[3];
    const uint64_t meta = s.meta.load(std::memory_order_relaxed);
    for (int i = 0; i < 3; ++i) key[i] = s.key[i].load(std::memory_order_relaxed);
    for (int i = 0; i < 3; ++i) ids[i] = s.ids[i].load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.version.load(std::memory_order_relaxed) != v1) return false;
    const auto len = static_cast<size_t>(meta & 0xFF), count = static_cast<size_t>((meta >> 8) & 0xFF);
    if (count == 0 || len != word.size() || (meta >> 32) != (hash >> 32)) return false;
    uint64_t want[3] = {0, 0, 0};
    std::memcpy(want, word.data(), word.size());
    if (want[0] != key[0] || want[1] != key[1] || want[2] != key[2]) return false;
    int32_t buf[kMaxIds];
    std::memcpy(buf, ids, sizeof buf);
    out.insert(out.end(), buf, buf + count);
    return true;
  }

  void insert(std::string_view word, uint64_t hash, const int32_t* ids, size_t count) noexcept {
    if (word.size() > kMaxWordBytes || count == 0 || count > kMaxIds) return;
    Slot& s = slots_[hash & mask_];
    uint64_t v = s.version.load(std::memory_order_relaxed);
    if ((v & 1) || !s.version.compare_exchange_strong(v, v + 1, std::memory_order_relaxed)) return;
    std::atomic_thread_fence(std::memory_order_release);
    uint64_t key[3] = {0, 0, 0}, packed[3] = {0, 0, 0};
    std::memcpy(key, word.data(), word.size());
    std::memcpy(packed, ids, count * sizeof(int32_t));
    s.meta.store(word.size() | (count << 8) | (hash & 0xFFFFFFFF00000000ull), std::memory_order_relaxed);
    for (int i = 0; i < 3; ++i) s.key[i].store(key[i], std::memory_order_relaxed);
    for (int i = 0; i < 3; ++i) s.ids[i].store(packed[i], std::memory_order_relaxed);
    s.version.store(v + 2, std::memory_order_release);
  }

 private:
  struct alignas(64) Slot {
    std::atomic<uint64_t> version{0};  // odd while a writer fills the slot
    std::atomic<uint64_t> meta{0};     // bits 0-7 word length, 8-15 id count, 32-63 hash high bits
    std::atomic<uint64_t> key[3] = {};
    std::atomic<uint64_t> ids[3] = {};
  };
  std::unique_ptr<Slot[]> slots_;
  size_t mask_;
};

}  // namespace photon
