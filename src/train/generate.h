// defines: sf::GenerateOptions, generate_tokens, pick_token, load_decoder, eos_token_ids —
// decoding from a trained model with a KV cache (engine/decode.h): the prompt runs once, then
// each new token alone against the cached keys and values. Greedy (temperature 0) or sampled
// (temperature, top-p, seed), stopping at an end-of-sequence id or after max_new_tokens.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <vector>

#include "engine/decode.h"

namespace sf {

struct GenerateOptions {
  int64_t max_new_tokens = 64;
  double temperature = 0;  // 0: greedy
  double top_p = 1;        // nucleus sampling: the smallest set of tokens with this probability
  uint64_t seed = 0;
  std::vector<int32_t> eos_ids;
};

// The new ids after `prompt` (the end-of-sequence id included when one stopped it). The decoder
// must hold prompt + max_new_tokens tokens; it is reset first. Non-finite logits are an error
// naming the position.
std::vector<int32_t> generate_tokens(Decoder& decoder, const std::vector<int32_t>& prompt,
                                     const GenerateOptions& options);

// A decoder with the weights of the Hugging Face model directory, checked as training loads them
// (every tensor, shape, dtype, finiteness; errors name the file and the tensor).
std::unique_ptr<Decoder> load_decoder(Backend& backend, const std::filesystem::path& model_dir,
                                      const DecoderOptions& options);

// The next id from one row of logits (exposed for tests): argmax at temperature 0, else a draw
// from softmax(logits / temperature) restricted to the top-p nucleus, with `uniform` in [0, 1).
int32_t pick_token(const float* logits, int64_t vocab, double temperature, double top_p,
                   double uniform);

// eos_token_id of generation_config.json, else of config.json (a number or a list); may be empty.
std::vector<int32_t> eos_token_ids(const std::filesystem::path& model_dir);

}  // namespace sf
