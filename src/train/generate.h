// defines: sf::GenerateOptions, generate_tokens, eos_token_ids — decoding from a trained model:
// greedy (temperature 0) or sampled (temperature, top-p, seed), stopping at an end-of-sequence
// id or after max_new_tokens. Each token re-runs the forward over the whole sequence through
// Engine::logits (the engine has no KV cache yet): fine for trying a result, O(n²) in length.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "engine/engine.h"

namespace sf {

struct GenerateOptions {
  int64_t max_new_tokens = 64;
  double temperature = 0;  // 0: greedy
  double top_p = 1;        // nucleus sampling: the smallest set of tokens with this probability
  uint64_t seed = 0;
  std::vector<int32_t> eos_ids;
};

// The new ids after `prompt` (the end-of-sequence id included when one stopped it). The engine
// must take prompt + max_new_tokens tokens. Non-finite logits are an error naming the position.
std::vector<int32_t> generate_tokens(Engine& engine, const std::vector<int32_t>& prompt,
                                     const GenerateOptions& options);

// The next id from one row of logits (exposed for tests): argmax at temperature 0, else a draw
// from softmax(logits / temperature) restricted to the top-p nucleus, with `uniform` in [0, 1).
int32_t pick_token(const float* logits, int64_t vocab, double temperature, double top_p,
                   double uniform);

// eos_token_id of generation_config.json, else of config.json (a number or a list); may be empty.
std::vector<int32_t> eos_token_ids(const std::filesystem::path& model_dir);

}  // namespace sf
