// defines: sf::Sample, load_text_samples, load_jsonl_samples, sf::Batcher — the training data of
// `slideformer train` until the tokenizer and dataset pipeline lands: a text file through a
// byte-level stand-in tokenizer, or JSONL lines already tokenised.
#pragma once

#include <cstdint>
#include <filesystem>
#include <random>
#include <vector>

#include "engine/engine.h"

namespace sf {

struct Sample {
  std::vector<int32_t> ids;
  std::vector<int32_t> labels;  // same length; -100 = no loss (Hugging Face convention, unshifted)
};

// The byte-level stand-in: token = byte value (needs vocab >= 256). The text is cut into
// consecutive samples of `seq_len` tokens; the last, shorter piece is kept if it has ≥ 2 tokens.
// An empty text, or one too short for a single sample of 2 tokens, is an error naming the file.
std::vector<Sample> load_text_samples(const std::filesystem::path& file, int64_t seq_len,
                                      int64_t vocab);

// JSONL: one object per line with "input_ids" (ints) and optional "labels" (ints, -100 =
// ignored, same length). Samples longer than seq_len are truncated (counted in *truncated).
// Errors name the file, the line and what is wrong.
std::vector<Sample> load_jsonl_samples(const std::filesystem::path& file, int64_t seq_len,
                                       int64_t vocab, int64_t* truncated = nullptr);

// Packs `batch_size` samples per step (positions restart per sample, targets shifted inside each
// sample). In file order without shuffling; with shuffling, a permutation per epoch from `seed`.
class Batcher {
 public:
  Batcher(std::vector<Sample> samples, int64_t batch_size, bool shuffle, uint64_t seed);
  Batch next();
  int64_t epoch() const { return epoch_; }  // 1-based
  int64_t max_tokens() const;  // of any batch this batcher can produce

 private:
  void new_epoch();
  std::vector<Sample> samples_;
  std::vector<size_t> order_;
  size_t cursor_ = 0;
  int64_t batch_size_;
  bool shuffle_;
  std::mt19937_64 rng_;
  int64_t epoch_ = 0;
};

// One step's Batch from samples (each its own packed sequence).
Batch pack_samples(const std::vector<const Sample*>& samples);

}  // namespace sf
