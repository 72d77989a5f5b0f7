// defines: mistral_arch_def — MistralForCausalLM (7B v0.1-v0.3, Nemo with its explicit head_dim):
// no biases; v0.1 attends through a 4096-token sliding window, later versions write null.
#include "model/spec.h"

namespace sf {

const ArchDef& mistral_arch_def() {
  static const ArchDef kDef{
      .arch = Arch::kMistral,
      .class_name = "MistralForCausalLM",
      .model_type = "mistral",
      .bias = ArchDef::Bias::kNone,
      .mlp_bias_key = false,
      .qk_norm = false,
      .window = ArchDef::Window::kSlidingWindowKey,
      .default_rope_theta = 10000.0,
      .default_max_position_embeddings = 4096 * 32,
      .default_sliding_window = 4096,  // MistralConfig's default when the key is absent
      .default_max_window_layers = 0,
  };
  return kDef;
}

}  // namespace sf
