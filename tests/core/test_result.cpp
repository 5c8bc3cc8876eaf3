#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "core/try.hpp"
#include "photon/result.hpp"

using photon::Errc;
using photon::Result;

namespace {
Result<int> parse_positive(int v) {
  if (v <= 0) return photon::fail(Errc::invalid_argument, "not positive: " + std::to_string(v));
  return v;
}
Result<int> doubled(int v) {
  PHOTON_ASSIGN_OR_RETURN(int x, parse_positive(v));
  return 2 * x;
}
Result<void> check(int v) {
  PHOTON_TRY(parse_positive(v));
  return {};
}
}  // namespace

TEST_CASE("Result carries a value or an error", "[core]") {
  Result<int> ok = parse_positive(3);
  REQUIRE(ok.has_value());
  CHECK(*ok == 3);
  Result<int> bad = parse_positive(-1);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code == Errc::invalid_argument);
  CHECK(bad.error().message == "not positive: -1");
  CHECK(bad.value_or(7) == 7);
  CHECK_THROWS_AS(bad.value(), photon::BadResultAccess);
}

TEST_CASE("Result propagates errors through the try macros", "[core]") {
  CHECK(*doubled(4) == 8);
  CHECK(doubled(0).error().code == Errc::invalid_argument);
  CHECK(check(1).has_value());
  CHECK(check(-5).error().message == "not positive: -5");
}

TEST_CASE("Result and_then / transform / or_else compose", "[core]") {
  auto r = parse_positive(5).and_then([](int v) { return parse_positive(v - 10); });
  CHECK(r.error().code == Errc::invalid_argument);
  auto t = parse_positive(5).transform([](int v) { return std::to_string(v); });
  CHECK(*t == "5");
  auto o = parse_positive(-2).or_else([](photon::Error) -> Result<int> { return 11; });
  CHECK(*o == 11);
  Result<void> v = check(2).and_then([]() -> Result<void> { return photon::fail(Errc::internal, "x"); });
  CHECK(v.error().code == Errc::internal);
}

TEST_CASE("Result holds move-only values", "[core]") {
  Result<std::unique_ptr<int>> r = std::make_unique<int>(9);
  REQUIRE(r);
  std::unique_ptr<int> p = std::move(r).value();
  CHECK(*p == 9);
}

TEST_CASE("every Errc has a distinct name", "[core]") {
  CHECK(photon::errc_name(Errc::ok) == "ok");
  CHECK(photon::errc_name(Errc::missing_tensor) == "missing_tensor");
  CHECK(photon::errc_name(static_cast<Errc>(-999)) == "unknown_status");
  for (int a = -26; a <= 0; ++a)
    for (int b = a + 1; b <= 0; ++b)
      CHECK(photon::errc_name(static_cast<Errc>(a)) != photon::errc_name(static_cast<Errc>(b)));
}
