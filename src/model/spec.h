// defines: sf::ModelSpec (config.json → the shapes and options of a decoder), sf::LayerTensor,
// sf::TensorDesc, the per-architecture tensor tables and load_model_spec.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace sf {

enum class Arch { kLlama, kMistral, kQwen2, kQwen3 };

struct RopeScaling {
  enum class Type { kNone, kLlama3 } type = Type::kNone;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

struct ModelSpec {
  Arch arch = Arch::kLlama;
  std::string arch_name;  // as written in config.json, e.g. "LlamaForCausalLM"
  int64_t hidden = 0;     // C
  int64_t layers = 0;
  int64_t heads = 0;         // NH
  int64_t kv_heads = 0;      // NKV
  int64_t head_dim = 0;      // D (Qwen3 and some Llama/Mistral configs set it apart from C/NH)
  int64_t intermediate = 0;  // I
  int64_t vocab = 0;         // V
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool attention_bias = false;  // q/k/v (and o for Llama) carry biases
  bool o_bias = false;          // o_proj has a bias (Llama attention_bias; never Qwen2)
  bool mlp_bias = false;        // gate/up/down carry biases (Llama mlp_bias)
  bool qk_norm = false;         // Qwen3 q_norm / k_norm over head_dim
  bool tie_word_embeddings = false;
  std::optional<int64_t> sliding_window;  // set only when the model would use it
  int64_t bos_token_id = -1, eos_token_id = -1;
  int64_t pad_token_id = -1;  // the embedding's padding_idx (its row gets no gradient); -1: none
};

// The tensors of one decoder layer, in the order they are laid out in a layer's flat buffers.
enum class LayerTensor : int {
  kInputNorm,
  kQ,
  kK,
  kV,
  kO,
  kQBias,
  kKBias,
  kVBias,
  kOBias,
  kQNorm,
  kKNorm,
  kPostNorm,
  kGate,
  kUp,
  kDown,
  kGateBias,
  kUpBias,
  kDownBias,
  kCount
};
// The tensors outside the layers (embedding, final norm, head), in layout order.
enum class OuterTensor : int { kEmbed, kFinalNorm, kLmHead, kCount };

struct TensorDesc {
  std::string name;  // Hugging Face checkpoint name, e.g. "model.layers.3.self_attn.q_proj.weight"
  std::vector<int64_t> shape;
  bool present = false;  // false: the architecture/config has no such tensor (or it is tied)
};

// Reads <dir>/config.json. Errors name the file and key and list the supported architectures.
ModelSpec load_model_spec(const std::filesystem::path& model_dir);
// Parses config.json text (source names the file in errors).
ModelSpec parse_model_spec(const std::string& json_text, const std::string& source);

// Per-architecture tables (model/llama.cpp, mistral.cpp, qwen2.cpp, qwen3.cpp).
std::array<TensorDesc, size_t(LayerTensor::kCount)> layer_tensors(const ModelSpec& spec,
                                                                  int64_t layer);
std::array<TensorDesc, size_t(OuterTensor::kCount)> outer_tensors(const ModelSpec& spec);

// Number of parameters (tied head counted once).
int64_t parameter_count(const ModelSpec& spec);

// How one architecture reads config.json and which optional tensors it has. Each lives in its
// own file (model/llama.cpp, ...); the parser and the tensor-table builder in spec.cpp follow it,
// so the checkpoint names are written once for all four.
struct ArchDef {
  enum class Bias {
    kNone,              // no attention biases (Mistral)
    kAttentionBiasKey,  // q/k/v/o biases when config.json says attention_bias (Llama, Qwen3)
    kQkvAlways,         // q/k/v biases always, o_proj never (Qwen2)
  };
  enum class Window {
    kNone,
    kSlidingWindowKey,  // Mistral: sliding_window (null = none; absent = HF default)
    kUseSlidingWindow,  // Qwen2/3: only with use_sliding_window and layers past max_window_layers
  };
  Arch arch;
  const char* class_name;  // "LlamaForCausalLM"
  const char* model_type;  // "llama"
  Bias bias;
  bool mlp_bias_key;  // reads mlp_bias (Llama)
  bool qk_norm;       // q_norm/k_norm over head_dim (Qwen3)
  Window window;
  // Defaults of the transformers config class, for keys a config.json leaves out.
  double default_rope_theta;
  int64_t default_max_position_embeddings;
  int64_t default_sliding_window;
  int64_t default_max_window_layers;
};
const ArchDef& llama_arch_def();
const ArchDef& mistral_arch_def();
const ArchDef& qwen2_arch_def();
const ArchDef& qwen3_arch_def();
const ArchDef& arch_def(Arch arch);

}  // namespace sf
