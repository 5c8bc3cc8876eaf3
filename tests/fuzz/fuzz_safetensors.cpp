// Fuzz target: a whole safetensors image (8-byte header length, JSON header,
// data) through parse_safetensors, the parser behind every checkpoint load.
// Properties of an accepted image: every tensor lies inside the image, its
// byte count is numel x dtype size, tensors do not overlap, names are sorted
// and unique.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/safetensors.hpp"
#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace photon;
  auto r = parse_safetensors(data, size, "fuzz.safetensors");
  if (!r) {
    FUZZ_CHECK(!r.error().message.empty());
    return 0;
  }
  std::vector<std::pair<const uint8_t*, size_t>> spans;
  for (size_t i = 0; i < r->size(); ++i) {
    const SafetensorsTensor& t = (*r)[i];
    if (i > 0) FUZZ_CHECK((*r)[i - 1].name < t.name);
    FUZZ_CHECK(t.numel() >= 0);
    FUZZ_CHECK(size_t(t.numel()) * dtype_size(t.dtype) == t.nbytes);
    FUZZ_CHECK(t.nbytes == 0 || (t.data >= data + 8 && t.nbytes <= size_t(data + size - t.data)));
    volatile uint8_t sink = 0;  // read the first and last byte: ASan sees any overrun
    if (t.nbytes > 0) sink = uint8_t(sink ^ t.data[0] ^ t.data[t.nbytes - 1]);
    (void)sink;
    (void)t.shape_string();
    if (t.nbytes > 0) spans.emplace_back(t.data, t.nbytes);
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i) FUZZ_CHECK(spans[i - 1].first + spans[i - 1].second <= spans[i].first);
  return 0;
}
