// defines: llama_arch_def — LlamaForCausalLM (Llama 2, 3, 3.1, 3.2): optional q/k/v/o biases
// (attention_bias) and MLP biases (mlp_bias), llama3 RoPE scaling, no sliding window.
#include "model/spec.h"

namespace sf {

const ArchDef& llama_arch_def() {
  static const ArchDef kDef{
      .arch = Arch::kLlama,
      .class_name = "LlamaForCausalLM",
      .model_type = "llama",
      .bias = ArchDef::Bias::kAttentionBiasKey,
      .mlp_bias_key = true,
      .qk_norm = false,
      .window = ArchDef::Window::kNone,
      .default_rope_theta = 10000.0,
      .default_max_position_embeddings = 2048,
      .default_sliding_window = 0,
      .default_max_window_layers = 0,
  };
  return kDef;
}

}  // namespace sf
