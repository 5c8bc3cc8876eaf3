// Typed reads of the fields of one JSON request object, for request parsing.
//
// The first failure is kept and later reads do nothing, so a parser reads its
// fields in a row and checks error() once. Every message names the field by
// its path ("messages[2].content", "stream_options.include_usage"). A null
// field counts as absent: OpenAI clients send null for options left unset.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "api_error.hpp"

namespace photon::server {

class JsonFields {
 public:
  // `object` must outlive the reader; `path` prefixes the field names in
  // messages ("" at the top level, "messages[1]" for a nested object).
  JsonFields(const nlohmann::json& object, std::string path);

  // The field when present and not null, else nullptr.
  const nlohmann::json* get(const char* name) const;
  bool has(const char* name) const { return get(name) != nullptr; }

  void read(const char* name, bool& out);
  void read(const char* name, std::string& out);
  // A finite number in [lo, hi]; with lo_open, in (lo, hi]. hi may be infinity.
  void read(const char* name, float& out, double lo, double hi, bool lo_open = false);
  // An integer in [lo, hi] (a JSON number without a fraction).
  void read(const char* name, int32_t& out, int64_t lo, int64_t hi);
  void read(const char* name, std::optional<uint64_t>& out);  // an integer >= 0
  // A string or an array of strings, each non-empty.
  void read_strings(const char* name, std::vector<std::string>& out);
  // An array of integers in [0, 2^31).
  void read_ids(const char* name, std::vector<int32_t>& out);
  // The same check for a value found elsewhere (`name` is its path).
  void read_ids(const nlohmann::json& v, const std::string& name, std::vector<int32_t>& out);

  // Takes the error of a reader of a nested object (its messages carry their
  // full path already), when this one has none.
  void adopt(const JsonFields& nested);

  // Records an error for `name` (when none is recorded yet).
  void fail(const std::string& name, const std::string& why);
  // The field's path in messages.
  std::string path(const std::string& name) const;

  bool ok() const noexcept { return !error_.has_value(); }
  const std::optional<ApiError>& error() const noexcept { return error_; }

 private:
  void wrong_type(const char* name, const char* want, const nlohmann::json& got);

  const nlohmann::json& object_;
  std::string path_;
  std::optional<ApiError> error_;
};

// A short rendering of a JSON value for messages: a scalar's text (strings cut
// to 37 bytes), the size of an array, "{...}" for an object.
std::string describe_json(const nlohmann::json& v);

}  // namespace photon::server
