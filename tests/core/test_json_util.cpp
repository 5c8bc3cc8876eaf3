// JSON parsing without exceptions and typed field reads with named errors.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "core/json_util.hpp"
#include "support/safetensors_writer.hpp"

using photon::Errc;
namespace json = photon::json;

TEST_CASE("json: parse reports malformed text as bad_json with its position", "[core]") {
  auto ok = json::parse(R"({"a": [1, 2]})", "x.json");
  REQUIRE(ok.has_value());
  CHECK((*ok)["a"].size() == 2);
  for (const char* bad : {"{", "{\"a\": }", "[1, 2", "{\"a\": 1} trailing", "", "nul"}) {
    auto r = json::parse(bad, "x.json");
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code == Errc::bad_json);
    CHECK_THAT(r.error().message, Catch::Contains("x.json"));
  }
  auto pos = json::parse("{\"a\": 1,, }", "x.json");
  REQUIRE_FALSE(pos.has_value());
  CHECK_THAT(pos.error().message, Catch::Contains("byte"));
}

TEST_CASE("json: parse_file distinguishes a missing file", "[core]") {
  photon::test::TempDir dir;
  auto missing = json::parse_file(dir.file("absent.json"));
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.error().code == Errc::file_not_found);
  photon::test::write_file(dir.file("x.json"), R"({"k": true})");
  auto ok = json::parse_file(dir.file("x.json"));
  REQUIRE(ok.has_value());
  CHECK((*ok)["k"] == true);
}

TEST_CASE("json: FieldReader reads typed fields and names the key in errors", "[core]") {
  const auto root = nlohmann::json::parse(R"({
    "n": 12, "neg": -3, "f": 0.5, "big": 1e300, "s": "text", "b": false, "nul": null,
    "list": [1, 2, 3], "mixed": [1, "x"], "obj": {"inner": 7}
  })");
  const json::FieldReader r(root, "cfg.json");
  CHECK(*r.integer("n", 0, 100) == 12);
  CHECK(*r.integer_or("absent", 5, 0, 10) == 5);
  CHECK(*r.integer_or("nul", 6, 0, 10) == 6);  // null counts as absent
  CHECK(*r.number("f", 0, 1) == 0.5);
  CHECK(*r.number("n", 0, 100) == 12.0);  // integers are numbers
  CHECK(*r.string("s") == "text");
  CHECK(*r.boolean_or("b", true) == false);
  CHECK(*r.integer_or_list("list", 0, 10) == std::vector<int64_t>{1, 2, 3});
  CHECK(*r.integer_or_list("n", 0, 100) == std::vector<int64_t>{12});
  auto inner = r.object("obj");
  REQUIRE(inner.has_value());
  CHECK(*inner->integer("inner", 0, 10) == 7);

  auto missing = r.integer("absent", 0, 1);
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.error().code == Errc::missing_config_key);
  CHECK_THAT(missing.error().message, Catch::Contains("cfg.json: absent"));
  auto range = r.integer("neg", 0, 10);
  REQUIRE_FALSE(range.has_value());
  CHECK(range.error().code == Errc::invalid_config);
  CHECK_THAT(range.error().message, Catch::Contains("neg") && Catch::Contains("-3"));
  CHECK(r.integer("f", 0, 10).error().code == Errc::invalid_config);  // a float is not an integer
  CHECK(r.number("big", 0, 1e10).error().code == Errc::invalid_config);
  CHECK(r.string("n").error().code == Errc::invalid_config);
  CHECK(r.boolean_or("s", false).error().code == Errc::invalid_config);
  CHECK(r.integer_or_list("mixed", 0, 10).error().code == Errc::invalid_config);
  auto nested = inner->integer("missing", 0, 1);
  CHECK_THAT(nested.error().message, Catch::Contains("obj.missing"));

  const json::FieldReader as_file_format(root, "f.bin", "", {Errc::bad_json, Errc::bad_json});
  CHECK(as_file_format.integer("absent", 0, 1).error().code == Errc::bad_json);
}
