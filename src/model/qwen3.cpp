// defines: qwen3_arch_def — Qwen3ForCausalLM (dense Qwen3): RMSNorm on q and k per head
// (q_norm/k_norm), head_dim set apart from hidden/heads, optional q/k/v/o biases.
#include "model/spec.h"

namespace sf {

const ArchDef& qwen3_arch_def() {
  static const ArchDef kDef{
      .arch = Arch::kQwen3,
      .class_name = "Qwen3ForCausalLM",
      .model_type = "qwen3",
      .bias = ArchDef::Bias::kAttentionBiasKey,
      .mlp_bias_key = false,
      .qk_norm = true,
      .window = ArchDef::Window::kUseSlidingWindow,
      .default_rope_theta = 10000.0,
      .default_max_position_embeddings = 32768,
      .default_sliding_window = 4096,
      .default_max_window_layers = 28,
  };
  return kDef;
}

}  // namespace sf
