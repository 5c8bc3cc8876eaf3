// BlockManager unit scenarios: allocation, ref counts, prefix-cache hits only
// on equal prefixes, LRU eviction, statistics.
#include <catch2/catch.hpp>

#include <random>
#include <unordered_map>
#include <vector>

#include "scheduler/block_hash_index.hpp"
#include "scheduler/block_manager.hpp"

using namespace photon;

namespace {

// A sequence whose whole prompt has been computed (as after its prefill step).
void run_prefill(BlockManager& bm, Sequence& s) {
  PrefixHit hit;
  bm.find_prefix(s, hit);
  const int32_t n = s.num_tokens() - hit.num_tokens(bm.block_size());
  REQUIRE(bm.can_admit(hit, n));
  bm.admit(s, hit, n);
  s.num_computed_tokens += n;
  bm.cache_computed_blocks(s);
}

Sequence seq(uint64_t id, std::vector<int32_t> tokens) { return Sequence(id, tokens, SequenceParams{}); }

}  // namespace

TEST_CASE("blocks are handed out, shared by ref count and all returned", "[scheduler]") {
  BlockManager bm(8, 4, true);
  auto a = seq(1, {1, 2, 3, 4, 5, 6, 7, 8, 9});  // 2 full blocks + 1 token
  run_prefill(bm, a);
  CHECK(a.block_table == std::vector<int32_t>{0, 1, 2});
  CHECK(a.num_cached_blocks == 2);
  CHECK(bm.stats().used == 3);

  auto b = seq(2, {1, 2, 3, 4, 5, 6, 7, 8, 42, 43});  // shares both full blocks
  PrefixHit hit;
  bm.find_prefix(b, hit);
  CHECK(hit.blocks == std::vector<int32_t>{0, 1});
  CHECK(hit.num_unreferenced == 0);
  run_prefill(bm, b);
  CHECK(b.num_cached_tokens == 8);
  CHECK(b.block_table == std::vector<int32_t>{0, 1, 3});
  CHECK(bm.ref_count(0) == 2);
  CHECK(bm.ref_count(1) == 2);
  CHECK(bm.ref_count(3) == 1);
  REQUIRE(bm.check_invariants().has_value());

  bm.release(a);
  CHECK(bm.ref_count(0) == 1);
  CHECK(bm.ref_count(2) == 0);
  bm.release(b);
  const auto st = bm.stats();
  CHECK(st.used == 0);
  CHECK(st.cached == 2);  // the two registered full blocks stay
  CHECK(st.free == 6);
  for (int32_t i = 0; i < 8; ++i) CHECK(bm.ref_count(i) == 0);
  REQUIRE(bm.check_invariants().has_value());
  CHECK(st.lookup_tokens == 19);
  CHECK(st.hit_tokens == 8);
}

TEST_CASE("prefix hits need equal tokens and an equal prefix", "[scheduler]") {
  BlockManager bm(16, 2, true);
  auto a = seq(1, {10, 11, 12, 13, 14});
  run_prefill(bm, a);
  PrefixHit hit;
  SECTION("a different first block stops the walk even when the second matches") {
    auto b = seq(2, {99, 11, 12, 13, 14});
    bm.find_prefix(b, hit);
    CHECK(hit.blocks.empty());
  }
  SECTION("a one-token difference inside a block") {
    auto b = seq(2, {10, 11, 12, 77, 14});
    bm.find_prefix(b, hit);
    CHECK(hit.blocks == std::vector<int32_t>{a.block_table[0]});
  }
  SECTION("the last prompt token is always computed") {
    auto b = seq(2, {10, 11, 12, 13});  // both blocks cached, yet one token must run
    bm.find_prefix(b, hit);
    CHECK(hit.blocks == std::vector<int32_t>{a.block_table[0]});
  }
  SECTION("uncomputed blocks are not in the cache") {
    auto c = seq(3, {50, 51, 52, 53, 54, 55});
    PrefixHit none;
    bm.find_prefix(c, none);
    bm.admit(c, none, 3);  // only the first 3 tokens scheduled
    c.num_computed_tokens += 3;
    bm.cache_computed_blocks(c);
    CHECK(c.num_cached_blocks == 1);
    auto d = seq(4, {50, 51, 52, 53, 54, 55, 56});
    bm.find_prefix(d, hit);
    CHECK(hit.blocks == std::vector<int32_t>{c.block_table[0]});
  }
  SECTION("disabled prefix caching never hits") {
    BlockManager off(16, 2, false);
    auto x = seq(1, {10, 11, 12, 13, 14});
    run_prefill(off, x);
    auto y = seq(2, {10, 11, 12, 13, 14});
    off.find_prefix(y, hit);
    CHECK(hit.blocks.empty());
    off.release(x);
    CHECK(off.stats().cached == 0);
  }
  REQUIRE(bm.check_invariants().has_value());
}

TEST_CASE("an equal block computed twice is cached once", "[scheduler]") {
  BlockManager bm(8, 2, true);
  auto a = seq(1, {1, 2, 3});
  auto b = seq(2, {1, 2, 4});
  PrefixHit none;
  // Both admitted in the same step, before either block is registered.
  bm.find_prefix(a, none);
  bm.admit(a, none, 3);
  bm.find_prefix(b, none);
  bm.admit(b, none, 3);
  a.num_computed_tokens = 3;
  b.num_computed_tokens = 3;
  bm.cache_computed_blocks(a);
  bm.cache_computed_blocks(b);
  bm.release(a);
  bm.release(b);
  CHECK(bm.stats().cached == 1);  // b's copy of {1, 2} went back to the free list
  CHECK(bm.stats().free == 7);
  REQUIRE(bm.check_invariants().has_value());
}

TEST_CASE("cached blocks are evicted least recently released first, only when needed", "[scheduler]") {
  BlockManager bm(4, 2, true);
  auto a = seq(1, {1, 2, 3});  // block {1,2} cached + 1 partial
  auto b = seq(2, {5, 6, 7});  // block {5,6} cached + 1 partial
  run_prefill(bm, a);
  run_prefill(bm, b);
  const int32_t a_block = a.block_table[0], b_block = b.block_table[0];
  bm.release(a);  // cached first: evicted first
  bm.release(b);
  CHECK(bm.stats().cached == 2);
  CHECK(bm.stats().free == 2);

  // Two fresh blocks come from the free list: nothing evicted.
  auto c = seq(3, {9, 9, 9});
  run_prefill(bm, c);
  CHECK(bm.stats().evictions == 0);
  CHECK(bm.stats().cached == 2);

  // A hit takes a cached block back without evicting it.
  auto d = seq(4, {5, 6, 8});
  PrefixHit hit;
  bm.find_prefix(d, hit);
  REQUIRE(hit.blocks == std::vector<int32_t>{b_block});
  CHECK(hit.num_unreferenced == 1);
  CHECK_FALSE(bm.can_admit(hit, 3));  // positions 2..4 need 2 more blocks: only a_block would be left
  CHECK(bm.can_admit(hit, 1));
  bm.admit(d, hit, 1);
  d.num_computed_tokens = 3;
  // d's partial block needed a fresh one: a_block was the only one left.
  CHECK(bm.stats().evictions == 1);
  CHECK(d.block_table == std::vector<int32_t>{b_block, a_block});
  auto e = seq(5, {1, 2, 3});
  bm.find_prefix(e, hit);
  CHECK(hit.blocks.empty());  // {1,2} was evicted
  CHECK_FALSE(bm.allocate_slots(e, 1));  // pool exhausted: nothing changes
  CHECK(e.block_table.empty());
  REQUIRE(bm.check_invariants().has_value());
  bm.release(c);
  bm.release(d);
  CHECK(bm.stats().used == 0);
  REQUIRE(bm.check_invariants().has_value());
}

TEST_CASE("reset_prefix_cache frees every cached block", "[scheduler]") {
  BlockManager bm(6, 2, true);
  auto a = seq(1, {1, 2, 3, 4, 5});
  run_prefill(bm, a);
  bm.release(a);
  CHECK(bm.stats().cached == 2);
  bm.reset_prefix_cache();
  CHECK(bm.stats().cached == 0);
  CHECK(bm.stats().free == 6);
  REQUIRE(bm.check_invariants().has_value());
  auto b = seq(2, {1, 2, 3, 4, 5});
  PrefixHit hit;
  bm.find_prefix(b, hit);
  CHECK(hit.blocks.empty());
}

TEST_CASE("block hashes chain over the parent", "[scheduler]") {
  const std::vector<int32_t> x{1, 2, 3, 4};
  CHECK(hash_block(kRootBlockHash, x) == hash_block(kRootBlockHash, x));
  CHECK(hash_block(kRootBlockHash, x) != hash_block(kRootBlockHash + 1, x));
  const std::vector<int32_t> y{1, 2, 3, 5};
  CHECK(hash_block(kRootBlockHash, x) != hash_block(kRootBlockHash, y));
}

TEST_CASE("BlockHashIndex agrees with std::unordered_map under random inserts and erases", "[scheduler]") {
  constexpr int32_t kMax = 300;
  BlockHashIndex index(kMax);
  std::unordered_map<uint64_t, int32_t> ref;
  std::mt19937_64 rng(42);
  // Keys with few distinct low bits make long probe runs (the hard case for
  // erase); homes at the end of the 1024-slot table make the runs wrap around.
  auto key = [&] { return (rng() % 64) << 40 | ((1016 + rng() % 16) & 1023); };
  for (int i = 0; i < 20000; ++i) {
    const uint64_t k = key();
    if (rng() % 3 != 0 && ref.size() < size_t(kMax) && ref.count(k) == 0) {
      const auto v = int32_t(rng() % 1000);
      index.insert(k, v);
      ref.emplace(k, v);
    } else {
      index.erase(k);
      ref.erase(k);
    }
    REQUIRE(index.size() == ref.size());
    if (i % 97 == 0) {
      for (const auto& [rk, rv] : ref) REQUIRE(index.find(rk) == rv);
      for (int j = 0; j < 50; ++j) {
        const uint64_t probe = key();
        REQUIRE(index.find(probe) == (ref.count(probe) ? ref[probe] : -1));
      }
    }
  }
}
