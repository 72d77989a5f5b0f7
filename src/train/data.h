// defines: load_text_samples, sf::Batcher, pack_samples — what a training step eats: a plain text
// cut into samples, and the batches made from samples (see data/pipeline.h for datasets).
#pragma once

#include <cstdint>
#include <filesystem>
#include <random>
#include <vector>

#include "data/sample.h"
#include "data/tokenizer.h"
#include "engine/engine.h"

namespace sf {

// A text file for causal-LM training: tokenised whole (with `tok`, no special tokens; without
// one, the byte-level stand-in: token = byte value, needing vocab >= 256) and cut into
// consecutive samples of `seq_len` tokens; the last, shorter piece is kept if it has ≥ 2 tokens.
// An empty text, or one too short for a single sample of 2 tokens, is an error naming the file.
std::vector<Sample> load_text_samples(const std::filesystem::path& file, int64_t seq_len,
                                      int64_t vocab, const Tokenizer* tok = nullptr);

// Makes each step's Batch from the samples (positions restart per sample, targets shifted inside
// each sample, attention never crosses samples). In file order without shuffling; with shuffling,
// a permutation per epoch from `seed`. Without packing a step takes `batch_size` samples; with
// packing (token_budget > 0) it takes samples in order while they fit in token_budget tokens
// (batch_size rows of cutoff_len), at least one.
class Batcher {
 public:
  Batcher(std::vector<Sample> samples, int64_t batch_size, bool shuffle, uint64_t seed,
          int64_t token_budget = 0);
  Batch next();
  int64_t epoch() const { return epoch_; }  // 1-based
  int64_t max_tokens() const;     // of any batch this batcher can produce
  int64_t max_sequences() const;  // samples in any batch
  int64_t max_sample_tokens() const;  // the longest sample

 private:
  void new_epoch();
  std::vector<Sample> samples_;
  std::vector<size_t> order_;
  size_t cursor_ = 0;
  int64_t batch_size_;
  int64_t token_budget_;
  bool shuffle_;
  std::mt19937_64 rng_;
  int64_t epoch_ = 0;
};

// One step's Batch from samples (each its own packed sequence).
Batch pack_samples(const std::vector<const Sample*>& samples);

}  // namespace sf
