#include "cli_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <numeric>
#include <thread>

#include "core/cpu_backend.hpp"
#include "core/try.hpp"

namespace photon::cli {

namespace {
constexpr int32_t kBlockSize = 16;

// One sequence's KV blocks 0..n-1 for `positions` tokens.
std::vector<int32_t> block_ids_for(int64_t positions) {
  std::vector<int32_t> ids(size_t((positions + kBlockSize - 1) / kBlockSize));
  std::iota(ids.begin(), ids.end(), 0);
  return ids;
}

// Runs tokens [first, first + n) of the sequence through the model; returns
// the logits of every new position (all_rows) or of the last one, on the host.
Result<std::vector<float>> run_step(LoadedModel& m, const std::vector<int32_t>& blocks, const int32_t* ids, int32_t n,
                                    int32_t first, bool all_rows) {
  BatchPlan plan;
  plan.add_sequence(ids, n, first, blocks.data(), int32_t(blocks.size()), kBlockSize, !all_rows);
  if (all_rows)
    for (int32_t i = 0; i < n; ++i) plan.logits_rows.push_back(i);
  plan.finalize();
  PHOTON_ASSIGN_OR_RETURN(StepPlanView view, m.backend->stage_plan(plan));
  PHOTON_ASSIGN_OR_RETURN(Tensor logits, m.model->forward(view));
  std::vector<float> host(size_t(logits.numel()));
  PHOTON_TRY(m.backend->copy_to_host(host.data(), logits.data, host.size() * sizeof(float)));
  return host;
}
}  // namespace

Result<LoadedModel> load_model(const std::string& dir, int32_t threads) {
  if (threads < 0) threads = int32_t(std::max(1u, std::thread::hardware_concurrency()) - 1);
  LoadedModel m;
  PHOTON_ASSIGN_OR_RETURN(m.backend, make_cpu_backend({.num_threads = threads}));
  PHOTON_ASSIGN_OR_RETURN(m.model, Model::load(dir, *m.backend));
  return m;
}

Result<std::vector<int32_t>> parse_token_list(const std::string& text, int32_t vocab_size) {
  std::vector<int32_t> ids;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find(',', begin);
    if (end == std::string::npos) end = text.size();
    std::string_view item(text.data() + begin, end - begin);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    int64_t v = 0;
    auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || ptr != item.data() + item.size())
      return fail(Errc::invalid_argument,
                  fmt::format("--tokens: '{}' (item {}) is not an integer token id", item, ids.size()));
    if (v < 0 || v >= vocab_size)
      return fail(Errc::out_of_range, fmt::format("--tokens: token id {} (item {}) is outside the vocabulary [0, {})",
                                                  v, ids.size(), vocab_size));
    ids.push_back(int32_t(v));
    begin = end + 1;
  }
  return ids;
}

Result<void> check_positions(const ModelConfig& config, int64_t total, const std::string& what) {
  if (total > config.max_position_embeddings)
    return fail(Errc::capacity_exceeded, fmt::format("{} needs {} positions; the model's max_position_embeddings is {}",
                                                     what, total, config.max_position_embeddings));
  return {};
}

Result<std::vector<std::vector<float>>> prompt_logits(LoadedModel& m, std::span<const int32_t> tokens) {
  const int32_t n = int32_t(tokens.size());
  const std::vector<int32_t> blocks = block_ids_for(n);
  PHOTON_TRY(m.model->init_kv_cache(int32_t(blocks.size()), kBlockSize));
  PHOTON_ASSIGN_OR_RETURN(std::vector<float> flat, run_step(m, blocks, tokens.data(), n, 0, /*all_rows=*/true));
  const size_t V = size_t(m.model->config().vocab_size);
  std::vector<std::vector<float>> rows;
  for (size_t r = 0; r < size_t(n); ++r)
    rows.emplace_back(flat.begin() + std::ptrdiff_t(r * V), flat.begin() + std::ptrdiff_t((r + 1) * V));
  return rows;
}

}  // namespace photon::cli
