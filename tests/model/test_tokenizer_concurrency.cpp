// One Tokenizer shared by several threads: every thread's ids equal the
// single-threaded ids (the per-word BPE cache is written and read
// concurrently), and streams/matchers on different threads are independent.
#include <random>
#include <thread>

#include "tokenizer_test_util.hpp"

using namespace photon;
using photon::test::tokenizer;

TEST_CASE("concurrent encode and decode on one tokenizer give the single-threaded results", "[model]") {
  for (const char* name : {"qwen3", "llama3"}) {
    const Tokenizer& tok = tokenizer(name);
    // Texts with many distinct words, so threads keep inserting into the cache.
    std::mt19937 rng(17);
    std::uniform_int_distribution<int> letter('a', 'z'), len(1, 12);
    std::vector<std::string> texts(64);
    for (auto& t : texts)
      for (int w = 0; w < 200; ++w) {
        for (int k = len(rng); k > 0; --k) t.push_back(static_cast<char>(letter(rng)));
        t += w % 7 ? " " : ", 日本 ";
      }
    std::vector<std::vector<int32_t>> expected;
    for (const auto& t : texts) expected.push_back(*tok.encode(t));

    constexpr int kThreads = 4;
    std::vector<int> mismatches(kThreads, 0);
    std::vector<std::thread> threads;
    for (int th = 0; th < kThreads; ++th)
      threads.emplace_back([&, th] {
        for (int round = 0; round < 3; ++round)
          for (size_t i = 0; i < texts.size(); ++i) {
            const size_t k = (i * 7 + static_cast<size_t>(th) * 13 + static_cast<size_t>(round)) % texts.size();
            auto ids = tok.encode(texts[k]);
            if (!ids || *ids != expected[k]) ++mismatches[th];
            auto text = tok.decode(expected[k], {.skip_special_tokens = true});
            if (!text || *text != texts[k]) ++mismatches[th];
          }
      });
    for (auto& t : threads) t.join();
    for (int th = 0; th < kThreads; ++th) CHECK(mismatches[th] == 0);
  }
}
