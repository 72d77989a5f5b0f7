// defines: sf::TinyModelOptions, write_random_model — a random-initialised Hugging Face model
// directory (config.json + model.safetensors), for the demo job and for tests.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace sf {

struct TinyModelOptions {
  std::string arch = "llama";  // llama | mistral | qwen2 | qwen3
  int64_t hidden = 128, layers = 4, heads = 4, kv_heads = 2, head_dim = 0 /* = hidden/heads */;
  int64_t intermediate = 344, vocab = 256, max_positions = 2048;
  double rope_theta = 10000.0, rms_norm_eps = 1e-5, init_std = 0.02;
  bool tie_word_embeddings = false;
  int64_t bos_id = 1, eos_id = 2;  // config.json's bos_token_id / eos_token_id (< vocab)
  uint64_t seed = 1234;
};

// Fails (naming the --option) unless every field is positive, divisible as the heads need and
// small enough that no size overflows.
void validate_tiny_model_options(const TinyModelOptions& o);
// config.json text in transformers' format for these options (validated first).
std::string tiny_model_config_json(const TinyModelOptions& o);
// Writes config.json and model.safetensors (F32): weights ~ N(0, init_std), norms 1, biases 0.
void write_random_model(const std::filesystem::path& dir, const TinyModelOptions& o);

}  // namespace sf
