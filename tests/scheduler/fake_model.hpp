// FakeKvModel: a deterministic stand-in for a model forward pass that uses
// its paged KV cache the way a real one does, so scheduler bugs show up as
// wrong tokens.
//
// The "KV" of a slot is the (token id, position) written there. forward()
// first writes every new token at its plan.slot_mapping slot, then for each
// logits row reads the sequence's whole context back through its block
// table (positions 0 .. context_len-1), checks that each slot holds the
// position it should, and picks next = fake_next_token(context tokens). A
// stale or wrongly shared block therefore changes the output, exactly as it
// would change a transformer's logits.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/batch_plan.hpp"
#include "core/try.hpp"
#include "photon/result.hpp"

namespace photon::test {

// The reference continuation rule: a hash of the whole context, mod vocab.
inline int32_t fake_next_token(std::span<const int32_t> context, int32_t vocab) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (int32_t t : context) {
    h ^= uint64_t(uint32_t(t));
    h *= 0x100000001b3ull;
    h ^= h >> 29;
  }
  return int32_t(h % uint64_t(vocab));
}

// Greedy continuation of `prompt` by fake_next_token, computed directly.
inline std::vector<int32_t> fake_reference(std::vector<int32_t> prompt, int32_t max_tokens, int32_t vocab) {
  std::vector<int32_t> out;
  for (int32_t i = 0; i < max_tokens; ++i) {
    const int32_t t = fake_next_token(prompt, vocab);
    out.push_back(t);
    prompt.push_back(t);
  }
  return out;
}

class FakeKvModel {
 public:
  FakeKvModel(int32_t num_blocks, int32_t block_size, int32_t vocab)
      : block_size_(block_size), vocab_(vocab), tok_(size_t(num_blocks) * size_t(block_size), -1),
        pos_(tok_.size(), -1) {}

  int32_t vocab() const noexcept { return vocab_; }

  // next[r] for each plan.logits_rows[r].
  Result<void> forward(const BatchPlan& plan, std::vector<int32_t>& next) {
    PHOTON_TRY(plan.validate(block_size_, int32_t(tok_.size()) / block_size_));
    for (int32_t t = 0; t < plan.num_tokens(); ++t) {
      tok_[size_t(plan.slot_mapping[size_t(t)])] = plan.input_ids[size_t(t)];
      pos_[size_t(plan.slot_mapping[size_t(t)])] = plan.positions[size_t(t)];
    }
    next.clear();
    size_t row = 0;
    std::vector<int32_t> context;
    for (int32_t s = 0; s < plan.num_seqs() && row < plan.logits_rows.size(); ++s) {
      const int32_t last = plan.query_start[size_t(s) + 1] - 1;
      if (plan.logits_rows[row] != last) continue;
      ++row;
      context.clear();
      for (int32_t p = 0; p < plan.context_lens[size_t(s)]; ++p) {
        const int32_t block = plan.block_tables[size_t(s) * size_t(plan.max_blocks_per_seq) + size_t(p / block_size_)];
        const size_t slot = size_t(block) * size_t(block_size_) + size_t(p % block_size_);
        if (pos_[slot] != p)
          return fail(Errc::internal, "fake model: slot " + std::to_string(slot) + " holds position " +
                                          std::to_string(pos_[slot]) + ", expected " + std::to_string(p));
        context.push_back(tok_[slot]);
      }
      next.push_back(fake_next_token(context, vocab_));
    }
    if (row != plan.logits_rows.size()) return fail(Errc::internal, "fake model: a logits row is not a sequence's last token");
    return {};
  }

 private:
  int32_t block_size_;
  int32_t vocab_;
  std::vector<int32_t> tok_;
  std::vector<int32_t> pos_;
};

}  // namespace photon::test
