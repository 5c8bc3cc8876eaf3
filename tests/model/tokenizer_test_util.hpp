// Shared helpers of the tokenizer tests: loading the committed tokenizers
// and golden JSON files (paths from tests/support/test_data.hpp).
#pragma once

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "photon/tokenizer.hpp"
#include "support/test_data.hpp"

namespace photon::test {

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline nlohmann::json read_json(const std::string& path) { return nlohmann::json::parse(read_file(path)); }

// Loaded once per process and shared by the test cases (the tokenizer is
// immutable and thread-safe after load).
inline const Tokenizer& tokenizer(const std::string& name) {
  static std::map<std::string, Tokenizer> cache;
  auto it = cache.find(name);
  if (it == cache.end()) {
    const std::string dir = name == "stories260K" ? stories_dir() : tokenizer_dir(name);
    auto t = Tokenizer::load(dir);
    INFO(dir << ": " << (t ? std::string() : t.error().message));
    REQUIRE(t.has_value());
    it = cache.emplace(name, std::move(*t)).first;
  }
  return it->second;
}

inline std::vector<int32_t> ids_of(const nlohmann::json& j) { return j.get<std::vector<int32_t>>(); }

}  // namespace photon::test
