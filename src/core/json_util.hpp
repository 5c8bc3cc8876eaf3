// JSON helpers for photon's loaders: parsing without exceptions and typed
// field access whose errors name the file and the key.
//
// Every function returns a Result; none throws (nlohmann::json is parsed with
// allow_exceptions = false and fields are type-checked before they are read).
// Thread-compatibility: plain functions; a FieldReader borrows its object and
// is used by one thread at a time.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "photon/result.hpp"

namespace photon::json {

// The whole file as bytes. file_not_found when `path` does not exist,
// io_error when it cannot be read.
Result<std::string> read_file(const std::string& path);

// Parses `text`; bad_json (with nlohmann's position and reason) naming
// `source` when malformed.
Result<nlohmann::json> parse(std::string_view text, std::string_view source);

// read_file + parse.
Result<nlohmann::json> parse_file(const std::string& path);

// The error codes a FieldReader reports: a loader of config.json reports
// missing_config_key / invalid_config, a file-format parser bad_json.
struct FieldErrors {
  Errc missing = Errc::missing_config_key;
  Errc invalid = Errc::invalid_config;
};

// Typed reads of the fields of one JSON object. Keys are named in messages as
// "<source>: <prefix><key>", e.g. "config.json: rope_scaling.factor".
// A key whose value is null counts as absent (HF writes `"rope_scaling": null`).
class FieldReader {
 public:
  // `object` must outlive the reader. When it is not a JSON object every read
  // fails with errors.invalid.
  FieldReader(const nlohmann::json& object, std::string source, std::string prefix = {},
              FieldErrors errors = {});

  bool has(std::string_view key) const;
  // The raw value (nullptr when absent or null).
  const nlohmann::json* find(std::string_view key) const;

  // Integers in [min, max]; a float value is rejected.
  Result<int64_t> integer(std::string_view key, int64_t min, int64_t max) const;
  Result<int64_t> integer_or(std::string_view key, int64_t fallback, int64_t min, int64_t max) const;
  // Numbers (integer or float) in [min, max].
  Result<double> number(std::string_view key, double min, double max) const;
  Result<double> number_or(std::string_view key, double fallback, double min, double max) const;
  Result<bool> boolean_or(std::string_view key, bool fallback) const;
  Result<std::string> string(std::string_view key) const;
  Result<std::string> string_or(std::string_view key, std::string fallback) const;
  // An integer or a list of integers, each in [min, max] (e.g. eos_token_id).
  Result<std::vector<int64_t>> integer_or_list(std::string_view key, int64_t min, int64_t max) const;
  // A nested object, read with the prefix "<prefix><key>.".
  Result<FieldReader> object(std::string_view key) const;

  // "<source>: <prefix><key>" for messages of the caller's own checks.
  std::string name(std::string_view key) const;
  const FieldErrors& errors() const noexcept { return errors_; }

 private:
  Unexpected missing(std::string_view key) const;
  Unexpected invalid(std::string_view key, std::string_view what) const;

  const nlohmann::json* object_;
  std::string source_;
  std::string prefix_;
  FieldErrors errors_;
};

}  // namespace photon::json
