#include "cli_weights.hpp"

namespace photon::cli {

void add_weight_flags(CLI::App& app, WeightFlags& f) {
  app.add_flag("--int8", f.int8, "quantize the linear layers to group-wise int8 at load");
  app.add_flag("--int8-lm-head", f.int8_lm_head, "--int8, and the LM head too");
  // Not range-checked here: the engine and the loader refuse a group below 1 with their own message.
  app.add_option("--int8-group", f.group, "with --int8: input features per scale")->capture_default_str();
}

std::string engine_weights(const WeightFlags& f) {
  return f.int8_lm_head ? "int8-lm-head" : f.int8 ? "int8" : "auto";
}

void set_load_weights(const WeightFlags& f, ModelLoadOptions& load) {
  load.int8_weights = f.any_int8();
  load.int8_lm_head = f.int8_lm_head;
  load.int8_group_size = f.group;
}

}  // namespace photon::cli
