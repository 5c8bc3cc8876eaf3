// Model::load on broken model folders (written into a temporary folder):
// every failure has its own Errc and a message naming the file and tensor or
// key, and none crashes.
#include <catch2/catch.hpp>

#include <filesystem>

#include "core/cpu_backend.hpp"
#include "model/model.hpp"
#include "support/checkpoint_writer.hpp"
#include "support/model_driver.hpp"

using namespace photon;
using namespace photon::test;

namespace {

nlohmann::json small_llama() {
  return {{"architectures", {"LlamaForCausalLM"}}, {"vocab_size", 97},   {"hidden_size", 16},
          {"intermediate_size", 24},              {"num_hidden_layers", 2}, {"num_attention_heads", 2},
          {"num_key_value_heads", 1},            {"max_position_embeddings", 64}, {"rms_norm_eps", 1e-5},
          {"tie_word_embeddings", false}};
}

// Loads `dir` and expects the error `code` with every string of `named` in its message.
void expect_load_error(const std::string& dir, Errc code, std::initializer_list<std::string> named) {
  auto backend = must(make_cpu_backend({}));
  auto r = Model::load(dir, *backend);
  REQUIRE_FALSE(r.has_value());
  INFO(r.error().message);
  CHECK(errc_name(r.error().code) == errc_name(code));
  for (const auto& n : named) CHECK_THAT(r.error().message, Catch::Contains(n));
}

StTensor* find(std::vector<StTensor>& ts, const std::string& name) {
  for (auto& t : ts)
    if (t.name == name) return &t;
  throw std::runtime_error("no tensor " + name);
}

}  // namespace

TEST_CASE("load errors: the folder and its files must exist", "[model]") {
  TempDir dir;
  expect_load_error(dir.file("absent"), Errc::file_not_found, {"absent", "no such model folder"});
  expect_load_error(dir.str(), Errc::file_not_found, {"config.json"});
  write_file(dir.file("config.json"), small_llama().dump());
  expect_load_error(dir.str(), Errc::file_not_found, {"model.safetensors"});
}

TEST_CASE("load errors: config.json problems", "[model]") {
  TempDir dir;
  write_checkpoint(dir.str(), small_llama());
  SECTION("unknown architecture") {
    auto j = small_llama();
    j["architectures"] = {"GPT2LMHeadModel"};
    write_file(dir.file("config.json"), j.dump());
    expect_load_error(dir.str(), Errc::unknown_architecture, {"GPT2LMHeadModel", "config.json"});
  }
  SECTION("missing key") {
    auto j = small_llama();
    j.erase("intermediate_size");
    write_file(dir.file("config.json"), j.dump());
    expect_load_error(dir.str(), Errc::missing_config_key, {"intermediate_size", "config.json"});
  }
  SECTION("malformed JSON") {
    write_file(dir.file("config.json"), "{\"architectures\": [\"LlamaForCausalLM\"], ");
    expect_load_error(dir.str(), Errc::bad_json, {"config.json"});
  }
  SECTION("a config the weights do not fit") {
    auto j = small_llama();
    j["hidden_size"] = 32;
    write_file(dir.file("config.json"), j.dump());
    expect_load_error(dir.str(), Errc::shape_mismatch, {"model.embed_tokens.weight", "model.safetensors"});
  }
}

TEST_CASE("load errors: tensors missing or of the wrong shape or dtype", "[model]") {
  TempDir dir;
  SECTION("missing tensor") {
    write_checkpoint(dir.str(), small_llama(), 1, DType::bf16, 1, [](std::vector<StTensor>& ts) {
                       std::erase_if(ts, [](const StTensor& t) { return t.name == "model.layers.1.mlp.up_proj.weight"; });
                     });
    expect_load_error(dir.str(), Errc::missing_tensor, {"model.layers.1.mlp.up_proj.weight", dir.str()});
  }
  SECTION("untied model without lm_head") {
    write_checkpoint(dir.str(), small_llama(), 1, DType::bf16, 1, [](std::vector<StTensor>& ts) {
                       std::erase_if(ts, [](const StTensor& t) { return t.name == "lm_head.weight"; });
                     });
    expect_load_error(dir.str(), Errc::missing_tensor, {"lm_head.weight"});
  }
  SECTION("wrong shape") {
    write_checkpoint(dir.str(), small_llama(), 1, DType::bf16, 1, [](std::vector<StTensor>& ts) {
                       StTensor* t = find(ts, "model.layers.0.self_attn.k_proj.weight");  // [8, 16] -> [16, 8]
                       t->shape = {16, 8};
                     });
    expect_load_error(dir.str(), Errc::shape_mismatch,
                      {"model.layers.0.self_attn.k_proj.weight", "[16, 8]", "[8, 16]", "model.safetensors"});
  }
  SECTION("integer dtype for a weight") {
    write_checkpoint(dir.str(), small_llama(), 1, DType::bf16, 1, [](std::vector<StTensor>& ts) {
                       StTensor* t = find(ts, "model.norm.weight");
                       t->dtype = "I32";
                       t->bytes = std::string(16 * 4, '\0');
                     });
    expect_load_error(dir.str(), Errc::shape_mismatch, {"model.norm.weight", "i32"});
  }
}

TEST_CASE("load errors: malformed safetensors files", "[model]") {
  TempDir dir;
  write_checkpoint(dir.str(), small_llama());
  const std::string path = dir.file("model.safetensors");
  const std::string good = read_file_bytes(path);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | uint8_t(good[size_t(i)]);
  const std::string header = good.substr(8, size_t(header_len));
  const std::string data = good.substr(8 + size_t(header_len));

  SECTION("truncated file") {
    write_file(path, good.substr(0, good.size() / 2));
    expect_load_error(dir.str(), Errc::truncated_file, {"model.safetensors"});
    write_file(path, good.substr(0, 5));
    expect_load_error(dir.str(), Errc::truncated_file, {"model.safetensors"});
  }
  SECTION("header length past the end") {
    write_file(path, safetensors_raw(header, "").substr(0, 8) + header.substr(0, 10));
    expect_load_error(dir.str(), Errc::header_out_of_bounds, {"model.safetensors"});
  }
  SECTION("bad JSON header") {
    std::string broken = header;
    broken[0] = '[';
    write_file(path, safetensors_raw(broken, data));
    expect_load_error(dir.str(), Errc::bad_json, {"model.safetensors"});
  }
  SECTION("overlapping offsets") {
    auto h = nlohmann::json::parse(header);
    h["model.norm.weight"]["data_offsets"] = {0, 32};  // on top of the first tensor's bytes
    write_file(path, safetensors_raw(h.dump(), data));
    expect_load_error(dir.str(), Errc::bad_offsets, {"model.norm.weight", "overlap"});
  }
  SECTION("offsets outside the data") {
    auto h = nlohmann::json::parse(header);
    const uint64_t end = data.size() + 1000;
    h["model.norm.weight"]["data_offsets"] = {end - 32, end};
    write_file(path, safetensors_raw(h.dump(), data));
    expect_load_error(dir.str(), Errc::bad_offsets, {"model.norm.weight"});
  }
  SECTION("unknown dtype") {
    auto h = nlohmann::json::parse(header);
    h["model.norm.weight"]["dtype"] = "F8_E4M3";
    h["model.norm.weight"]["shape"] = {32};
    write_file(path, safetensors_raw(h.dump(), data));
    expect_load_error(dir.str(), Errc::unknown_dtype, {"model.norm.weight", "F8_E4M3"});
  }
}

TEST_CASE("load errors: a sharded index pointing at a missing shard", "[model]") {
  TempDir dir;
  write_checkpoint(dir.str(), small_llama(), 1, DType::bf16, 2);
  auto ok_backend = must(make_cpu_backend({}));
  CHECK(Model::load(dir.str(), *ok_backend).has_value());
  std::filesystem::remove(dir.file("model-00002-of-00002.safetensors"));
  expect_load_error(dir.str(), Errc::file_not_found, {"model-00002-of-00002.safetensors", "index.json"});
}
