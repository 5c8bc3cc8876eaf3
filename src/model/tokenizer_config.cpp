#include "model/tokenizer_config.hpp"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <filesystem>

#include "core/json_util.hpp"
#include "core/try.hpp"

namespace photon {
namespace {

using Json = nlohmann::json;
namespace fs = std::filesystem;

Unexpected bad_field(const std::string& file, const std::string& field, const std::string& what) {
  return fail(Errc::tokenizer_error, fmt::format("{}: \"{}\" {}", file, field, what));
}

// A token given as "text", {"content": "text", ...} (AddedToken) or null.
Result<std::optional<std::string>> token_text(const Json& j, const char* key, const std::string& file) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::optional<std::string>();
  if (it->is_string()) return std::optional<std::string>(it->get<std::string>());
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
    return std::optional<std::string>((*it)["content"].get<std::string>());
  return bad_field(file, key, "must be a string, an object with \"content\", or null");
}

Result<std::optional<bool>> opt_bool(const Json& j, const char* key, const std::string& file) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::optional<bool>();
  if (!it->is_boolean()) return bad_field(file, key, "must be true or false");
  return std::optional<bool>(it->get<bool>());
}

// An id field that may be an int or a list of ints.
Result<std::vector<int32_t>> id_list(const Json& j, const char* key, const std::string& file) {
  std::vector<int32_t> ids;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return ids;
  auto one = [&](const Json& v) -> Result<void> {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
      return bad_field(file, key, "must be a non-negative integer or a list of them");
    ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
    return {};
  };
  if (it->is_array()) {
    for (const auto& v : *it) PHOTON_TRY(one(v));
  } else {
    PHOTON_TRY(one(*it));
  }
  return ids;
}

}  // namespace

Result<TokenizerSettings> read_tokenizer_settings(const std::string& dir) {
  TokenizerSettings s;
  std::error_code ec;
  const std::string cfg_path = dir + "/tokenizer_config.json";
  if (fs::exists(cfg_path, ec)) {
    PHOTON_ASSIGN_OR_RETURN(Json cfg, json::parse_file(cfg_path));
    if (!cfg.is_object()) return fail(Errc::tokenizer_error, cfg_path + ": the top level is not an object");
    PHOTON_ASSIGN_OR_RETURN(s.bos_token, token_text(cfg, "bos_token", cfg_path));
    PHOTON_ASSIGN_OR_RETURN(s.eos_token, token_text(cfg, "eos_token", cfg_path));
    PHOTON_ASSIGN_OR_RETURN(s.pad_token, token_text(cfg, "pad_token", cfg_path));
    PHOTON_ASSIGN_OR_RETURN(s.unk_token, token_text(cfg, "unk_token", cfg_path));
    PHOTON_ASSIGN_OR_RETURN(s.add_bos_token, opt_bool(cfg, "add_bos_token", cfg_path));
    PHOTON_ASSIGN_OR_RETURN(s.add_eos_token, opt_bool(cfg, "add_eos_token", cfg_path));
    if (auto it = cfg.find("chat_template"); it != cfg.end() && !it->is_null()) {
      if (it->is_string()) {
        s.chat_template = it->get<std::string>();
      } else if (it->is_array()) {
        // [{"name": "default", "template": "..."}, {"name": "tool_use", ...}]
        for (const auto& e : *it) {
          if (!e.is_object() || !e.contains("name") || !e.contains("template") || !e["template"].is_string())
            return bad_field(cfg_path, "chat_template", "list entries must be {\"name\", \"template\"} objects");
          if (e["name"] == "default") s.chat_template = e["template"].get<std::string>();
        }
        if (s.chat_template.empty())
          return bad_field(cfg_path, "chat_template", "list has no entry named \"default\"");
      } else {
        return bad_field(cfg_path, "chat_template", "must be a string or a list of named templates");
      }
    }
  }
  const std::string jinja_path = dir + "/chat_template.jinja";
  if (s.chat_template.empty() && fs::exists(jinja_path, ec)) {
    PHOTON_ASSIGN_OR_RETURN(s.chat_template, json::read_file(jinja_path));
  }
  // eos/bos ids: generation_config.json, else config.json.
  for (const char* name : {"generation_config.json", "config.json"}) {
    const std::string path = dir + "/" + name;
    if (!fs::exists(path, ec)) continue;
    PHOTON_ASSIGN_OR_RETURN(Json g, json::parse_file(path));
    if (!g.is_object()) return fail(Errc::tokenizer_error, path + ": the top level is not an object");
    PHOTON_ASSIGN_OR_RETURN(s.extra_eos_ids, id_list(g, "eos_token_id", path));
    PHOTON_ASSIGN_OR_RETURN(auto bos, id_list(g, "bos_token_id", path));
    if (!bos.empty()) s.config_bos_id = bos.front();
    PHOTON_ASSIGN_OR_RETURN(auto pad, id_list(g, "pad_token_id", path));
    if (!pad.empty()) s.config_pad_id = pad.front();
    break;
  }
  return s;
}

}  // namespace photon
