// Fuzz target: config.json text through ModelConfig::parse, then what the
// loader derives from an accepted config (the list of expected tensors and
// the RoPE frequencies). Properties of an accepted config: validate() agrees,
// every number is finite, shapes are positive, RoPE frequencies are finite.
#include <cmath>
#include <cstdint>

#include "fuzz_util.hpp"
#include "model/config.hpp"
#include "model/hf_tensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace photon;
  auto c = ModelConfig::parse(fuzz::as_text(data, size), "config.json");
  if (!c) {
    FUZZ_CHECK(!c.error().message.empty());
    return 0;
  }
  FUZZ_CHECK(c->validate().has_value());
  FUZZ_CHECK(std::isfinite(c->rms_norm_eps) && c->rms_norm_eps > 0);
  FUZZ_CHECK(std::isfinite(c->rope.theta) && std::isfinite(c->rope.factor) &&
             std::isfinite(c->rope.low_freq_factor) && std::isfinite(c->rope.high_freq_factor));
  for (const ExpectedTensor& e : expected_tensors(*c))
    for (int64_t d : e.shape) FUZZ_CHECK(d > 0);
  // inv_freq has head_dim / 2 entries; a larger head_dim is only reached with
  // a checkpoint of matching (gigabyte) size, so the fuzzer does not allocate it.
  if (c->head_dim <= 65536)
    for (float f : rope_inv_freq(c->rope, c->head_dim)) FUZZ_CHECK(std::isfinite(f));
  return 0;
}
