// photon's C++ API from a CMake consumer: encode three prompts with the
// model's tokenizer, submit them to one engine, step and poll until all
// finish, and print each request's token ids and text.
//
//   photon-cmake-example models/stories260K
#include <photon/engine.hpp>
#include <photon/tokenizer.hpp>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace {

int report(const photon::Error& e) {
  std::fprintf(stderr, "error: %s (%s)\n", e.message.c_str(), std::string(photon::errc_name(e.code)).c_str());
  return 1;
}

struct Output {
  std::vector<int32_t> tokens;
  std::string text;
  bool finished = false;
};

}  // namespace

int main(int argc, char** argv) {
  const std::string model_dir = argc > 1 ? argv[1] : "models/stories260K";
  const std::vector<std::string> prompts = {
      "Once upon a time",
      "Lily and Ben were best friends. One day, they",
      "Tom saw a cat named Zo\xc3\xab \xf0\x9f\x90\xb1 in the garden.",
  };

  auto tokenizer = photon::Tokenizer::load(model_dir);
  if (!tokenizer) return report(tokenizer.error());
  auto engine = photon::Engine::open({.model_dir = model_dir, .backend = "cpu", .kv_blocks = 64});
  if (!engine) return report(engine.error());

  std::map<photon::RequestId, size_t> index;
  std::vector<Output> out(prompts.size());
  std::vector<photon::DetokenizerStream> streams;
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto ids = tokenizer->encode(prompts[i]);
    if (!ids) return report(ids.error());
    photon::Request request{.prompt_tokens = *ids, .sampling = {.temperature = 0.0f}, .max_tokens = 64};
    auto id = engine->submit(std::move(request));
    if (!id) return report(id.error());
    index[*id] = i;
    streams.emplace_back(*tokenizer, photon::DecodeOptions{.skip_special_tokens = true});
    for (int32_t t : *ids) (void)streams.back().feed(t);  // decode the output in the prompt's context
  }

  size_t finished = 0;
  std::vector<photon::Event> events;
  while (finished < prompts.size()) {
    auto step = engine->step();
    if (!step) return report(step.error());
    events.clear();
    engine->poll(events);
    for (const photon::Event& e : events) {
      const size_t i = index.at(e.request);
      if (e.token >= 0) {
        out[i].tokens.push_back(e.token);
        if (auto piece = streams[i].feed(e.token)) out[i].text += *piece;
      }
      if (e.finish != photon::FinishReason::none) {
        out[i].text += streams[i].finish();
        out[i].finished = true;
        ++finished;
      }
    }
  }

  for (size_t i = 0; i < out.size(); ++i) {
    std::printf("request %zu tokens:", i);
    for (int32_t t : out[i].tokens) std::printf(" %d", t);
    std::printf("\nrequest %zu text: %s\n", i, out[i].text.c_str());
  }
  return 0;
}
