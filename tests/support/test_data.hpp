// Paths of the committed test data (set by tests/CMakeLists.txt) and of the
// optional GPU-only fixtures (environment variable PHOTON_GPU_FIXTURES: a
// folder holding llama3-small-hd64/ and qwen3-small-hd128/, e.g. a copy of
// ../shared/data/golden).
#pragma once

#include <cstdlib>
#include <string>

namespace photon::test {

// The environment variables of the same names override the compiled-in paths
// (for binaries built in one checkout and run in another, e.g. on the GPU machine).
inline std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : std::string(fallback);
}
inline std::string data_dir() { return env_or("PHOTON_TEST_DATA_DIR", PHOTON_TEST_DATA_DIR); }
inline std::string golden_dir(const std::string& name) { return data_dir() + "/golden/" + name; }
// A tokenizer folder (tokenizer.json unpacked, tokenizer_config.json, golden/).
inline std::string tokenizer_dir(const std::string& name) {
  return env_or("PHOTON_TEST_DATA_BUILD_DIR", PHOTON_TEST_DATA_BUILD_DIR) + "/tokenizers/" + name;
}
inline std::string models_dir() { return env_or("PHOTON_MODELS_DIR", PHOTON_MODELS_DIR); }
inline std::string stories_dir() { return models_dir() + "/stories260K"; }
inline std::string stories_untied_dir() { return data_dir() + "/stories260K-untied"; }
// config.json files of released checkpoints (Llama-3.2-1B.json, Qwen3-8B.json, ...).
inline std::string configs_dir() { return data_dir() + "/configs"; }
// Empty when PHOTON_GPU_FIXTURES is unset.
inline std::string gpu_fixtures_dir() {
  const char* v = std::getenv("PHOTON_GPU_FIXTURES");
  return v ? std::string(v) : std::string();
}

}  // namespace photon::test
