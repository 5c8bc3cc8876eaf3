#include "json_fields.hpp"

#include <cmath>
#include <limits>

namespace photon::server {

using nlohmann::json;

std::string describe_json(const json& v) {
  // Containers are not printed: a body may nest them deeply or be megabytes long.
  if (v.is_array()) return "[...] (" + std::to_string(v.size()) + " elements)";
  if (v.is_object()) return "{...}";
  if (v.is_string() && v.get_ref<const std::string&>().size() > 40)
    return json(v.get_ref<const std::string&>().substr(0, 37)).dump(-1, ' ', false, json::error_handler_t::replace) +
           "...";
  return v.dump(-1, ' ', false, json::error_handler_t::replace);
}

JsonFields::JsonFields(const json& object, std::string path) : object_(object), path_(std::move(path)) {}

std::string JsonFields::path(const std::string& name) const { return path_.empty() ? name : path_ + "." + name; }

const json* JsonFields::get(const char* name) const {
  if (!object_.is_object()) return nullptr;
  auto it = object_.find(name);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

void JsonFields::fail(const std::string& name, const std::string& why) {
  if (error_) return;
  const std::string p = path(name);
  error_ = bad_request(p, "'" + p + "' " + why);
}

void JsonFields::wrong_type(const char* name, const char* want, const json& got) {
  fail(name, std::string("must be ") + want + ", got " + got.type_name() + " " + describe_json(got));
}

void JsonFields::read(const char* name, bool& out) {
  const json* v = ok() ? get(name) : nullptr;
  if (v == nullptr) return;
  if (!v->is_boolean()) return wrong_type(name, "a boolean", *v);
  out = v->get<bool>();
}

void JsonFields::read(const char* name, std::string& out) {
  const json* v = ok() ? get(name) : nullptr;
  if (v == nullptr) return;
  if (!v->is_string()) return wrong_type(name, "a string", *v);
  out = v->get<std::string>();
}

void JsonFields::read(const char* name, float& out, double lo, double hi, bool lo_open) {
  const json* v = ok() ? get(name) : nullptr;
  if (v == nullptr) return;
  if (!v->is_number()) return wrong_type(name, "a number", *v);
  const double d = v->get<double>();
  // Checked as the float it is stored in: a finite double beyond float's range
  // (1e308) cannot be converted (undefined behaviour, inf in practice), and a
  // tiny one (1e-50) rounds to 0, which an open lower bound must refuse.
  const bool fits_float = std::isfinite(d) && std::abs(d) <= double(std::numeric_limits<float>::max());
  const double f = fits_float ? double(static_cast<float>(d)) : d;
  const bool above_lo = lo_open ? f > lo : f >= lo;
  if (!fits_float || !above_lo || f > hi) {
    const std::string lo_s = json(lo).dump(), hi_s = json(hi).dump();
    const std::string range = std::isinf(hi) ? std::string(lo_open ? "> " : ">= ") + lo_s
                                             : "in " + std::string(lo_open ? "(" : "[") + lo_s + ", " + hi_s + "]";
    return fail(name, "must be " + range + ", got " + describe_json(*v));
  }
  out = static_cast<float>(f);
}

void JsonFields::read(const char* name, int32_t& out, int64_t lo, int64_t hi) {
  const json* v = ok() ? get(name) : nullptr;
  if (v == nullptr) return;
  if (!v->is_number_integer()) return wrong_type(name, "an integer", *v);
  const bool in_range = v->is_number_unsigned() ? v->get<uint64_t>() <= uint64_t(std::max<int64_t>(hi, 0)) &&
                                                      int64_t(v->get<uint64_t>()) >= lo
                                                : v->get<int64_t>() >= lo && v->get<int64_t>() <= hi;
  if (!in_range)
    return fail(name, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + describe_json(*v));
  out = static_cast<int32_t>(v->get<int64_t>());
}

void JsonFields::read(const char* name, std::optional<uint64_t>& out) {
  const json* v = ok() ? get(name) : nullptr;
  if (v == nullptr) return;
  if (!v->is_number_integer()) return wrong_type(name, "an integer", *v);
  if (!v->is_number_unsigned() && v->get<int64_t>() < 0) return fail(name, "must be >= 0, got " + describe_json(*v));
  out = v->get<uint64_t>();
}

void JsonFields::read_strings(const char* name, std::vector<std::string>& out) {
  const json* v = ok() ? get(name) : nullptr;
  if (v == nullptr) return;
  std::vector<std::string> got;
  if (v->is_string()) {
    got.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    for (size_t i = 0; i < v->size(); ++i) {
      const json& e = (*v)[i];
      if (!e.is_string())
        return fail(std::string(name) + "[" + std::to_string(i) + "]",
                    std::string("must be a string, got ") + e.type_name() + " " + describe_json(e));
      got.push_back(e.get<std::string>());
    }
  } else {
    return wrong_type(name, "a string or an array of strings", *v);
  }
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i].empty()) return fail(v->is_array() ? std::string(name) + "[" + std::to_string(i) + "]" : name,
                                    "must not be an empty string");
  out = std::move(got);
}

void JsonFields::read_ids(const char* name, std::vector<int32_t>& out) {
  const json* v = ok() ? get(name) : nullptr;
  if (v != nullptr) read_ids(*v, path(name), out);
}

void JsonFields::read_ids(const json& v, const std::string& name, std::vector<int32_t>& out) {
  if (!ok()) return;
  auto bad = [&](const std::string& p, const std::string& why) { error_ = bad_request(p, "'" + p + "' " + why); };
  if (!v.is_array()) return bad(name, std::string("must be an array of token ids, got ") + v.type_name());
  std::vector<int32_t> ids;
  ids.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const json& e = v[i];
    const bool id_like = e.is_number_unsigned() && e.get<uint64_t>() <= uint64_t(std::numeric_limits<int32_t>::max());
    if (!id_like)
      return bad(name + "[" + std::to_string(i) + "]", "must be a token id (an integer >= 0), got " + describe_json(e));
    ids.push_back(static_cast<int32_t>(e.get<uint64_t>()));
  }
  out = std::move(ids);
}

void JsonFields::adopt(const JsonFields& nested) {
  if (!error_ && nested.error_) error_ = nested.error_;
}

}  // namespace photon::server
