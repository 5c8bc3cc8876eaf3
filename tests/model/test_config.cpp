// config.json -> ModelConfig: the committed checkpoints and released configs,
// both RoPE forms, defaults, every error, and the inv_freq formulas.
#include <catch2/catch.hpp>

#include <cmath>
#include <nlohmann/json.hpp>

#include "model/config.hpp"
#include "support/safetensors_writer.hpp"
#include "support/test_data.hpp"

using photon::Errc;
using photon::ModelConfig;
using photon::RopeType;

namespace {

nlohmann::json llama_json() {
  return nlohmann::json::parse(photon::test::read_file_bytes(photon::test::golden_dir("llama3-tiny") + "/config.json"));
}

photon::Result<ModelConfig> parse(const nlohmann::json& j) { return ModelConfig::parse(j.dump(), "config.json"); }

void check_error(const nlohmann::json& j, Errc code, const std::string& key) {
  auto r = parse(j);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code == code);
  CHECK_THAT(r.error().message, Catch::Contains(key));
}

}  // namespace

TEST_CASE("config: llama3-tiny (GQA, tied, llama3 RoPE scaling, eos list)", "[model]") {
  auto c = ModelConfig::load(photon::test::golden_dir("llama3-tiny"));
  REQUIRE(c.has_value());
  CHECK(c->architecture == "LlamaForCausalLM");
  CHECK(c->vocab_size == 1024);
  CHECK(c->hidden_size == 64);
  CHECK(c->intermediate_size == 192);
  CHECK(c->num_layers == 2);
  CHECK(c->num_heads == 4);
  CHECK(c->num_kv_heads == 2);
  CHECK(c->head_dim == 16);
  CHECK(c->max_position_embeddings == 4096);
  CHECK(c->rms_norm_eps == 1e-5f);
  CHECK(c->tie_word_embeddings);
  CHECK_FALSE(c->qk_norm);
  CHECK(c->rope.type == RopeType::llama3);
  CHECK(c->rope.theta == 500000.0);
  CHECK(c->rope.factor == 32.0);
  CHECK(c->rope.original_max_position_embeddings == 64);
  CHECK(c->eos_token_ids == std::vector<int32_t>{2, 3});
  CHECK(c->bos_token_id == 1);
  CHECK(c->qkv_dim() == (4 + 2 * 2) * 16);
}

TEST_CASE("config: qwen3-tiny (q/k norm, head_dim independent of hidden, untied)", "[model]") {
  auto c = ModelConfig::load(photon::test::golden_dir("qwen3-tiny"));
  REQUIRE(c.has_value());
  CHECK(c->architecture == "Qwen3ForCausalLM");
  CHECK(c->qk_norm);
  CHECK(c->head_dim == 32);
  CHECK(c->q_dim() == 128);
  CHECK_FALSE(c->tie_word_embeddings);
  CHECK(c->rope.type == RopeType::standard);
  CHECK(c->rope.theta == 1e6);
  CHECK(c->rms_norm_eps == 1e-6f);
  CHECK(c->eos_token_ids == std::vector<int32_t>{2});
}

TEST_CASE("config: stories260K and the released configs parse", "[model]") {
  auto s = ModelConfig::load(photon::test::stories_dir());
  REQUIRE(s.has_value());
  CHECK(s->head_dim == 8);
  CHECK(s->tie_word_embeddings);
  auto u = ModelConfig::load(photon::test::stories_untied_dir());
  REQUIRE(u.has_value());
  CHECK_FALSE(u->tie_word_embeddings);

  for (const char* name : {"Llama-3.2-1B", "Llama-3.2-3B", "Llama-3.1-8B", "Qwen3-0.6B", "Qwen3-1.7B", "Qwen3-4B",
                           "Qwen3-8B"}) {
    INFO(name);
    const std::string path = photon::test::configs_dir() + "/" + name + ".json";
    auto c = ModelConfig::parse(photon::test::read_file_bytes(path), path);
    REQUIRE(c.has_value());
    CHECK(c->num_heads % c->num_kv_heads == 0);
  }
  const std::string l1b = photon::test::configs_dir() + "/Llama-3.2-1B.json";
  auto c = ModelConfig::parse(photon::test::read_file_bytes(l1b), l1b);
  REQUIRE(c.has_value());
  CHECK(c->eos_token_ids == std::vector<int32_t>{128001, 128008, 128009});
  CHECK(c->head_dim == 64);
  CHECK(c->rope.original_max_position_embeddings == 8192);
  const std::string q8 = photon::test::configs_dir() + "/Qwen3-8B.json";
  auto q = ModelConfig::parse(photon::test::read_file_bytes(q8), q8);
  REQUIRE(q.has_value());
  CHECK(q->head_dim == 128);
  CHECK(q->qk_norm);
}

TEST_CASE("config: transformers v5 rope_parameters equals the v4 form", "[model]") {
  nlohmann::json v4 = llama_json();
  nlohmann::json v5 = v4;
  v5.erase("rope_scaling");
  v5.erase("rope_theta");
  v5["rope_parameters"] = {{"rope_type", "llama3"},  {"rope_theta", 500000.0},
                           {"factor", 32.0},         {"low_freq_factor", 1.0},
                           {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 64}};
  auto a = parse(v4);
  auto b = parse(v5);
  REQUIRE(a.has_value());
  REQUIRE(b.has_value());
  CHECK(b->rope.type == RopeType::llama3);
  CHECK(b->rope.theta == a->rope.theta);
  CHECK(photon::rope_inv_freq(a->rope, 16) == photon::rope_inv_freq(b->rope, 16));

  nlohmann::json v5_default = v4;
  v5_default.erase("rope_scaling");
  v5_default["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1234.0}};
  auto d = parse(v5_default);
  REQUIRE(d.has_value());
  CHECK(d->rope.type == RopeType::standard);
  CHECK(d->rope.theta == 1234.0);

  nlohmann::json legacy_type = v4;  // older v4 files spell the key "type"
  legacy_type["rope_scaling"].erase("rope_type");
  legacy_type["rope_scaling"]["type"] = "llama3";
  auto t = parse(legacy_type);
  REQUIRE(t.has_value());
  CHECK(t->rope.type == RopeType::llama3);
}

TEST_CASE("config: transformers' defaults for absent keys", "[model]") {
  nlohmann::json j = llama_json();
  for (const char* key : {"head_dim", "num_key_value_heads", "rms_norm_eps", "rope_theta", "rope_scaling",
                          "max_position_embeddings", "tie_word_embeddings", "eos_token_id", "bos_token_id"})
    j.erase(key);
  auto c = parse(j);
  REQUIRE(c.has_value());
  CHECK(c->head_dim == 64 / 4);
  CHECK(c->num_kv_heads == 4);
  CHECK(c->rms_norm_eps == 1e-6f);
  CHECK(c->rope.theta == 10000.0);
  CHECK(c->rope.type == RopeType::standard);
  CHECK(c->max_position_embeddings == 2048);
  CHECK_FALSE(c->tie_word_embeddings);
  CHECK(c->eos_token_ids == std::vector<int32_t>{2});
  nlohmann::json mqa = llama_json();
  mqa["num_key_value_heads"] = 1;
  auto m = parse(mqa);
  REQUIRE(m.has_value());
  CHECK(m->num_kv_heads == 1);
  CHECK(m->qkv_dim() == (4 + 2) * 16);
}

TEST_CASE("config: errors name the key", "[model]") {
  SECTION("missing keys") {
    for (const char* key : {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                            "num_attention_heads", "architectures"}) {
      nlohmann::json j = llama_json();
      j.erase(key);
      check_error(j, Errc::missing_config_key, key);
    }
    nlohmann::json j = llama_json();
    j["rope_scaling"].erase("factor");
    check_error(j, Errc::missing_config_key, "rope_scaling.factor");
    j = llama_json();
    j["rope_scaling"].erase("rope_type");
    check_error(j, Errc::missing_config_key, "rope_scaling.rope_type");
  }
  SECTION("wrong types and ranges") {
    nlohmann::json j = llama_json();
    j["hidden_size"] = "64";
    check_error(j, Errc::invalid_config, "hidden_size");
    j = llama_json();
    j["num_hidden_layers"] = 0;
    check_error(j, Errc::invalid_config, "num_hidden_layers");
    j = llama_json();
    j["vocab_size"] = 12.5;
    check_error(j, Errc::invalid_config, "vocab_size");
    j = llama_json();
    j["num_key_value_heads"] = 3;
    check_error(j, Errc::invalid_config, "num_key_value_heads");
    j = llama_json();
    j["head_dim"] = 15;
    check_error(j, Errc::invalid_config, "head_dim");
    j = llama_json();
    j.erase("head_dim");
    j["hidden_size"] = 66;
    check_error(j, Errc::invalid_config, "head_dim");
    j = llama_json();
    j["rms_norm_eps"] = -1.0;
    check_error(j, Errc::invalid_config, "rms_norm_eps");
    j = llama_json();
    j["eos_token_id"] = {2, "x"};
    check_error(j, Errc::invalid_config, "eos_token_id");
    j = llama_json();
    j["tie_word_embeddings"] = 1;
    check_error(j, Errc::invalid_config, "tie_word_embeddings");
    j = llama_json();
    j["rope_scaling"]["high_freq_factor"] = 0.5;
    check_error(j, Errc::invalid_config, "high_freq_factor");
    j = llama_json();
    j["architectures"] = "LlamaForCausalLM";
    check_error(j, Errc::invalid_config, "architectures");
  }
  SECTION("unknown architecture") {
    nlohmann::json j = llama_json();
    j["architectures"] = {"MistralForCausalLM"};
    check_error(j, Errc::unknown_architecture, "MistralForCausalLM");
  }
  SECTION("valid settings photon does not serve") {
    nlohmann::json j = llama_json();
    j["rope_scaling"]["rope_type"] = "yarn";
    check_error(j, Errc::unsupported, "yarn");
    j = llama_json();
    j["attention_bias"] = true;
    check_error(j, Errc::unsupported, "attention_bias");
    j = llama_json();
    j["hidden_act"] = "gelu";
    check_error(j, Errc::unsupported, "hidden_act");
  }
  SECTION("malformed or missing file") {
    auto bad = ModelConfig::parse("{\"architectures\": [", "config.json");
    REQUIRE_FALSE(bad.has_value());
    CHECK(bad.error().code == Errc::bad_json);
    photon::test::TempDir dir;
    auto missing = ModelConfig::load(dir.str());
    REQUIRE_FALSE(missing.has_value());
    CHECK(missing.error().code == Errc::file_not_found);
    CHECK_THAT(missing.error().message, Catch::Contains("config.json"));
  }
}

// Found by the model_config fuzz target (tests/fuzz): "num_hidden_layers": 2147483647
// parsed, and the loader's list of expected tensors (9 per layer) then ran out of memory.
TEST_CASE("config: a layer count beyond kMaxDecoderLayers is refused", "[model]") {
  nlohmann::json j = llama_json();
  j["num_hidden_layers"] = 2147483647;
  check_error(j, Errc::invalid_config, "num_hidden_layers");
  j["num_hidden_layers"] = photon::kMaxDecoderLayers + 1;
  check_error(j, Errc::invalid_config, "num_hidden_layers");
  j["num_hidden_layers"] = photon::kMaxDecoderLayers;
  auto ok = parse(j);
  REQUIRE(ok.has_value());
  ModelConfig c = *ok;
  c.num_layers = photon::kMaxDecoderLayers + 1;  // a config built in code (Model::create_random)
  auto r = c.validate();
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code == Errc::invalid_config);
  CHECK_THAT(r.error().message, Catch::Contains("num_hidden_layers"));
}

// Found by the model_config fuzz target (replay): num_attention_heads 10^9 with
// num_key_value_heads defaulting to it overflowed int32 inside the projection-size
// check (nq + 2 nkv), which then passed, and expected tensor shapes went negative.
TEST_CASE("config: head counts whose projections overflow int32 are refused", "[model]") {
  nlohmann::json j = llama_json();
  j.erase("num_key_value_heads");
  j["num_attention_heads"] = 1000000000;
  j["head_dim"] = 8;
  check_error(j, Errc::invalid_config, "overflow");
  j["num_attention_heads"] = 715827883;  // nq + 2 nkv = 2^31 + 1: the sum itself overflowed int32
  j["head_dim"] = 2;
  check_error(j, Errc::invalid_config, "overflow");
}

TEST_CASE("rope: default inv_freq is theta^(-2i/hd)", "[model]") {
  photon::RopeConfig rope;
  rope.theta = 10000.0;
  const auto inv = photon::rope_inv_freq(rope, 8);
  REQUIRE(inv.size() == 4);
  for (size_t i = 0; i < 4; ++i) CHECK(inv[i] == Approx(std::pow(10000.0, -double(2 * i) / 8.0)).epsilon(1e-6));
}

TEST_CASE("rope: llama3 scaling keeps high frequencies, divides low ones, blends the middle", "[model]") {
  auto c = parse(llama_json());  // factor 32, low 1, high 4, original 64: all three bands at hd 16
  REQUIRE(c.has_value());
  photon::RopeConfig plain = c->rope;
  plain.type = RopeType::standard;
  const auto base = photon::rope_inv_freq(plain, 16);
  const auto scaled = photon::rope_inv_freq(c->rope, 16);
  REQUIRE(scaled.size() == 8);
  int high = 0, low = 0, mid = 0;
  for (size_t i = 0; i < 8; ++i) {
    const double wavelen = 2 * M_PI / base[i];
    if (wavelen < 64.0 / 4.0) {
      CHECK(scaled[i] == base[i]);
      ++high;
    } else if (wavelen > 64.0 / 1.0) {
      CHECK(scaled[i] == Approx(base[i] / 32.0f).epsilon(1e-6));
      ++low;
    } else {
      const double smooth = (64.0 / wavelen - 1.0) / (4.0 - 1.0);
      CHECK(scaled[i] == Approx((1 - smooth) * base[i] / 32.0 + smooth * base[i]).epsilon(1e-5));
      ++mid;
    }
  }
  CHECK(high > 0);
  CHECK(low > 0);
  CHECK(mid > 0);
}
