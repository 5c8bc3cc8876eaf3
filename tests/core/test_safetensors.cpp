// The safetensors reader: well-formed files, every malformed-file error, and
// sharded checkpoints (files written into a temporary folder).
#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <vector>

#include "core/safetensors.hpp"
#include "support/safetensors_writer.hpp"

using photon::Checkpoint;
using photon::DType;
using photon::Errc;
using photon::SafetensorsFile;
using namespace photon::test;

namespace {

std::vector<StTensor> sample_tensors() {
  std::vector<float> a = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -1.0f};
  std::vector<uint16_t> b = {photon::f32_to_bf16(0.5f), photon::f32_to_bf16(-4.0f), photon::f32_to_bf16(2.0f)};
  std::vector<int32_t> c = {7, -9};
  std::vector<int8_t> d = {1, -2, 3, -4, 5};
  return {{"b.weight", "BF16", {3}, bytes_of(b)},
          {"a.weight", "F32", {2, 3}, bytes_of(a)},
          {"c.ids", "I32", {2}, bytes_of(c)},
          {"d.q", "I8", {5}, bytes_of(d)}};
}

photon::Result<std::vector<photon::SafetensorsTensor>> parse(const std::string& image) {
  return photon::parse_safetensors(reinterpret_cast<const uint8_t*>(image.data()), image.size(), "test.safetensors");
}

Errc parse_error(const std::string& image) {
  auto r = parse(image);
  REQUIRE_FALSE(r.has_value());
  return r.error().code;
}

}  // namespace

TEST_CASE("safetensors: a well-formed file lists its tensors with shapes, dtypes and bytes", "[core]") {
  TempDir dir;
  write_file(dir.file("x.safetensors"), safetensors_image(sample_tensors()));
  auto f = SafetensorsFile::open(dir.file("x.safetensors"));
  REQUIRE(f.has_value());
  REQUIRE(f->tensors().size() == 4);
  CHECK(f->tensors()[0].name == "a.weight");  // sorted by name
  const auto* a = f->find("a.weight");
  REQUIRE(a != nullptr);
  CHECK(a->dtype == DType::f32);
  CHECK(a->shape == std::vector<int64_t>{2, 3});
  CHECK(a->nbytes == 24);
  float v[6];
  std::memcpy(v, a->data, 24);
  CHECK(v[2] == 3.25f);
  const auto* b = f->find("b.weight");
  REQUIRE(b != nullptr);
  CHECK(b->dtype == DType::bf16);
  uint16_t h;
  std::memcpy(&h, b->data + 2, 2);
  CHECK(photon::bf16_to_f32(h) == -4.0f);
  CHECK(f->find("c.ids")->dtype == DType::i32);
  CHECK(f->find("d.q")->dtype == DType::i8);
  CHECK(f->find("missing") == nullptr);
}

TEST_CASE("safetensors: truncated files are truncated_file", "[core]") {
  CHECK(parse_error(std::string("\x10\x00\x00", 3)) == Errc::truncated_file);
  CHECK(parse_error("") == Errc::truncated_file);
  // A whole file cut inside its data section (an interrupted download).
  const std::string whole = safetensors_image(sample_tensors());
  auto r = parse(whole.substr(0, whole.size() - 3));
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code == Errc::truncated_file);
  CHECK_THAT(r.error().message, Catch::Contains("test.safetensors") && Catch::Contains("d.q"));
}

TEST_CASE("safetensors: a header length past the end is header_out_of_bounds", "[core]") {
  std::string image = safetensors_image(sample_tensors());
  image[0] = char(0xff);
  image[1] = char(0xff);
  CHECK(parse_error(image) == Errc::header_out_of_bounds);
  std::string huge(8, char(0xff));
  CHECK(parse_error(huge + "{}") == Errc::header_out_of_bounds);
}

TEST_CASE("safetensors: malformed headers are bad_json", "[core]") {
  CHECK(parse_error(safetensors_raw("{\"a\": {\"dtype\": \"F32\",", "")) == Errc::bad_json);
  CHECK(parse_error(safetensors_raw("[1, 2]", "")) == Errc::bad_json);
  CHECK(parse_error(safetensors_raw("", "")) == Errc::bad_json);
  CHECK(parse_error(safetensors_raw(R"({"a": {"shape": [1], "data_offsets": [0, 4]}})", "abcd")) == Errc::bad_json);
  CHECK(parse_error(safetensors_raw(R"({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", "abcd")) ==
        Errc::bad_json);
  CHECK(parse_error(safetensors_raw(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", "abcd")) ==
        Errc::bad_json);
  CHECK(parse_error(safetensors_raw(R"({"__metadata__": 3})", "")) == Errc::bad_json);
  auto r = parse(safetensors_raw("{\"a\": ", ""));
  REQUIRE_FALSE(r.has_value());
  CHECK_THAT(r.error().message, Catch::Contains("test.safetensors") && Catch::Contains("malformed JSON"));
}

TEST_CASE("safetensors: overlapping, out-of-range or inconsistent offsets are bad_offsets", "[core]") {
  const std::string data(16, 'x');
  auto overlap = parse(safetensors_raw(
      R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
          "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
      data));
  REQUIRE_FALSE(overlap.has_value());
  CHECK(overlap.error().code == Errc::bad_offsets);
  CHECK_THAT(overlap.error().message, Catch::Contains("'a'") && Catch::Contains("'b'") && Catch::Contains("overlap"));
  // Past the data section, with a gap before it: not a plain truncation.
  auto past = parse(safetensors_raw(
      R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
          "b": {"dtype": "F32", "shape": [2], "data_offsets": [100, 108]}})",
      data));
  REQUIRE_FALSE(past.has_value());
  CHECK(past.error().code == Errc::bad_offsets);
  CHECK_THAT(past.error().message, Catch::Contains("'b'"));
  // begin > end
  CHECK(parse_error(safetensors_raw(R"({"a": {"dtype": "F32", "shape": [0], "data_offsets": [8, 4]}})", data)) ==
        Errc::bad_offsets);
  // shape x dtype size disagrees with the span
  auto span = parse(safetensors_raw(R"({"a": {"dtype": "BF16", "shape": [3], "data_offsets": [0, 8]}})", data));
  REQUIRE_FALSE(span.has_value());
  CHECK(span.error().code == Errc::bad_offsets);
  CHECK_THAT(span.error().message, Catch::Contains("'a'") && Catch::Contains("6 bytes"));
  // a shape whose byte count overflows
  CHECK(parse_error(safetensors_raw(
            R"({"a": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 8]}})", data)) ==
        Errc::bad_offsets);
}

TEST_CASE("safetensors: an unknown dtype is unknown_dtype naming the tensor", "[core]") {
  auto r = parse(safetensors_raw(R"({"w": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}})", std::string(8, 0)));
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code == Errc::unknown_dtype);
  CHECK_THAT(r.error().message, Catch::Contains("'w'") && Catch::Contains("F64"));
}

TEST_CASE("safetensors: __metadata__ is accepted and empty files of tensors parse", "[core]") {
  auto r = parse(safetensors_raw(R"({"__metadata__": {"format": "pt"}})", ""));
  REQUIRE(r.has_value());
  CHECK(r->empty());
}

TEST_CASE("safetensors: random corruptions of a valid file never crash", "[core]") {
  const std::string good = safetensors_image(sample_tensors());
  std::mt19937 rng(1234);
  int failures = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string bad = good;
    const int edits = 1 + int(rng() % 4);
    for (int e = 0; e < edits; ++e) bad[rng() % bad.size()] = char(rng() & 0xff);
    if (rng() % 4 == 0) bad.resize(rng() % bad.size());
    auto r = parse(bad);
    if (!r.has_value()) {
      ++failures;
      CHECK_FALSE(r.error().message.empty());
    } else {
      for (const auto& t : *r) {
        // Every tensor handed out lies inside the image.
        CHECK(t.data >= reinterpret_cast<const uint8_t*>(bad.data()));
        CHECK(t.data + t.nbytes <= reinterpret_cast<const uint8_t*>(bad.data()) + bad.size());
      }
    }
  }
  CHECK(failures > 0);
}

TEST_CASE("checkpoint: a folder with model.safetensors", "[core]") {
  TempDir dir;
  write_file(dir.file("model.safetensors"), safetensors_image(sample_tensors()));
  auto c = Checkpoint::open(dir.str());
  REQUIRE(c.has_value());
  CHECK(c->tensors().size() == 4);
  REQUIRE(c->find("a.weight") != nullptr);
  CHECK(c->find("a.weight")->file == dir.file("model.safetensors"));
}

TEST_CASE("checkpoint: folders without weights are file_not_found", "[core]") {
  TempDir dir;
  auto none = Checkpoint::open(dir.str());
  REQUIRE_FALSE(none.has_value());
  CHECK(none.error().code == Errc::file_not_found);
  auto absent = Checkpoint::open(dir.file("no-such-folder"));
  REQUIRE_FALSE(absent.has_value());
  CHECK(absent.error().code == Errc::file_not_found);
}

TEST_CASE("checkpoint: sharded folders follow model.safetensors.index.json", "[core]") {
  TempDir dir;
  auto all = sample_tensors();
  write_file(dir.file("model-00001-of-00002.safetensors"), safetensors_image({all[0], all[1]}));
  write_file(dir.file("model-00002-of-00002.safetensors"), safetensors_image({all[2], all[3]}));
  nlohmann::json index = {{"metadata", {{"total_size", 52}}},
                          {"weight_map",
                           {{"b.weight", "model-00001-of-00002.safetensors"},
                            {"a.weight", "model-00001-of-00002.safetensors"},
                            {"c.ids", "model-00002-of-00002.safetensors"},
                            {"d.q", "model-00002-of-00002.safetensors"}}}};
  write_file(dir.file("model.safetensors.index.json"), index.dump());

  SECTION("all shards present") {
    auto c = Checkpoint::open(dir.str());
    REQUIRE(c.has_value());
    CHECK(c->tensors().size() == 4);
    CHECK(c->files().size() == 2);
    REQUIRE(c->find("d.q") != nullptr);
    CHECK(c->find("d.q")->file == dir.file("model-00002-of-00002.safetensors"));
    CHECK(c->find("a.weight")->shape == std::vector<int64_t>{2, 3});
  }
  SECTION("a shard the index names does not exist") {
    index["weight_map"]["e.extra"] = "model-00003-of-00003.safetensors";
    write_file(dir.file("model.safetensors.index.json"), index.dump());
    auto c = Checkpoint::open(dir.str());
    REQUIRE_FALSE(c.has_value());
    CHECK(c.error().code == Errc::file_not_found);
    CHECK_THAT(c.error().message, Catch::Contains("model-00003-of-00003.safetensors") && Catch::Contains("e.extra"));
  }
  SECTION("a tensor the index places in a shard is not there") {
    index["weight_map"]["c.ids"] = "model-00001-of-00002.safetensors";
    write_file(dir.file("model.safetensors.index.json"), index.dump());
    auto c = Checkpoint::open(dir.str());
    REQUIRE_FALSE(c.has_value());
    CHECK(c.error().code == Errc::missing_tensor);
    CHECK_THAT(c.error().message, Catch::Contains("c.ids"));
  }
  SECTION("a malformed index") {
    write_file(dir.file("model.safetensors.index.json"), "{\"weight_map\": {\"a\": ");
    auto c = Checkpoint::open(dir.str());
    REQUIRE_FALSE(c.has_value());
    CHECK(c.error().code == Errc::bad_json);
    write_file(dir.file("model.safetensors.index.json"), R"({"weight_map": {"a.weight": "../elsewhere.safetensors"}})");
    auto escape = Checkpoint::open(dir.str());
    REQUIRE_FALSE(escape.has_value());
    CHECK(escape.error().code == Errc::bad_json);
  }
  SECTION("a corrupt shard reports its own error") {
    write_file(dir.file("model-00002-of-00002.safetensors"), "abc");
    auto c = Checkpoint::open(dir.str());
    REQUIRE_FALSE(c.has_value());
    CHECK(c.error().code == Errc::truncated_file);
    CHECK_THAT(c.error().message, Catch::Contains("model-00002-of-00002.safetensors"));
  }
}
