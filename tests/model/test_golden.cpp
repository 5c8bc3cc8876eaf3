// The CPU forward pass against Hugging Face transformers' float64 references
// (tests/data/golden) and llama2.c's greedy generations of stories260K:
// logits at every position, greedy continuations, the same prompts fed in
// chunks, token by token, and inside a batch with other sequences.
#include <catch2/catch.hpp>

#include <cstring>
#include <nlohmann/json.hpp>

#include "core/cpu_backend.hpp"
#include "core/safetensors.hpp"
#include "model/model.hpp"
#include "support/model_driver.hpp"
#include "support/safetensors_writer.hpp"
#include "support/test_data.hpp"

using namespace photon;
using namespace photon::test;

namespace {

constexpr double kRelTol = 1e-4;  // max|diff| <= 1e-4 * max|ref|

struct GoldenCase {
  std::string name;
  std::vector<int32_t> prompt;
  std::vector<int32_t> greedy;
  Logits logits;  // [T][V] reference logits at every prompt position
};

std::vector<GoldenCase> load_cases(const std::string& dir) {
  const auto ref = nlohmann::json::parse(read_file_bytes(dir + "/reference.json"));
  const auto file = must(SafetensorsFile::open(dir + "/reference.safetensors"));
  std::vector<GoldenCase> cases;
  for (const auto& c : ref["cases"]) {
    GoldenCase g;
    g.name = c["name"].get<std::string>();
    g.prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    g.greedy = c["greedy_ids"].get<std::vector<int32_t>>();
    const SafetensorsTensor* t = file.find(g.name + ".logits");
    REQUIRE(t != nullptr);
    REQUIRE(t->dtype == DType::f32);
    REQUIRE(t->shape.size() == 2);
    REQUIRE(t->shape[0] == int64_t(g.prompt.size()));
    const size_t V = size_t(t->shape[1]);
    for (size_t r = 0; r < g.prompt.size(); ++r) {
      std::vector<float> row(V);
      std::memcpy(row.data(), t->data + r * V * 4, V * 4);
      g.logits.push_back(std::move(row));
    }
    const SafetensorsTensor* ids = file.find(g.name + ".prompt_ids");
    REQUIRE(ids != nullptr);
    std::vector<int32_t> stored(g.prompt.size());
    std::memcpy(stored.data(), ids->data, ids->nbytes);
    REQUIRE(stored == g.prompt);
    cases.push_back(std::move(g));
  }
  return cases;
}

struct Loaded {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model;
};

Loaded load(const std::string& dir, int32_t threads = 2) {
  Loaded l;
  l.backend = must(make_cpu_backend({.num_threads = threads}));
  l.model = must(Model::load(dir, *l.backend));
  return l;
}

void check_logits(const Logits& got, const Logits& ref, const std::string& what) {
  const Diff d = compare_rows(got, ref);
  INFO(what << ": max|diff| " << d.max_abs_diff << ", max|ref| " << d.max_abs_ref);
  CHECK(d.within(kRelTol));
}

void golden_model(const std::string& name) {
  const std::string dir = golden_dir(name);
  const auto cases = load_cases(dir);
  REQUIRE(cases.size() == 5);

  SECTION("whole prompt: logits at every position") {
    for (const auto& c : cases) {
      Loaded l = load(dir);
      ModelDriver d(*l.model, *l.backend, 64);
      check_logits(d.prefill_all(c.prompt), c.logits, name + " " + c.name + " whole");
    }
  }
  SECTION("greedy continuation") {
    Loaded l = load(dir);
    ModelDriver d(*l.model, *l.backend, 256);
    for (const auto& c : cases) {
      INFO(name << " " << c.name);
      CHECK(d.greedy(c.prompt, int32_t(c.greedy.size())) == c.greedy);
    }
  }
  SECTION("chunked prefill and token by token") {
    for (size_t chunk : {size_t(1), size_t(3), size_t(16), size_t(37)}) {
      Loaded l = load(dir);
      ModelDriver d(*l.model, *l.backend, 256);
      for (const auto& c : cases) {
        if (chunk == 1 && c.prompt.size() > 64) continue;  // the 300-token case runs with the larger chunks
        check_logits(d.prefill_all(c.prompt, chunk), c.logits,
                     name + " " + c.name + " chunk " + std::to_string(chunk));
      }
    }
    // Token by token over the longest prompt too (one fresh model, 300 steps).
    Loaded l = load(dir);
    ModelDriver d(*l.model, *l.backend, 64);
    check_logits(d.prefill_all(cases.back().prompt, 1), cases.back().logits, name + " " + cases.back().name + " chunk 1");
  }
  SECTION("inside a batch with other sequences") {
    Loaded l = load(dir);
    ModelDriver d(*l.model, *l.backend, 256);
    // All prompts prefilled together in one ragged batch, logits for every row.
    std::vector<ModelDriver::Chunk> prefill;
    for (const auto& c : cases) prefill.push_back({d.new_sequence(), c.prompt, true});
    const auto rows = d.step(prefill);
    for (size_t i = 0; i < cases.size(); ++i) check_logits(rows[i], cases[i].logits, name + " " + cases[i].name + " batch");
    // Then every sequence decodes greedily in shared batches.
    std::vector<std::vector<int32_t>> out(cases.size());
    std::vector<int32_t> next(cases.size());
    for (size_t i = 0; i < cases.size(); ++i) next[i] = argmax(rows[i].back());
    for (size_t s = 0; s < cases[0].greedy.size(); ++s) {
      std::vector<ModelDriver::Chunk> decode;
      for (size_t i = 0; i < cases.size(); ++i) {
        out[i].push_back(next[i]);
        decode.push_back({prefill[i].seq, {next[i]}, false});
      }
      const auto step_rows = d.step(decode);
      for (size_t i = 0; i < cases.size(); ++i) next[i] = argmax(step_rows[i][0]);
    }
    for (size_t i = 0; i < cases.size(); ++i) {
      INFO(name << " " << cases[i].name << " batched greedy");
      CHECK(out[i] == cases[i].greedy);
    }
  }
  SECTION("a prompt split across a mixed batch: prefill chunks beside decodes") {
    Loaded l = load(dir);
    ModelDriver d(*l.model, *l.backend, 256);
    const GoldenCase& long_case = cases[3];   // 64 tokens, fed in chunks of 10
    const GoldenCase& short_case = cases[1];  // 5 tokens, then decoding beside the chunks
    const int32_t a = d.new_sequence(), b = d.new_sequence();
    Logits long_rows;
    std::vector<int32_t> short_out;
    int32_t short_next = argmax(d.step({{b, short_case.prompt, false}})[0][0]);
    for (size_t begin = 0; begin < long_case.prompt.size(); begin += 10) {
      const size_t end = std::min(long_case.prompt.size(), begin + 10);
      std::vector<int32_t> chunk(long_case.prompt.begin() + std::ptrdiff_t(begin),
                                 long_case.prompt.begin() + std::ptrdiff_t(end));
      short_out.push_back(short_next);
      const auto r = d.step({{b, {short_next}, false}, {a, chunk, true}});
      short_next = argmax(r[0][0]);
      for (const auto& row : r[1]) long_rows.push_back(row);
    }
    check_logits(long_rows, long_case.logits, name + " mixed batch");
    CHECK(std::equal(short_out.begin(), short_out.end(), short_case.greedy.begin()));
  }
}

struct StoriesGolden {
  std::string name;
  std::vector<int32_t> prompt;
  std::vector<int32_t> generated;
  std::vector<float> first_step_logits;
};

std::vector<StoriesGolden> stories_goldens() {
  std::vector<StoriesGolden> out;
  for (const char* n : {"bos_only", "once_upon_a_time", "lily_and_ben", "unicode_byte_fallback"}) {
    const auto j = nlohmann::json::parse(read_file_bytes(stories_dir() + "/golden/" + n + ".json"));
    out.push_back({n, j["prompt_ids"].get<std::vector<int32_t>>(), j["generated_ids"].get<std::vector<int32_t>>(),
                   j["first_step_logits"].get<std::vector<float>>()});
  }
  return out;
}

void stories_model(const std::string& dir) {
  Loaded l = load(dir);
  ModelDriver d(*l.model, *l.backend, 128);
  for (const auto& g : stories_goldens()) {
    INFO(dir << " " << g.name);
    const int32_t s = d.new_sequence();
    const Logits first = d.step({{s, g.prompt, false}})[0];
    check_logits(first, Logits{g.first_step_logits}, dir + " " + g.name + " first step");
    std::vector<int32_t> out;
    int32_t next = argmax(first[0]);
    while (out.size() < g.generated.size()) {
      out.push_back(next);
      next = argmax(d.step({{s, {next}, false}})[0][0]);
    }
    CHECK(out == g.generated);
  }
}

}  // namespace

TEST_CASE("golden: llama3-tiny matches transformers", "[model]") { golden_model("llama3-tiny"); }

TEST_CASE("golden: qwen3-tiny matches transformers", "[model]") { golden_model("qwen3-tiny"); }

TEST_CASE("golden: stories260K (tied) reproduces llama2.c's greedy generations", "[model]") {
  stories_model(stories_dir());
}

TEST_CASE("golden: stories260K-untied reproduces llama2.c's greedy generations", "[model]") {
  stories_model(stories_untied_dir());
}

TEST_CASE("golden: results do not depend on the CPU thread count", "[model]") {
  const auto cases = load_cases(golden_dir("qwen3-tiny"));
  Logits by_threads[2];
  int i = 0;
  for (int32_t threads : {0, 3}) {
    Loaded l = load(golden_dir("qwen3-tiny"), threads);
    ModelDriver d(*l.model, *l.backend, 64);
    by_threads[i++] = d.prefill_all(cases[2].prompt, 5);
  }
  CHECK(by_threads[0] == by_threads[1]);
}
