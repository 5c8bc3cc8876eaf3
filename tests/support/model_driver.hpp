// Test driver of Model::forward without the engine: sequences with KV blocks
// from a shuffled free list (so block tables are never contiguous), one
// hand-built BatchPlan per step, logits copied back to the host, greedy
// argmax on the host.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <stdexcept>
#include <vector>

#include "core/backend.hpp"
#include "core/batch_plan.hpp"
#include "model/model.hpp"

namespace photon::test {

// Unwraps a Result in test code (throws with the error message, which Catch reports).
template <class T>
T must(Result<T>&& r) {
  if (!r) throw std::runtime_error(std::string(errc_name(r.error().code)) + ": " + r.error().message);
  if constexpr (!std::is_void_v<T>) return std::move(*r);
}

using Logits = std::vector<std::vector<float>>;  // [rows][V]

inline int32_t argmax(const std::vector<float>& row) {
  return int32_t(std::max_element(row.begin(), row.end()) - row.begin());  // first maximum: ties to the lowest id
}

class ModelDriver {
 public:
  ModelDriver(Model& model, Backend& backend, int32_t num_blocks, int32_t block_size = 16, uint32_t seed = 7)
      : model_(model), backend_(backend), block_size_(block_size), num_blocks_(num_blocks) {
    must(model_.init_kv_cache(num_blocks, block_size));
    free_.resize(size_t(num_blocks));
    std::iota(free_.begin(), free_.end(), 0);
    std::shuffle(free_.begin(), free_.end(), std::mt19937(seed));
  }

  int32_t new_sequence() {
    seqs_.push_back({});
    return int32_t(seqs_.size()) - 1;
  }

  // The new tokens of one sequence in a step; logits for all of them or only the last.
  struct Chunk {
    int32_t seq;
    std::vector<int32_t> tokens;
    bool all_logits = false;
  };

  // One forward over `chunks` (distinct sequences); returns each chunk's logits rows.
  std::vector<Logits> step(const std::vector<Chunk>& chunks) {
    BatchPlan plan;
    std::vector<size_t> rows_per_chunk;
    for (const Chunk& c : chunks) {
      Seq& s = seqs_.at(size_t(c.seq));
      const int32_t first = s.len;
      const int32_t n = int32_t(c.tokens.size());
      while (int32_t(s.blocks.size()) * block_size_ < first + n) {
        if (free_.empty()) throw std::runtime_error("test KV pool exhausted");
        s.blocks.push_back(free_.back());
        free_.pop_back();
      }
      const int32_t row0 = plan.num_tokens();
      plan.add_sequence(c.tokens.data(), n, first, s.blocks.data(), int32_t(s.blocks.size()), block_size_,
                        !c.all_logits);
      if (c.all_logits)
        for (int32_t i = 0; i < n; ++i) plan.logits_rows.push_back(row0 + i);
      rows_per_chunk.push_back(c.all_logits ? size_t(n) : 1);
      s.len += n;
    }
    plan.finalize();
    must(plan.validate(block_size_, num_blocks_));
    const StepPlanView view = must(backend_.stage_plan(plan));
    const Tensor logits = must(model_.forward(view));
    const int64_t V = model_.config().vocab_size;
    std::vector<float> host(size_t(plan.num_logits()) * size_t(V));
    must(backend_.copy_to_host(host.data(), logits.data, host.size() * sizeof(float)));
    std::vector<Logits> out;
    size_t row = 0;
    for (size_t r : rows_per_chunk) {
      Logits l;
      for (size_t i = 0; i < r; ++i, ++row)
        l.emplace_back(host.begin() + std::ptrdiff_t(row * size_t(V)), host.begin() + std::ptrdiff_t((row + 1) * size_t(V)));
      out.push_back(std::move(l));
    }
    return out;
  }

  // Feeds `prompt` to a new sequence in chunks of `chunk` tokens (0 = whole)
  // and returns the logits at every prompt position.
  Logits prefill_all(const std::vector<int32_t>& prompt, size_t chunk = 0) {
    const int32_t s = new_sequence();
    Logits all;
    const size_t step_len = chunk == 0 ? prompt.size() : chunk;
    for (size_t b = 0; b < prompt.size(); b += step_len) {
      const size_t e = std::min(prompt.size(), b + step_len);
      auto rows = step({{s, std::vector<int32_t>(prompt.begin() + std::ptrdiff_t(b), prompt.begin() + std::ptrdiff_t(e)),
                         true}})[0];
      for (auto& r : rows) all.push_back(std::move(r));
    }
    return all;
  }

  // Greedy continuation of `steps` tokens after `prompt` (fed whole).
  std::vector<int32_t> greedy(const std::vector<int32_t>& prompt, int32_t steps) {
    const int32_t s = new_sequence();
    std::vector<int32_t> out;
    int32_t next = argmax(step({{s, prompt, false}})[0][0]);
    for (int32_t i = 0; i < steps; ++i) {
      out.push_back(next);
      if (i + 1 < steps) next = argmax(step({{s, {next}, false}})[0][0]);
    }
    return out;
  }

 private:
  struct Seq {
    std::vector<int32_t> blocks;
    int32_t len = 0;
  };
  Model& model_;
  Backend& backend_;
  int32_t block_size_;
  int32_t num_blocks_;
  std::vector<int32_t> free_;
  std::vector<Seq> seqs_;
};

// max |a - b| over all rows, and max |b| (b is the reference).
struct Diff {
  double max_abs_diff = 0;
  double max_abs_ref = 0;
  bool within(double rel) const { return max_abs_diff <= rel * max_abs_ref; }
};

template <class A, class B>
Diff compare_rows(const std::vector<std::vector<A>>& got, const std::vector<std::vector<B>>& ref) {
  if (got.size() != ref.size()) throw std::runtime_error("row counts differ");
  Diff d;
  for (size_t r = 0; r < ref.size(); ++r) {
    if (got[r].size() != ref[r].size()) throw std::runtime_error("row lengths differ");
    for (size_t i = 0; i < ref[r].size(); ++i) {
      d.max_abs_diff = std::max(d.max_abs_diff, std::abs(double(got[r][i]) - double(ref[r][i])));
      d.max_abs_ref = std::max(d.max_abs_ref, std::abs(double(ref[r][i])));
    }
  }
  return d;
}

}  // namespace photon::test
