// defines: load_text_samples, sf::Batcher, pack_samples — what a training step eats: a plain text
// cut into samples, and the batches made from samples (see data/pipeline.h for datasets).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
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

// Makes each optimizer step's Batch from the samples (positions restart per sample, targets
// shifted inside each sample, attention never crosses samples). In file order without shuffling;
// with shuffling, a permutation per epoch from `seed`. A step is `accum` micro-batches put back to
// back; without packing a micro-batch takes `batch_size` samples, with packing (token_budget > 0)
// it takes samples in order while they fit in token_budget tokens, at least one. A step never
// crosses an epoch's end (as transformers' dataloader: the last step of an epoch may be smaller).
class Batcher {
 public:
  Batcher(std::vector<Sample> samples, int64_t batch_size, bool shuffle, uint64_t seed,
          int64_t token_budget = 0, int64_t accum = 1);
  Batch next();
  int64_t epoch() const { return epoch_; }  // 1-based: the epoch the next step comes from
  // Epochs done, fractional, counted in micro-batches as transformers' Trainer does: (epoch - 1)
  // + the micro-batches of this epoch already taken / its micro-batches.
  double epoch_progress() const;
  // The epochs that `steps` steps from the start of an epoch make, counted as epoch_progress().
  double epochs_after(int64_t steps) const;
  int64_t steps_per_epoch() const { return epoch_count_.steps; }  // of the current epoch's order
  int64_t samples() const { return int64_t(samples_->size()); }
  int64_t max_tokens() const;     // of any batch this batcher can produce
  int64_t max_sequences() const;  // samples in any batch
  int64_t max_sample_tokens() const;  // the longest sample
  // The position in the data (order, cursor, epoch, generator) as text, and back: a restored
  // batcher continues with the very batches the saved one would have made.
  // save_state() includes a 64-bit hash of every sample's ids and labels: restoring onto other
  // data is refused.
  std::string save_state() const;
  void restore_state(const std::string& state);  // throws on text that save_state did not make

 private:
  void new_epoch();
  struct Count {
    int64_t steps = 0, micro = 0;
  };
  // Steps and micro-batches of the current order that end at or before `end`, or (steps >= 0)
  // the first `steps` steps.
  Count count(size_t end, int64_t steps = -1) const;
  uint64_t fingerprint() const;
  std::vector<const Sample*> next_micro_batch(size_t& cursor) const;
  std::shared_ptr<const std::vector<Sample>> samples_;
  std::vector<size_t> order_;
  size_t cursor_ = 0;
  int64_t batch_size_;
  int64_t token_budget_;
  int64_t accum_;
  bool shuffle_;
  std::mt19937_64 rng_;
  int64_t epoch_ = 0;
  Count epoch_count_;  // steps and micro-batches of the current epoch (packing: counted)
  int64_t micro_taken_ = 0;  // micro-batches of this epoch already taken
};

// Eval batches: the samples in order, `batch_size` at a time (the last one may be smaller).
std::vector<Batch> make_eval_batches(const std::vector<Sample>& samples, int64_t batch_size);

// One step's Batch from samples (each its own packed sequence).
Batch pack_samples(const std::vector<const Sample*>& samples);

}  // namespace sf
