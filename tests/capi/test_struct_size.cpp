// The extensible-struct rule (capi/struct_size.hpp) on a synthetic struct
// whose "v1" ends at field b and whose "v2" appended c and d.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "capi/struct_size.hpp"

namespace {
struct Demo {
  uint32_t struct_size;
  float a;
  double b;  // v1 ends here: sizeof(v1) == 16
  int32_t c;
  bool d;
};
struct Broken {  // a Layout that forgets a field
  uint32_t struct_size;
  int32_t x;
  int32_t y;
};
Demo demo_defaults() { return Demo{sizeof(Demo), 1.5f, 2.5, 7, true}; }
}  // namespace

namespace photon::capi {
template <>
struct Layout<Demo> {
  static constexpr std::string_view name = "demo_params";
  static constexpr FieldSpan fields[] = {PHOTON_CAPI_FIELD(Demo, struct_size), PHOTON_CAPI_FIELD(Demo, a),
                                         PHOTON_CAPI_FIELD(Demo, b), PHOTON_CAPI_FIELD(Demo, c),
                                         PHOTON_CAPI_FIELD(Demo, d)};
};
template <>
struct Layout<Broken> {
  static constexpr std::string_view name = "broken";
  static constexpr FieldSpan fields[] = {PHOTON_CAPI_FIELD(Broken, struct_size), PHOTON_CAPI_FIELD(Broken, y)};
};
}  // namespace photon::capi

using namespace photon::capi;
using photon::Errc;

TEST_CASE("layout_is_complete notices a field missing from a Layout", "[capi]") {
  STATIC_REQUIRE(layout_is_complete<Demo>());
  STATIC_REQUIRE_FALSE(layout_is_complete<Broken>());
}

TEST_CASE("known sizes are field ends, padded field ends, or at least sizeof", "[capi]") {
  CHECK(is_known_size<Demo>(4));   // struct_size only
  CHECK(is_known_size<Demo>(8));   // .. a
  CHECK(is_known_size<Demo>(16));  // .. b (v1)
  CHECK(is_known_size<Demo>(20));  // .. c
  CHECK(is_known_size<Demo>(21));  // .. d
  CHECK(is_known_size<Demo>(24));  // sizeof
  CHECK(is_known_size<Demo>(64));  // a newer, larger struct
  CHECK_FALSE(is_known_size<Demo>(0));
  CHECK_FALSE(is_known_size<Demo>(3));
  CHECK_FALSE(is_known_size<Demo>(6));   // half of a
  CHECK_FALSE(is_known_size<Demo>(12));  // half of b
}

TEST_CASE("read_params: NULL gives the defaults", "[capi]") {
  auto r = read_params<Demo>(nullptr, demo_defaults(), "params");
  REQUIRE(r);
  CHECK(r->a == 1.5f);
  CHECK(r->c == 7);
}

TEST_CASE("read_params: an older, smaller struct keeps the defaults of the fields it lacks", "[capi]") {
  Demo v1{};
  v1.struct_size = 16;
  v1.a = -1.0f;
  v1.b = -2.0;
  v1.c = 12345;  // beyond the caller's 16 bytes: must not be read
  auto r = read_params<Demo>(&v1, demo_defaults(), "params");
  REQUIRE(r);
  CHECK(r->struct_size == sizeof(Demo));
  CHECK(r->a == -1.0f);
  CHECK(r->b == -2.0);
  CHECK(r->c == 7);
  CHECK(r->d == true);
}

TEST_CASE("read_params: a newer, larger struct is accepted only with a zero tail", "[capi]") {
  std::vector<unsigned char> bytes(sizeof(Demo) + 16, 0);
  Demo d = demo_defaults();
  d.a = 3.0f;
  d.struct_size = uint32_t(bytes.size());
  std::memcpy(bytes.data(), &d, sizeof d);
  auto ok = read_params<Demo>(reinterpret_cast<const Demo*>(bytes.data()), demo_defaults(), "params");
  REQUIRE(ok);
  CHECK(ok->a == 3.0f);

  bytes[sizeof(Demo) + 5] = 1;
  auto bad = read_params<Demo>(reinterpret_cast<const Demo*>(bytes.data()), demo_defaults(), "params");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code == Errc::invalid_argument);
  CHECK(bad.error().message.find("demo_params has a non-zero byte at offset 29") != std::string::npos);
}

TEST_CASE("read_params: a size that no release had is rejected with its name", "[capi]") {
  Demo d = demo_defaults();
  d.struct_size = 12;
  auto r = read_params<Demo>(&d, demo_defaults(), "params");
  REQUIRE_FALSE(r);
  CHECK(r.error().code == Errc::invalid_argument);
  CHECK(r.error().message == "params->struct_size = 12 is not a size of demo_params (use sizeof; this libphoton's is 24)");
  d.struct_size = 0;
  CHECK_FALSE(read_params<Demo>(&d, demo_defaults(), "params"));
}

TEST_CASE("init_params writes defaults for exactly the caller's size", "[capi]") {
  SECTION("smaller") {
    Demo d;
    std::memset(&d, 0xAB, sizeof d);
    REQUIRE(init_params(&d, 16, demo_defaults()));
    CHECK(d.struct_size == 16);
    CHECK(d.a == 1.5f);
    CHECK(d.b == 2.5);
    unsigned char after[sizeof(Demo) - 16];
    std::memcpy(after, reinterpret_cast<unsigned char*>(&d) + 16, sizeof after);
    for (unsigned char byte : after) CHECK(byte == 0xAB);  // not the caller's memory
  }
  SECTION("larger: the unknown tail is zeroed, so the struct passes read_params") {
    std::vector<unsigned char> bytes(sizeof(Demo) + 8, 0xCD);
    auto* d = reinterpret_cast<Demo*>(bytes.data());
    REQUIRE(init_params(d, bytes.size(), demo_defaults()));
    CHECK(d->struct_size == bytes.size());
    for (size_t i = sizeof(Demo); i < bytes.size(); ++i) CHECK(bytes[i] == 0);
    CHECK(read_params<Demo>(d, demo_defaults(), "params"));
  }
  SECTION("errors") {
    Demo d;
    CHECK(init_params<Demo>(nullptr, sizeof d, demo_defaults()).error().code == Errc::invalid_argument);
    CHECK(init_params(&d, 2, demo_defaults()).error().code == Errc::invalid_argument);
  }
}

TEST_CASE("write_sized writes the caller's bytes only and zeroes an unknown tail", "[capi]") {
  std::vector<unsigned char> small(16, 0xEE);
  write_sized(small.data(), 8, demo_defaults());
  Demo got{};
  std::memcpy(&got, small.data(), 8);
  CHECK(got.a == 1.5f);
  CHECK(small[8] == 0xEE);
  std::vector<unsigned char> big(sizeof(Demo) + 8, 0xEE);
  write_sized(big.data(), big.size(), demo_defaults());
  for (size_t i = sizeof(Demo); i < big.size(); ++i) CHECK(big[i] == 0);
}
