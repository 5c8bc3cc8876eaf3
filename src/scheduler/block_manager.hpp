// BlockManager: the paged KV cache's bookkeeping (no KV data lives here).
//
// The pool has num_blocks blocks of block_size token slots. Each block is in
// exactly one of three states:
//   used    ref_count > 0: in the block table of ref_count sequences;
//   cached  ref_count == 0 but registered in the prefix cache: its KV is still
//           valid and a later sequence with the same prefix takes it back;
//           evicted least-recently-released first, only when a fresh block
//           is needed and no free one is left;
//   free    ref_count == 0 and unregistered.
//
// Automatic prefix caching: a full, computed block is registered under the
// chained hash h_b = hash(h_{b-1}, its block_size token ids) (h_{-1} a fixed
// seed). A lookup walks a new sequence's leading full blocks, and a hit
// counts only when the registered block's token ids and parent hash equal the
// sequence's, so a hash collision can never hand out wrong KV. Hits are
// shared copy-free (ref_count + 1). A lookup leaves at least one prompt token
// to compute, so every admitted sequence produces logits in its first step.
//
// Thread-compatibility: one thread (the engine's stepping thread).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "photon/result.hpp"
#include "scheduler/block_hash_index.hpp"
#include "scheduler/sequence.hpp"

namespace photon {

// Chained hash of one full block: parent hash and its token ids.
uint64_t hash_block(uint64_t parent_hash, std::span<const int32_t> tokens) noexcept;
// The parent hash of a sequence's first block.
inline constexpr uint64_t kRootBlockHash = 0x70686f746f6e2121ull;

struct BlockManagerStats {
  int32_t num_blocks = 0;
  int32_t used = 0;    // ref_count > 0
  int32_t cached = 0;  // ref_count == 0, kept for prefix reuse (evictable)
  int32_t free = 0;    // ref_count == 0, unregistered
  uint64_t lookup_tokens = 0;  // prompt tokens looked up at admissions
  uint64_t hit_tokens = 0;     // of which found in the prefix cache
  uint64_t evictions = 0;      // cached blocks reused for other content
  double hit_rate() const noexcept { return lookup_tokens ? double(hit_tokens) / double(lookup_tokens) : 0.0; }
  // Fraction of the pool held by sequences.
  double usage() const noexcept { return num_blocks ? double(used) / double(num_blocks) : 0.0; }
};

// The cached leading blocks found for a sequence (BlockManager::find_prefix).
struct PrefixHit {
  std::vector<int32_t> blocks;  // block ids, in order
  int32_t num_unreferenced = 0; // of which now cached (ref_count 0): they stop being available once taken
  int32_t num_tokens(int32_t block_size) const noexcept { return int32_t(blocks.size()) * block_size; }
  void clear() noexcept {
    blocks.clear();
    num_unreferenced = 0;
  }
};

class BlockManager {
 public:
  BlockManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching);

  int32_t num_blocks() const noexcept { return int32_t(blocks_.size()); }
  int32_t block_size() const noexcept { return block_size_; }
  bool prefix_caching() const noexcept { return prefix_caching_; }
  // Blocks that can be handed out now (free + cached).
  int32_t num_available() const noexcept { return num_free_ + num_cached_; }
  // Blocks a sequence needs to hold its first `num_tokens` positions.
  int32_t blocks_for(int32_t num_tokens) const noexcept { return (num_tokens + block_size_ - 1) / block_size_; }

  // ---- admission of a sequence that holds no blocks ----
  // Fills `hit` with the longest run of cached blocks equal to seq's leading
  // full blocks (at most (num_tokens-1)/block_size). Changes no block state.
  void find_prefix(Sequence& seq, PrefixHit& hit);
  // Whether taking `hit` and then blocks for `num_new_tokens` positions after
  // it is possible now.
  bool can_admit(const PrefixHit& hit, int32_t num_new_tokens) const noexcept;
  // Takes the hit blocks (ref_count + 1) as seq's block table, sets
  // seq.num_computed_tokens to the cached tokens and allocates blocks for
  // num_new_tokens more. Call only when can_admit(hit, num_new_tokens).
  void admit(Sequence& seq, const PrefixHit& hit, int32_t num_new_tokens);

  // Grows seq's block table to cover num_computed_tokens + num_new_tokens
  // positions. Returns false, changing nothing, when the pool cannot.
  bool allocate_slots(Sequence& seq, int32_t num_new_tokens);

  // Registers seq's full, computed blocks in the prefix cache (after the
  // forward pass has written their KV).
  void cache_computed_blocks(Sequence& seq);

  // Returns every block of seq (ref_count - 1; blocks reaching 0 become
  // cached if registered, free otherwise, the sequence's last block first in
  // eviction order) and resets its table, num_computed_tokens and
  // num_cached_blocks.
  void release(Sequence& seq);

  // Drops every cached (unreferenced) block from the prefix cache.
  void reset_prefix_cache();

  BlockManagerStats stats() const noexcept;
  int32_t ref_count(int32_t block) const noexcept { return blocks_[size_t(block)].ref_count; }
  // Checks the internal invariants (state counts, list links, hash index);
  // for tests. Errc::internal names the first broken one.
  Result<void> check_invariants() const;

 private:
  struct Block {
    int32_t ref_count = 0;
    bool registered = false;  // in hash_index_ under `hash`
    uint64_t hash = 0;
    uint64_t parent_hash = 0;
    int32_t lru_prev = -1;  // links of the cached (evictable) list while ref_count == 0 && registered
    int32_t lru_next = -1;
  };

  // Leading full blocks of seq.tokens() hashed so far: extends seq.block_hashes up to `count`.
  void hash_full_blocks(Sequence& seq, int32_t count) const;
  bool matches(int32_t block, uint64_t parent_hash, std::span<const int32_t> tokens) const noexcept;
  // A block with ref_count 1 for new content: a free one, else the least recently cached one.
  int32_t take_fresh_block();
  void lru_push_back(int32_t b) noexcept;
  void lru_remove(int32_t b) noexcept;
  void unregister(int32_t b) noexcept;

  int32_t block_size_;
  bool prefix_caching_;
  std::vector<Block> blocks_;
  std::vector<int32_t> block_tokens_;  // [num_blocks * block_size] token ids of registered blocks
  std::vector<int32_t> free_list_;     // unregistered, ref_count 0 (stack)
  int32_t lru_head_ = -1;              // least recently cached
  int32_t lru_tail_ = -1;
  int32_t num_free_ = 0;
  int32_t num_cached_ = 0;
  BlockHashIndex hash_index_;  // hash -> registered block
  uint64_t lookup_tokens_ = 0;
  uint64_t hit_tokens_ = 0;
  uint64_t evictions_ = 0;
};

}  // namespace photon
