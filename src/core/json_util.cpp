#include "core/json_util.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

namespace photon::json {

Result<std::string> read_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) return fail(Errc::file_not_found, fmt::format("{}: no such file", path));
    return fail(Errc::io_error, fmt::format("{}: cannot open: {}", path, std::strerror(err)));
  }
  std::string text;
  char chunk[65536];
  size_t n = 0;
  while ((n = std::fread(chunk, 1, sizeof chunk, f)) > 0) text.append(chunk, n);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) return fail(Errc::io_error, fmt::format("{}: read failed", path));
  return text;
}

Result<nlohmann::json> parse(std::string_view text, std::string_view source) {
  nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_discarded()) return j;
  // Malformed: a second, SAX pass finds the position and reason without throwing.
  struct ErrorCatcher : nlohmann::json_sax<nlohmann::json> {
    std::string message;
    bool null() override { return true; }
    bool boolean(bool) override { return true; }
    bool number_integer(number_integer_t) override { return true; }
    bool number_unsigned(number_unsigned_t) override { return true; }
    bool number_float(number_float_t, const string_t&) override { return true; }
    bool string(string_t&) override { return true; }
    bool binary(binary_t&) override { return true; }
    bool start_object(std::size_t) override { return true; }
    bool key(string_t&) override { return true; }
    bool end_object() override { return true; }
    bool start_array(std::size_t) override { return true; }
    bool end_array() override { return true; }
    bool parse_error(std::size_t position, const std::string& last_token,
                     const nlohmann::detail::exception&) override {
      message = fmt::format(" at byte {} near '{}'", position, last_token.substr(0, 32));
      return false;
    }
  };
  ErrorCatcher catcher;
  (void)nlohmann::json::sax_parse(text.begin(), text.end(), &catcher, nlohmann::json::input_format_t::json, /*strict=*/true);
  return fail(Errc::bad_json, fmt::format("{}: malformed JSON{}", source, catcher.message));
}

Result<nlohmann::json> parse_file(const std::string& path) {
  Result<std::string> text = read_file(path);
  if (!text) return fail(std::move(text).error());
  return parse(*text, path);
}

// ---- FieldReader ------------------------------------------------------------

FieldReader::FieldReader(const nlohmann::json& object, std::string source, std::string prefix, FieldErrors errors)
    : object_(&object), source_(std::move(source)), prefix_(std::move(prefix)), errors_(errors) {}

std::string FieldReader::name(std::string_view key) const { return fmt::format("{}: {}{}", source_, prefix_, key); }

Unexpected FieldReader::missing(std::string_view key) const {
  return fail(errors_.missing, fmt::format("{} is missing", name(key)));
}

Unexpected FieldReader::invalid(std::string_view key, std::string_view what) const {
  const nlohmann::json* v = find(key);
  std::string shown = v ? v->dump() : std::string("absent");
  if (shown.size() > 60) shown = shown.substr(0, 57) + "...";
  return fail(errors_.invalid, fmt::format("{} must be {} (found {})", name(key), what, shown));
}

const nlohmann::json* FieldReader::find(std::string_view key) const {
  if (!object_->is_object()) return nullptr;
  auto it = object_->find(key);
  if (it == object_->end() || it->is_null()) return nullptr;
  return &*it;
}

bool FieldReader::has(std::string_view key) const { return find(key) != nullptr; }

namespace {
// An integer JSON value as int64 (false for floats, strings, or values past int64).
bool as_int64(const nlohmann::json& v, int64_t& out) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > uint64_t(INT64_MAX)) return false;
    out = int64_t(u);
    return true;
  }
  if (v.is_number_integer()) {
    out = v.get<int64_t>();
    return true;
  }
  return false;
}
}  // namespace

Result<int64_t> FieldReader::integer(std::string_view key, int64_t min, int64_t max) const {
  if (!object_->is_object()) return invalid(key, "inside a JSON object");
  const nlohmann::json* v = find(key);
  if (v == nullptr) return missing(key);
  int64_t out = 0;
  if (!as_int64(*v, out) || out < min || out > max)
    return invalid(key, fmt::format("an integer in [{}, {}]", min, max));
  return out;
}

Result<int64_t> FieldReader::integer_or(std::string_view key, int64_t fallback, int64_t min, int64_t max) const {
  if (!has(key)) return fallback;
  return integer(key, min, max);
}

Result<double> FieldReader::number(std::string_view key, double min, double max) const {
  if (!object_->is_object()) return invalid(key, "inside a JSON object");
  const nlohmann::json* v = find(key);
  if (v == nullptr) return missing(key);
  if (!v->is_number()) return invalid(key, "a number");
  const double d = v->get<double>();
  if (!std::isfinite(d) || d < min || d > max) return invalid(key, fmt::format("a number in [{}, {}]", min, max));
  return d;
}

Result<double> FieldReader::number_or(std::string_view key, double fallback, double min, double max) const {
  if (!has(key)) return fallback;
  return number(key, min, max);
}

Result<bool> FieldReader::boolean_or(std::string_view key, bool fallback) const {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) return invalid(key, "true or false");
  return v->get<bool>();
}

Result<std::string> FieldReader::string(std::string_view key) const {
  if (!object_->is_object()) return invalid(key, "inside a JSON object");
  const nlohmann::json* v = find(key);
  if (v == nullptr) return missing(key);
  if (!v->is_string()) return invalid(key, "a string");
  return v->get<std::string>();
}

Result<std::string> FieldReader::string_or(std::string_view key, std::string fallback) const {
  if (!has(key)) return fallback;
  return string(key);
}

Result<std::vector<int64_t>> FieldReader::integer_or_list(std::string_view key, int64_t min, int64_t max) const {
  if (!object_->is_object()) return invalid(key, "inside a JSON object");
  const nlohmann::json* v = find(key);
  if (v == nullptr) return missing(key);
  const std::string what = fmt::format("an integer in [{}, {}] or a list of them", min, max);
  std::vector<int64_t> out;
  int64_t x = 0;
  if (v->is_array()) {
    for (const auto& e : *v) {
      if (!as_int64(e, x) || x < min || x > max) return invalid(key, what);
      out.push_back(x);
    }
  } else {
    if (!as_int64(*v, x) || x < min || x > max) return invalid(key, what);
    out.push_back(x);
  }
  return out;
}

Result<FieldReader> FieldReader::object(std::string_view key) const {
  if (!object_->is_object()) return invalid(key, "inside a JSON object");
  const nlohmann::json* v = find(key);
  if (v == nullptr) return missing(key);
  if (!v->is_object()) return invalid(key, "a JSON object");
  return FieldReader(*v, source_, fmt::format("{}{}.", prefix_, key), errors_);
}

}  // namespace photon::json
