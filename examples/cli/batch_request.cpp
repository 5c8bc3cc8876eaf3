#include "batch_request.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/try.hpp"

namespace photon::cli {
namespace {

using nlohmann::json;

// Typed reads of one field's value, each failing with invalid_argument naming
// the line and the field.
class FieldReader {
 public:
  FieldReader(size_t line_no, const std::string& key) : line_no_(line_no), key_(key) {}

  Error wrong(std::string_view expected) const {
    return Error{Errc::invalid_argument,
                 fmt::format("requests line {}: field \"{}\" has the wrong type or range: expected {}", line_no_,
                             key_, expected)};
  }

  Result<int32_t> int32(const json& v) const {
    if (v.is_number_unsigned()) {
      if (v.get<uint64_t>() > uint64_t(std::numeric_limits<int32_t>::max())) return fail(wrong("an int32 integer"));
      return int32_t(v.get<uint64_t>());
    }
    if (!v.is_number_integer()) return fail(wrong("an integer"));
    const int64_t i = v.get<int64_t>();
    if (i < std::numeric_limits<int32_t>::min() || i > std::numeric_limits<int32_t>::max())
      return fail(wrong("an int32 integer"));
    return int32_t(i);
  }
  Result<uint64_t> uint64(const json& v) const {
    if (v.is_number_unsigned()) return v.get<uint64_t>();
    if (v.is_number_integer() && v.get<int64_t>() >= 0) return uint64_t(v.get<int64_t>());
    return fail(wrong("a non-negative integer"));
  }
  Result<float> number(const json& v) const {
    if (!v.is_number()) return fail(wrong("a number"));
    const double d = v.get<double>();
    if (!std::isfinite(d) || std::abs(d) > double(std::numeric_limits<float>::max()))
      return fail(wrong("a finite number within float range"));
    return float(d);
  }
  Result<bool> boolean(const json& v) const {
    if (!v.is_boolean()) return fail(wrong("true or false"));
    return v.get<bool>();
  }
  Result<std::string> string(const json& v) const {
    if (!v.is_string()) return fail(wrong("a string"));
    return v.get<std::string>();
  }
  Result<std::vector<int32_t>> int32_list(const json& v) const {
    if (!v.is_array()) return fail(wrong("an array of integers"));
    std::vector<int32_t> out;
    out.reserve(v.size());
    for (const json& e : v) {
      PHOTON_ASSIGN_OR_RETURN(const int32_t i, int32(e));
      out.push_back(i);
    }
    return out;
  }
  Result<std::vector<std::string>> string_list(const json& v) const {
    if (v.is_string()) return std::vector<std::string>{v.get<std::string>()};
    if (!v.is_array()) return fail(wrong("a string or an array of strings"));
    std::vector<std::string> out;
    for (const json& e : v) {
      if (!e.is_string()) return fail(wrong("a string or an array of strings"));
      out.push_back(e.get<std::string>());
    }
    return out;
  }
  Result<std::vector<ChatMessage>> messages(const json& v) const {
    if (!v.is_array()) return fail(wrong("an array of {\"role\", \"content\"} objects"));
    std::vector<ChatMessage> out;
    for (const json& m : v) {
      if (!m.is_object()) return fail(wrong("an array of {\"role\", \"content\"} objects"));
      const auto role = m.find("role"), content = m.find("content");
      if (role == m.end() || content == m.end() || !role->is_string() || !content->is_string())
        return fail(wrong("an array of objects with string \"role\" and \"content\""));
      out.push_back({role->get<std::string>(), content->get<std::string>(), std::nullopt});
    }
    return out;
  }

 private:
  size_t line_no_;
  const std::string& key_;
};

// Stores `value` of field `key` into the request.
Result<void> set_field(Request& r, const std::string& key, const json& value, size_t line_no) {
  const FieldReader f(line_no, key);
  SamplingOptions& s = r.sampling;
  auto to = [](auto& dst) { return [&dst](auto v) { dst = std::move(v); }; };
  if (key == "tokens") return f.int32_list(value).transform(to(r.prompt_tokens));
  if (key == "prompt") return f.string(value).transform(to(r.prompt));
  if (key == "messages") return f.messages(value).transform(to(r.messages));
  if (key == "max_tokens") return f.int32(value).transform(to(r.max_tokens));
  if (key == "temperature") return f.number(value).transform(to(s.temperature));
  if (key == "top_k") return f.int32(value).transform(to(s.top_k));
  if (key == "top_p") return f.number(value).transform(to(s.top_p));
  if (key == "min_p") return f.number(value).transform(to(s.min_p));
  if (key == "seed") return f.uint64(value).transform([&s](uint64_t v) { s.seed = v; });
  if (key == "repetition_penalty") return f.number(value).transform(to(s.repetition_penalty));
  if (key == "presence_penalty") return f.number(value).transform(to(s.presence_penalty));
  if (key == "frequency_penalty") return f.number(value).transform(to(s.frequency_penalty));
  if (key == "stop_token_ids") return f.int32_list(value).transform(to(r.stop_token_ids));
  if (key == "stop") return f.string_list(value).transform(to(r.stop));
  if (key == "ignore_eos") return f.boolean(value).transform(to(r.ignore_eos));
  if (key == "logprobs") return f.int32(value).transform(to(r.logprobs));
  return fail(Errc::invalid_argument, fmt::format("requests line {}: unknown field \"{}\"", line_no, key));
}

}  // namespace

Result<BatchLine> parse_batch_line(std::string_view text, size_t line_no) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return fail(Errc::invalid_argument, fmt::format("requests line {}: not a JSON object", line_no));
  BatchLine l;
  l.id = j.contains("id") ? j["id"] : json(line_no);
  l.request.sampling.temperature = 0.0f;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "id") continue;
    PHOTON_TRY(set_field(l.request, it.key(), it.value(), line_no));
  }
  return l;
}

}  // namespace photon::cli
