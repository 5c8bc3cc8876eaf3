#include "model/config.hpp"

#include <fmt/format.h>

#include <climits>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/json_util.hpp"
#include "core/try.hpp"
#include "model/architectures.hpp"

namespace photon {

namespace {

constexpr int64_t kMaxI32 = INT32_MAX;

// The first "architectures" entry photon has a factory for.
Result<const Architecture*> read_architecture(const json::FieldReader& r) {
  const nlohmann::json* list = r.find("architectures");
  if (list == nullptr) return fail(Errc::missing_config_key, r.name("architectures") + " is missing");
  if (!list->is_array() || list->empty())
    return fail(Errc::invalid_config, r.name("architectures") + " must be a non-empty list of names");
  std::string names;
  for (const auto& e : *list) {
    if (!e.is_string()) return fail(Errc::invalid_config, r.name("architectures") + " must hold strings");
    const std::string name = e.get<std::string>();
    if (const Architecture* a = find_architecture(name)) return a;
    names += (names.empty() ? "" : ", ") + name;
  }
  return fail(Errc::unknown_architecture, fmt::format("{} names {}; photon supports {}", r.name("architectures"), names,
                                                      supported_architectures()));
}

// A key photon cannot serve when set (attention_bias, mlp_bias, sliding windows).
Result<void> require_false(const json::FieldReader& r, std::string_view key) {
  PHOTON_ASSIGN_OR_RETURN(bool set, r.boolean_or(key, false));
  if (set) return fail(Errc::unsupported, fmt::format("{} = true is not supported by photon", r.name(key)));
  return {};
}

// The llama3 factors, from rope_scaling (v4) or rope_parameters (v5).
Result<void> read_llama3_factors(const json::FieldReader& r, RopeConfig& rope) {
  PHOTON_ASSIGN_OR_RETURN(rope.factor, r.number("factor", 1e-9, 1e9));
  PHOTON_ASSIGN_OR_RETURN(rope.low_freq_factor, r.number("low_freq_factor", 1e-9, 1e9));
  PHOTON_ASSIGN_OR_RETURN(rope.high_freq_factor, r.number("high_freq_factor", 1e-9, 1e9));
  PHOTON_ASSIGN_OR_RETURN(rope.original_max_position_embeddings,
                          r.integer("original_max_position_embeddings", 1, kMaxI32));
  if (rope.high_freq_factor <= rope.low_freq_factor)
    return fail(Errc::invalid_config, fmt::format("{} ({}) must exceed low_freq_factor ({})", r.name("high_freq_factor"),
                                                  rope.high_freq_factor, rope.low_freq_factor));
  return {};
}

// rope_type (or the older "type") of a scaling object: "default" / "llama3".
Result<RopeType> read_rope_type(const json::FieldReader& r, bool required) {
  std::string key = r.has("rope_type") ? "rope_type" : "type";
  if (!r.has(key)) {
    if (required) return fail(Errc::missing_config_key, r.name("rope_type") + " is missing");
    return RopeType::standard;
  }
  PHOTON_ASSIGN_OR_RETURN(std::string type, r.string(key));
  if (type == "default") return RopeType::standard;
  if (type == "llama3") return RopeType::llama3;
  return fail(Errc::unsupported, fmt::format("{} '{}' is not supported (photon serves 'default' and 'llama3')",
                                             r.name(key), type));
}

Result<RopeConfig> read_rope(const json::FieldReader& top) {
  RopeConfig rope;
  PHOTON_ASSIGN_OR_RETURN(rope.theta, top.number_or("rope_theta", 10000.0, 1e-9, 1e30));
  if (top.has("rope_parameters")) {  // transformers v5
    PHOTON_ASSIGN_OR_RETURN(json::FieldReader rp, top.object("rope_parameters"));
    PHOTON_ASSIGN_OR_RETURN(rope.type, read_rope_type(rp, /*required=*/false));
    PHOTON_ASSIGN_OR_RETURN(rope.theta, rp.number_or("rope_theta", rope.theta, 1e-9, 1e30));
    if (rope.type == RopeType::llama3) PHOTON_TRY(read_llama3_factors(rp, rope));
  } else if (top.has("rope_scaling")) {  // transformers v4
    PHOTON_ASSIGN_OR_RETURN(json::FieldReader rs, top.object("rope_scaling"));
    PHOTON_ASSIGN_OR_RETURN(rope.type, read_rope_type(rs, /*required=*/true));
    if (rope.type == RopeType::llama3) PHOTON_TRY(read_llama3_factors(rs, rope));
  }
  return rope;
}

Result<int32_t> read_i32(const json::FieldReader& r, std::string_view key, int64_t min, int64_t max = kMaxI32) {
  PHOTON_ASSIGN_OR_RETURN(int64_t v, r.integer(key, min, max));
  return int32_t(v);
}

}  // namespace

Result<ModelConfig> ModelConfig::parse(std::string_view json_text, std::string_view source) {
  PHOTON_ASSIGN_OR_RETURN(nlohmann::json root, json::parse(json_text, source));
  if (!root.is_object()) return fail(Errc::invalid_config, fmt::format("{}: not a JSON object", source));
  const json::FieldReader r(root, std::string(source));
  PHOTON_ASSIGN_OR_RETURN(const Architecture* arch, read_architecture(r));

  ModelConfig c;
  c.architecture = std::string(arch->hf_name);
  c.qk_norm = arch->qk_norm;
  PHOTON_ASSIGN_OR_RETURN(c.vocab_size, read_i32(r, "vocab_size", 1));
  PHOTON_ASSIGN_OR_RETURN(c.hidden_size, read_i32(r, "hidden_size", 1));
  PHOTON_ASSIGN_OR_RETURN(c.intermediate_size, read_i32(r, "intermediate_size", 1));
  PHOTON_ASSIGN_OR_RETURN(c.num_layers, read_i32(r, "num_hidden_layers", 1, kMaxDecoderLayers));
  PHOTON_ASSIGN_OR_RETURN(c.num_heads, read_i32(r, "num_attention_heads", 1));
  PHOTON_ASSIGN_OR_RETURN(int64_t kv_heads, r.integer_or("num_key_value_heads", c.num_heads, 1, c.num_heads));
  c.num_kv_heads = int32_t(kv_heads);
  if (c.num_heads % c.num_kv_heads != 0)
    return fail(Errc::invalid_config, fmt::format("{} ({}) must divide num_attention_heads ({})",
                                                  r.name("num_key_value_heads"), c.num_kv_heads, c.num_heads));
  if (r.has("head_dim")) {
    PHOTON_ASSIGN_OR_RETURN(c.head_dim, read_i32(r, "head_dim", 2, 4096));
  } else {
    if (c.hidden_size % c.num_heads != 0)
      return fail(Errc::invalid_config,
                  fmt::format("{}: hidden_size ({}) is not a multiple of num_attention_heads ({}) and head_dim is "
                              "absent",
                              source, c.hidden_size, c.num_heads));
    c.head_dim = c.hidden_size / c.num_heads;
  }
  if (c.head_dim % 2 != 0)
    return fail(Errc::invalid_config, fmt::format("{} ({}) must be even for RoPE", r.name("head_dim"), c.head_dim));
  PHOTON_ASSIGN_OR_RETURN(int64_t max_pos, r.integer_or("max_position_embeddings",
                                                        arch->default_max_position_embeddings, 1, kMaxI32));
  c.max_position_embeddings = int32_t(max_pos);
  PHOTON_ASSIGN_OR_RETURN(double eps, r.number_or("rms_norm_eps", arch->default_rms_norm_eps, 1e-30, 1.0));
  c.rms_norm_eps = float(eps);
  PHOTON_ASSIGN_OR_RETURN(c.tie_word_embeddings, r.boolean_or("tie_word_embeddings", false));
  PHOTON_ASSIGN_OR_RETURN(c.rope, read_rope(r));

  if (r.has("eos_token_id")) {
    PHOTON_ASSIGN_OR_RETURN(std::vector<int64_t> eos, r.integer_or_list("eos_token_id", 0, kMaxI32));
    for (int64_t e : eos) c.eos_token_ids.push_back(int32_t(e));
  } else if (arch->default_eos_token_id >= 0) {
    c.eos_token_ids.push_back(int32_t(arch->default_eos_token_id));
  }
  PHOTON_ASSIGN_OR_RETURN(int64_t bos, r.integer_or("bos_token_id", arch->default_bos_token_id, 0, kMaxI32));
  c.bos_token_id = int32_t(bos);

  PHOTON_ASSIGN_OR_RETURN(std::string act, r.string_or("hidden_act", "silu"));
  if (act != "silu")
    return fail(Errc::unsupported, fmt::format("{} '{}' is not supported (photon serves 'silu')", r.name("hidden_act"), act));
  PHOTON_TRY(require_false(r, "attention_bias"));
  PHOTON_TRY(require_false(r, "mlp_bias"));
  PHOTON_TRY(require_false(r, "use_sliding_window"));
  PHOTON_TRY(c.validate());
  return c;
}

Result<ModelConfig> ModelConfig::load(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  PHOTON_ASSIGN_OR_RETURN(std::string text, json::read_file(path));
  return parse(text, path);
}

Result<void> ModelConfig::validate() const {
  const auto bad = [](std::string what) { return fail(Errc::invalid_config, "model config: " + std::move(what)); };
  if (find_architecture(architecture) == nullptr)
    return fail(Errc::unknown_architecture,
                fmt::format("model config: architecture '{}' (photon supports {})", architecture,
                            supported_architectures()));
  if (vocab_size < 1 || hidden_size < 1 || intermediate_size < 1 || num_layers < 1 || num_heads < 1)
    return bad("vocab_size, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads must be >= 1");
  if (num_layers > kMaxDecoderLayers)
    return bad(fmt::format("num_hidden_layers {} is above the supported {}", num_layers, kMaxDecoderLayers));
  if (num_kv_heads < 1 || num_kv_heads > num_heads || num_heads % num_kv_heads != 0)
    return bad(fmt::format("num_key_value_heads {} must divide num_attention_heads {}", num_kv_heads, num_heads));
  if (head_dim < 2 || head_dim % 2 != 0) return bad(fmt::format("head_dim {} must be even and >= 2", head_dim));
  // Every weight and activation row count must fit the int32 indices of the batch plan and the kernels.
  if ((int64_t(num_heads) + 2 * int64_t(num_kv_heads)) * head_dim > kMaxI32 || int64_t(intermediate_size) * 2 > kMaxI32)
    return bad("projection sizes overflow int32");
  if (max_position_embeddings < 1) return bad("max_position_embeddings must be >= 1");
  if (!(rms_norm_eps > 0.0f)) return bad("rms_norm_eps must be > 0");
  if (!(rope.theta > 0.0)) return bad("rope_theta must be > 0");
  if (rope.type == RopeType::llama3 &&
      (!(rope.factor > 0.0) || !(rope.low_freq_factor > 0.0) || !(rope.high_freq_factor > rope.low_freq_factor) ||
       rope.original_max_position_embeddings < 1))
    return bad("llama3 rope scaling needs factor > 0, 0 < low_freq_factor < high_freq_factor, "
               "original_max_position_embeddings >= 1");
  for (int32_t e : eos_token_ids)
    if (e < 0) return bad("eos_token_id must be >= 0");
  return {};
}

std::vector<float> rope_inv_freq(const RopeConfig& rope, int32_t head_dim) {
  // transformers builds these as float32 torch tensors with Python-float
  // scalars (cast to float32 per op); `a / tensor` there is reciprocal * a.
  const int32_t half = head_dim / 2;
  std::vector<float> inv(size_t(half > 0 ? half : 0));
  const float base = float(rope.theta);
  for (int32_t i = 0; i < half; ++i) {
    const float exponent = float(2 * i) / float(head_dim);
    inv[size_t(i)] = 1.0f / std::pow(base, exponent);
  }
  if (rope.type != RopeType::llama3) return inv;

  const float factor = float(rope.factor);
  const float low = float(rope.low_freq_factor);
  const double old_len = double(rope.original_max_position_embeddings);
  const float low_freq_wavelen = float(old_len / rope.low_freq_factor);
  const float high_freq_wavelen = float(old_len / rope.high_freq_factor);
  const float two_pi = float(2.0 * 3.14159265358979323846);
  const float band = float(rope.high_freq_factor - rope.low_freq_factor);
  for (float& f : inv) {
    const float wavelen = (1.0f / f) * two_pi;
    const float scaled = wavelen > low_freq_wavelen ? f / factor : f;
    const float smooth = ((1.0f / wavelen) * float(old_len) - low) / band;
    const float smoothed = (1.0f - smooth) * scaled / factor + smooth * scaled;
    const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
    f = medium ? smoothed : scaled;
  }
  return inv;
}

}  // namespace photon
