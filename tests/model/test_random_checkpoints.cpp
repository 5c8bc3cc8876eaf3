// Checkpoints of shapes the shared goldens do not cover (odd vocab sizes,
// MQA, 3+ layers, untied Llama, tied Qwen3, F16/F32 storage, shards), written
// from code: the CPU forward pass against an independent float64 forward,
// chunked against whole prompts, and load round trips.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <vector>

#include "core/cpu_backend.hpp"
#include "model/hf_tensors.hpp"
#include "model/model.hpp"
#include "model/weight_source.hpp"
#include "support/checkpoint_writer.hpp"
#include "support/model_driver.hpp"
#include "support/reference_decoder.hpp"

using namespace photon;
using namespace photon::test;

namespace {

struct Variant {
  std::string name;
  nlohmann::json config;
  DType storage;
  int shards;
};

std::vector<Variant> variants() {
  return {
      {"llama untied MQA, odd vocab, head_dim != hidden/heads, llama3 rope",
       {{"architectures", {"LlamaForCausalLM"}}, {"vocab_size", 1001}, {"hidden_size", 48}, {"intermediate_size", 100},
        {"num_hidden_layers", 3}, {"num_attention_heads", 6}, {"num_key_value_heads", 1}, {"head_dim", 12},
        {"max_position_embeddings", 256}, {"rms_norm_eps", 1e-5}, {"rope_theta", 500000.0},
        {"rope_scaling", {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                          {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 32}}},
        {"tie_word_embeddings", false}, {"eos_token_id", {5, 6}}},
       DType::bf16, 1},
      {"qwen3 tied, GQA, head_dim 24 with hidden 40, v5 rope_parameters",
       {{"architectures", {"Qwen3ForCausalLM"}}, {"vocab_size", 777}, {"hidden_size", 40}, {"intermediate_size", 72},
        {"num_hidden_layers", 3}, {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"head_dim", 24},
        {"max_position_embeddings", 512}, {"rms_norm_eps", 1e-6},
        {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 1000000.0}}}, {"tie_word_embeddings", true},
        {"eos_token_id", 2}},
       DType::bf16, 1},
      {"llama MHA without head_dim key, F16 weights in 3 shards, 4 layers",
       {{"architectures", {"LlamaForCausalLM"}}, {"vocab_size", 515}, {"hidden_size", 32}, {"intermediate_size", 50},
        {"num_hidden_layers", 4}, {"num_attention_heads", 4}, {"max_position_embeddings", 128}, {"rms_norm_eps", 1e-5},
        {"rope_theta", 10000.0}, {"tie_word_embeddings", true}},
       DType::f16, 3},
      {"qwen3 untied MQA, F32 weights",
       {{"architectures", {"Qwen3ForCausalLM"}}, {"vocab_size", 301}, {"hidden_size", 24}, {"intermediate_size", 40},
        {"num_hidden_layers", 3}, {"num_attention_heads", 3}, {"num_key_value_heads", 1}, {"head_dim", 16},
        {"max_position_embeddings", 64}, {"rms_norm_eps", 1e-6}, {"rope_theta", 1000000.0},
        {"tie_word_embeddings", false}},
       DType::f32, 2},
  };
}

std::vector<int32_t> random_prompt(int32_t vocab, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> p(n);
  for (auto& t : p) t = int32_t(rng() % uint32_t(vocab));
  return p;
}

}  // namespace

TEST_CASE("random checkpoints: forward matches an independent float64 decoder", "[model]") {
  for (const Variant& v : variants()) {
    INFO(v.name);
    TempDir dir;
    const ModelConfig config = write_checkpoint(dir.str(), v.config, 11, v.storage, v.shards);
    auto backend = must(make_cpu_backend({.num_threads = 2}));
    auto model = must(Model::load(dir.str(), *backend));
    CHECK(model->config().vocab_size == config.vocab_size);
    const auto prompt = random_prompt(config.vocab_size, std::min<size_t>(45, size_t(config.max_position_embeddings)), 3);

    CheckpointSource source(must(Checkpoint::open(dir.str())), dir.str());
    const ReferenceDecoder reference(config, source);
    const auto ref = reference.forward(prompt);

    ModelDriver d(*model, *backend, 64);
    const Logits whole = d.prefill_all(prompt);
    const Diff diff = compare_rows(whole, ref);
    INFO("max|diff| " << diff.max_abs_diff << ", max|ref| " << diff.max_abs_ref);
    CHECK(diff.within(1e-4));

    for (size_t chunk : {size_t(1), size_t(7)}) {
      const Logits chunked = d.prefill_all(prompt, chunk);
      const Diff c = compare_rows(chunked, whole);
      INFO("chunk " << chunk << ": max|diff| " << c.max_abs_diff);
      CHECK(c.within(1e-4));
    }
  }
}

TEST_CASE("random checkpoints: loading round-trips the weights exactly", "[model]") {
  for (const Variant& v : variants()) {
    if (v.storage == DType::f16) continue;  // bf16 -> f16 rounds tiny values; exact only for bf16 and f32 storage
    INFO(v.name);
    TempDir dir;
    const ModelConfig config = write_checkpoint(dir.str(), v.config, 5, v.storage, v.shards);
    auto backend = must(make_cpu_backend({.num_threads = 1}));
    auto loaded = must(Model::load(dir.str(), *backend));
    auto created = must(Model::create_random(config, *backend, 5));
    const auto prompt = random_prompt(config.vocab_size, 20, 9);
    ModelDriver a(*loaded, *backend, 16), b(*created, *backend, 16);
    // f32 storage widens the same bf16 values exactly, so both paths compute identical logits.
    CHECK(a.prefill_all(prompt) == b.prefill_all(prompt));
  }
}

TEST_CASE("random weights: same seed same model, other seed other model", "[model]") {
  const Variant v = variants()[1];
  auto config = must(ModelConfig::parse(v.config.dump(), "config.json"));
  auto backend = must(make_cpu_backend({}));
  auto m1 = must(Model::create_random(config, *backend, 42));
  auto m2 = must(Model::create_random(config, *backend, 42));
  auto m3 = must(Model::create_random(config, *backend, 43));
  const auto prompt = random_prompt(config.vocab_size, 9, 1);
  ModelDriver d1(*m1, *backend, 8), d2(*m2, *backend, 8), d3(*m3, *backend, 8);
  const Logits l1 = d1.prefill_all(prompt);
  CHECK(l1 == d2.prefill_all(prompt));
  CHECK(l1 != d3.prefill_all(prompt));
}

TEST_CASE("random weights: drawn on a thread pool, the same values", "[model]") {
  // RandomSource with a pool (ModelLoadOptions::pool in create_random) splits each tensor's draws
  // (four values each) into chunks that start at any draw; every tensor of every variant must hold
  // exactly the one-thread values.
  auto pool = must(ThreadPool::create(3));
  for (const Variant& v : variants()) {
    INFO(v.name);
    const ModelConfig config = must(ModelConfig::parse(v.config.dump(), "config.json"));
    RandomSource one(config, 11), many(config, 11, pool.get());
    for (const ExpectedTensor& e : expected_tensors(config)) {
      INFO(e.name);
      const HostTensor a = must(one.get(e.name));
      const std::vector<uint8_t> bytes(a.data, a.data + a.nbytes);  // the next get() reuses the scratch
      const HostTensor b = must(many.get(e.name));
      REQUIRE(b.nbytes == bytes.size());
      CHECK(std::equal(bytes.begin(), bytes.end(), b.data));
    }
  }
  // And through create_random: the same logits with and without the pool.
  const Variant v = variants()[0];
  const ModelConfig config = must(ModelConfig::parse(v.config.dump(), "config.json"));
  auto backend = must(make_cpu_backend({.num_threads = 1}));
  ModelLoadOptions pooled;
  pooled.pool = pool.get();
  auto m1 = must(Model::create_random(config, *backend, 42));
  auto m2 = must(Model::create_random(config, *backend, 42, pooled));
  const auto prompt = random_prompt(config.vocab_size, 9, 1);
  ModelDriver d1(*m1, *backend, 8), d2(*m2, *backend, 8);
  CHECK(d1.prefill_all(prompt) == d2.prefill_all(prompt));
}

TEST_CASE("model: packed activations give the logits of one buffer per tensor", "[model]") {
  // ModelLoadOptions::pack_activations carves every step's tensors back to back for its own token
  // and row counts; the CPU backend's logits must not change by a bit, over steps whose counts rise
  // and fall (the workspace grows mid-run) and that mix prefill chunks, decodes and all-row logits.
  for (const Variant& v : variants()) {
    INFO(v.name);
    const ModelConfig config = must(ModelConfig::parse(v.config.dump(), "config.json"));
    auto backend = must(make_cpu_backend({.num_threads = 2}));
    ModelLoadOptions packed_options;
    packed_options.pack_activations = true;
    auto spread = must(Model::create_random(config, *backend, 17));
    auto packed = must(Model::create_random(config, *backend, 17, packed_options));
    ModelDriver a(*spread, *backend, 32), b(*packed, *backend, 32);
    const std::vector<std::vector<int32_t>> prompts = {random_prompt(config.vocab_size, 3, 1),
                                                       random_prompt(config.vocab_size, 19, 2),
                                                       random_prompt(config.vocab_size, 8, 3)};
    std::vector<int32_t> seqs;
    for (size_t i = 0; i < prompts.size(); ++i) {
      seqs.push_back(a.new_sequence());
      CHECK(b.new_sequence() == seqs.back());
    }
    auto same = [&](const std::vector<ModelDriver::Chunk>& chunks) {
      const auto la = a.step(chunks), lb = b.step(chunks);
      CHECK(la == lb);
      return la;
    };
    same({{seqs[0], prompts[0], true}});  // 3 tokens: the workspace starts small
    const auto first = same({{seqs[1], prompts[1], false}, {seqs[2], prompts[2], true}});  // 27 tokens: it grows
    std::vector<int32_t> next = {argmax(first[0][0]), argmax(first[1].back())};
    for (int32_t t = 0; t < 4; ++t) {  // decode steps of one and of three sequences
      const auto out = t % 2 == 0 ? same({{seqs[1], {next[0]}, false}})
                                  : same({{seqs[0], {next[1]}, false}, {seqs[1], {next[0]}, false},
                                          {seqs[2], {next[1]}, true}});
      next[0] = argmax(out[t % 2 == 0 ? 0 : 1][0]);
    }
    same({{seqs[2], random_prompt(config.vocab_size, 11, 4), true}, {seqs[0], {next[0]}, false}});  // mixed
  }
}

TEST_CASE("model: forward refuses a step without a KV cache or past max_position_embeddings", "[model]") {
  const Variant v = variants()[3];  // max_position_embeddings 64
  auto config = must(ModelConfig::parse(v.config.dump(), "config.json"));
  auto backend = must(make_cpu_backend({}));
  auto model = must(Model::create_random(config, *backend, 1));
  BatchPlan plan;
  const std::vector<int32_t> ids(70, 1);
  const std::vector<int32_t> blocks = {0, 1, 2, 3, 4};
  plan.add_sequence(ids.data(), 70, 0, blocks.data(), 5, 16, true);
  plan.finalize();
  const StepPlanView view = must(backend->stage_plan(plan));
  auto no_cache = model->forward(view);
  REQUIRE_FALSE(no_cache.has_value());
  CHECK(no_cache.error().code == Errc::invalid_state);
  must(model->init_kv_cache(8, 16));
  auto too_long = model->forward(view);
  REQUIRE_FALSE(too_long.has_value());
  CHECK(too_long.error().code == Errc::capacity_exceeded);
  CHECK(model->init_kv_cache(0, 16).error().code == Errc::invalid_argument);
  CHECK(model->kv_bytes_per_block(16) == size_t(3 * 2 * 16 * 1 * 16) * dtype_size(backend->kv_dtype()));
}
