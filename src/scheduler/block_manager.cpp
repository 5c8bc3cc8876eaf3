#include "scheduler/block_manager.hpp"

#include <algorithm>
#include <string>

#include "scheduler/mix64.hpp"

namespace photon {

namespace {
// 64x64 -> 128-bit multiply folded to 64 bits: one strong mixing step per
// 8 bytes of input.
inline uint64_t fold_mul(uint64_t a, uint64_t b) noexcept {
  __extension__ using u128 = unsigned __int128;
  const u128 p = static_cast<u128>(a) * b;
  return uint64_t(p) ^ uint64_t(p >> 64);
}
}  // namespace

uint64_t hash_block(uint64_t parent_hash, std::span<const int32_t> tokens) noexcept {
  constexpr uint64_t k0 = 0xa0761d6478bd642full, k1 = 0xe7037ed1a0b428dbull;
  uint64_t h = mix64(parent_hash ^ k0);
  size_t i = 0;
  for (; i + 2 <= tokens.size(); i += 2) {
    const uint64_t pair = uint64_t(uint32_t(tokens[i])) | (uint64_t(uint32_t(tokens[i + 1])) << 32);
    h = fold_mul(h ^ pair, k1);
  }
  if (i < tokens.size()) h = fold_mul(h ^ uint64_t(uint32_t(tokens[i])), k0);
  return mix64(h ^ uint64_t(tokens.size()));
}

BlockManager::BlockManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching)
    : block_size_(block_size),
      prefix_caching_(enable_prefix_caching),
      blocks_(size_t(num_blocks)),
      block_tokens_(enable_prefix_caching ? size_t(num_blocks) * size_t(block_size) : 0),
      num_free_(num_blocks),
      hash_index_(enable_prefix_caching ? num_blocks : 0) {
  free_list_.reserve(size_t(num_blocks));
  // Lowest ids on top of the stack: a fresh pool hands out 0, 1, 2, ...
  for (int32_t b = num_blocks - 1; b >= 0; --b) free_list_.push_back(b);
}

void BlockManager::hash_full_blocks(Sequence& seq, int32_t count) const {
  const auto tokens = seq.tokens();
  for (auto b = int32_t(seq.block_hashes.size()); b < count; ++b) {
    const uint64_t parent = b == 0 ? kRootBlockHash : seq.block_hashes[size_t(b) - 1];
    seq.block_hashes.push_back(hash_block(parent, tokens.subspan(size_t(b) * size_t(block_size_), size_t(block_size_))));
  }
}

bool BlockManager::matches(int32_t block, uint64_t parent_hash, std::span<const int32_t> tokens) const noexcept {
  const Block& blk = blocks_[size_t(block)];
  if (!blk.registered || blk.parent_hash != parent_hash) return false;
  const int32_t* stored = block_tokens_.data() + size_t(block) * size_t(block_size_);
  return std::equal(tokens.begin(), tokens.end(), stored);
}

void BlockManager::find_prefix(Sequence& seq, PrefixHit& hit) {
  hit.clear();
  if (!prefix_caching_ || seq.num_tokens() == 0) return;
  const int32_t max_blocks = (seq.num_tokens() - 1) / block_size_;
  hash_full_blocks(seq, max_blocks);
  const auto tokens = seq.tokens();
  for (int32_t b = 0; b < max_blocks; ++b) {
    const int32_t id = hash_index_.find(seq.block_hashes[size_t(b)]);
    if (id < 0) break;
    const uint64_t parent = b == 0 ? kRootBlockHash : seq.block_hashes[size_t(b) - 1];
    if (!matches(id, parent, tokens.subspan(size_t(b) * size_t(block_size_), size_t(block_size_)))) break;
    hit.blocks.push_back(id);
    if (blocks_[size_t(id)].ref_count == 0) ++hit.num_unreferenced;
  }
}

bool BlockManager::can_admit(const PrefixHit& hit, int32_t num_new_tokens) const noexcept {
  const int32_t needed = blocks_for(hit.num_tokens(block_size_) + num_new_tokens) - int32_t(hit.blocks.size());
  return needed <= num_available() - hit.num_unreferenced;
}

void BlockManager::admit(Sequence& seq, const PrefixHit& hit, int32_t num_new_tokens) {
  seq.block_table.assign(hit.blocks.begin(), hit.blocks.end());
  for (int32_t b : hit.blocks) {
    Block& blk = blocks_[size_t(b)];
    if (blk.ref_count == 0) {
      lru_remove(b);
      --num_cached_;
    }
    ++blk.ref_count;
  }
  const int32_t cached_tokens = hit.num_tokens(block_size_);
  seq.num_computed_tokens = cached_tokens;
  seq.num_cached_tokens = cached_tokens;
  seq.num_cached_blocks = int32_t(hit.blocks.size());
  if (prefix_caching_) {
    lookup_tokens_ += uint64_t(seq.num_tokens());
    hit_tokens_ += uint64_t(cached_tokens);
  }
  const int32_t needed = blocks_for(cached_tokens + num_new_tokens) - int32_t(seq.block_table.size());
  for (int32_t i = 0; i < needed; ++i) seq.block_table.push_back(take_fresh_block());
}

bool BlockManager::allocate_slots(Sequence& seq, int32_t num_new_tokens) {
  const int32_t needed = blocks_for(seq.num_computed_tokens + num_new_tokens) - int32_t(seq.block_table.size());
  if (needed <= 0) return true;
  if (needed > num_available()) return false;
  for (int32_t i = 0; i < needed; ++i) seq.block_table.push_back(take_fresh_block());
  return true;
}

int32_t BlockManager::take_fresh_block() {
  int32_t b;
  if (!free_list_.empty()) {
    b = free_list_.back();
    free_list_.pop_back();
    --num_free_;
  } else {
    b = lru_head_;
    lru_remove(b);
    unregister(b);
    --num_cached_;
    ++evictions_;
  }
  blocks_[size_t(b)].ref_count = 1;
  return b;
}

void BlockManager::cache_computed_blocks(Sequence& seq) {
  if (!prefix_caching_) return;
  const int32_t full = std::min(seq.num_computed_tokens / block_size_, int32_t(seq.block_table.size()));
  if (full <= seq.num_cached_blocks) return;
  hash_full_blocks(seq, full);
  const auto tokens = seq.tokens();
  for (int32_t b = seq.num_cached_blocks; b < full; ++b) {
    const uint64_t h = seq.block_hashes[size_t(b)];
    // An equal block registered first (another sequence computed the same
    // prefix in the same step) stays the cached copy; this one is freed on release.
    if (hash_index_.contains(h)) continue;
    const int32_t id = seq.block_table[size_t(b)];
    Block& blk = blocks_[size_t(id)];
    blk.registered = true;
    blk.hash = h;
    blk.parent_hash = b == 0 ? kRootBlockHash : seq.block_hashes[size_t(b) - 1];
    std::copy_n(tokens.begin() + std::ptrdiff_t(size_t(b) * size_t(block_size_)), block_size_,
                block_tokens_.begin() + std::ptrdiff_t(size_t(id) * size_t(block_size_)));
    hash_index_.insert(h, id);
  }
  seq.num_cached_blocks = full;
}

void BlockManager::release(Sequence& seq) {
  // Last block first, so that a sequence's tail is evicted before its prefix.
  for (auto it = seq.block_table.rbegin(); it != seq.block_table.rend(); ++it) {
    const int32_t b = *it;
    Block& blk = blocks_[size_t(b)];
    if (--blk.ref_count > 0) continue;
    if (blk.registered) {
      lru_push_back(b);
      ++num_cached_;
    } else {
      free_list_.push_back(b);
      ++num_free_;
    }
  }
  seq.block_table.clear();
  seq.num_computed_tokens = 0;
  seq.num_cached_blocks = 0;
}

void BlockManager::reset_prefix_cache() {
  while (lru_head_ != -1) {
    const int32_t b = lru_head_;
    lru_remove(b);
    unregister(b);
    --num_cached_;
    free_list_.push_back(b);
    ++num_free_;
  }
}

void BlockManager::lru_push_back(int32_t b) noexcept {
  Block& blk = blocks_[size_t(b)];
  blk.lru_prev = lru_tail_;
  blk.lru_next = -1;
  if (lru_tail_ != -1) blocks_[size_t(lru_tail_)].lru_next = b;
  else lru_head_ = b;
  lru_tail_ = b;
}

void BlockManager::lru_remove(int32_t b) noexcept {
  Block& blk = blocks_[size_t(b)];
  if (blk.lru_prev != -1) blocks_[size_t(blk.lru_prev)].lru_next = blk.lru_next;
  else lru_head_ = blk.lru_next;
  if (blk.lru_next != -1) blocks_[size_t(blk.lru_next)].lru_prev = blk.lru_prev;
  else lru_tail_ = blk.lru_prev;
  blk.lru_prev = blk.lru_next = -1;
}

void BlockManager::unregister(int32_t b) noexcept {
  Block& blk = blocks_[size_t(b)];
  if (!blk.registered) return;
  hash_index_.erase(blk.hash);
  blk.registered = false;
}

BlockManagerStats BlockManager::stats() const noexcept {
  BlockManagerStats s;
  s.num_blocks = num_blocks();
  s.free = num_free_;
  s.cached = num_cached_;
  s.used = s.num_blocks - s.free - s.cached;
  s.lookup_tokens = lookup_tokens_;
  s.hit_tokens = hit_tokens_;
  s.evictions = evictions_;
  return s;
}

Result<void> BlockManager::check_invariants() const {
  auto broken = [](const std::string& what) { return fail(Errc::internal, "block manager invariant: " + what); };
  int32_t used = 0, registered = 0;
  for (size_t b = 0; b < blocks_.size(); ++b) {
    const Block& blk = blocks_[b];
    if (blk.ref_count < 0) return broken("negative ref count on block " + std::to_string(b));
    if (blk.ref_count > 0) ++used;
    if (blk.registered) {
      ++registered;
      if (hash_index_.find(blk.hash) != int32_t(b))
        return broken("registered block " + std::to_string(b) + " missing from the hash index");
    }
  }
  if (size_t(registered) != hash_index_.size()) return broken("hash index holds unregistered blocks");
  if (int32_t(free_list_.size()) != num_free_) return broken("free list size differs from the free count");
  for (int32_t b : free_list_) {
    const Block& blk = blocks_[size_t(b)];
    if (blk.ref_count != 0 || blk.registered) return broken("block " + std::to_string(b) + " on the free list is in use");
  }
  int32_t cached = 0;
  for (int32_t b = lru_head_, prev = -1; b != -1; prev = b, b = blocks_[size_t(b)].lru_next) {
    const Block& blk = blocks_[size_t(b)];
    if (blk.lru_prev != prev) return broken("broken LRU link at block " + std::to_string(b));
    if (blk.ref_count != 0 || !blk.registered) return broken("block " + std::to_string(b) + " on the LRU list is not cached");
    if (++cached > num_blocks()) return broken("LRU list has a cycle");
  }
  if (cached != num_cached_) return broken("LRU list length differs from the cached count");
  if (used + num_free_ + num_cached_ != num_blocks()) return broken("used + free + cached differs from the pool size");
  return {};
}

}  // namespace photon
