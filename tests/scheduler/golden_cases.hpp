// The golden greedy continuations of tests/data/golden/<model>/reference.json.
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/test_data.hpp"

namespace photon::test {

struct GoldenCase {
  std::vector<int32_t> prompt;
  std::vector<int32_t> greedy;  // argmax continuation, no stop token
};

inline std::vector<GoldenCase> load_golden_cases(const std::string& model) {
  std::ifstream in(golden_dir(model) + "/reference.json");
  const auto j = nlohmann::json::parse(in);
  std::vector<GoldenCase> out;
  for (const auto& c : j.at("cases"))
    out.push_back({c.at("prompt_ids").get<std::vector<int32_t>>(), c.at("greedy_ids").get<std::vector<int32_t>>()});
  return out;
}

}  // namespace photon::test
