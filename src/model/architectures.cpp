#include "model/architectures.hpp"

#include "model/decoder.hpp"

namespace photon {

namespace {
// Defaults from transformers' LlamaConfig and Qwen3Config.
constexpr Architecture kArchitectures[] = {
    {"LlamaForCausalLM", /*qk_norm=*/false, 1e-6, 2048, 1, 2, &make_decoder_model},
    {"Qwen3ForCausalLM", /*qk_norm=*/true, 1e-6, 32768, -1, -1, &make_decoder_model},
};
}  // namespace

const Architecture* find_architecture(std::string_view hf_name) noexcept {
  for (const auto& a : kArchitectures)
    if (a.hf_name == hf_name) return &a;
  return nullptr;
}

std::string_view supported_architectures() noexcept { return "LlamaForCausalLM, Qwen3ForCausalLM"; }

}  // namespace photon
