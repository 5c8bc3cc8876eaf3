#include "cli_sampling.hpp"

namespace photon::cli {

void add_sampling_flags(CLI::App& app, SamplingFlags& f) {
  f.options.temperature = 0.0f;
  app.add_option("--temperature", f.options.temperature, "sampling temperature (0: greedy argmax)")->capture_default_str();
  app.add_option("--top-k", f.options.top_k, "keep the k most likely tokens (0: off)")->capture_default_str();
  app.add_option("--top-p", f.options.top_p, "nucleus sampling mass in (0, 1] (1: off)")->capture_default_str();
  app.add_option("--min-p", f.options.min_p, "drop tokens below min-p x the top probability (0: off)")
      ->capture_default_str();
  app.add_option("--seed", f.seed, "random seed of the request (-1: the engine picks one)")->capture_default_str();
  app.add_option("--repetition-penalty", f.options.repetition_penalty, "HF repetition penalty (1: off)")
      ->capture_default_str();
  app.add_option("--presence-penalty", f.options.presence_penalty, "OpenAI presence penalty in [-2, 2]")
      ->capture_default_str();
  app.add_option("--frequency-penalty", f.options.frequency_penalty, "OpenAI frequency penalty in [-2, 2]")
      ->capture_default_str();
}

SamplingOptions sampling_options(const SamplingFlags& f) {
  SamplingOptions o = f.options;
  if (f.seed >= 0) o.seed = static_cast<uint64_t>(f.seed);
  return o;
}

}  // namespace photon::cli
