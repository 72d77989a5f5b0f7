// defines: qwen2_arch_def — Qwen2ForCausalLM (Qwen2, Qwen2.5): q/k/v always carry biases, o_proj
// never; sliding window only when use_sliding_window is set (released configs set it false).
#include "model/spec.h"

namespace sf {

const ArchDef& qwen2_arch_def() {
  static const ArchDef kDef{
      .arch = Arch::kQwen2,
      .class_name = "Qwen2ForCausalLM",
      .model_type = "qwen2",
      .bias = ArchDef::Bias::kQkvAlways,
      .mlp_bias_key = false,
      .qk_norm = false,
      .window = ArchDef::Window::kUseSlidingWindow,
      .default_rope_theta = 10000.0,
      .default_max_position_embeddings = 32768,
      .default_sliding_window = 4096,
      .default_max_window_layers = 28,
  };
  return kDef;
}

}  // namespace sf
