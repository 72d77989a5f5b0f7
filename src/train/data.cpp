#include "train/data.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace sf {

std::vector<Sample> load_text_samples(const std::filesystem::path& file, int64_t seq_len,
                                      int64_t vocab, const Tokenizer* tok) {
  SF_CHECK(tok || vocab >= 256, "the byte-level tokenizer needs a vocabulary of at least 256 ",
           "tokens; the model has ", vocab, " (give --tokenizer DIR, or pre-tokenised JSONL)");
  SF_CHECK(seq_len >= 2, "cutoff length must be at least 2 tokens (got ", seq_len, ")");
  std::ifstream f(file, std::ios::binary);
  SF_CHECK(f, "cannot open the training text ", file, ": check the path");
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<int32_t> ids;
  if (tok) {
    ids = tok->encode(text, false);
  } else {
    for (char c : text) ids.push_back(int32_t(uint8_t(c)));
  }
  SF_CHECK(ids.size() >= 2, "the training text ", file, " is ",
           text.empty() ? "empty" : "too short (a single token)",
           ": give at least 2 tokens of text");
  for (size_t i = 0; i < ids.size(); ++i)
    SF_CHECK(ids[i] >= 0 && ids[i] < vocab, file.string(), ": token id ", ids[i],
             " is outside the model's vocabulary of ", vocab,
             " (does the tokenizer belong to this model?)");
  std::vector<Sample> out;
  for (size_t begin = 0; begin + 1 < ids.size(); begin += size_t(seq_len)) {
    const size_t end = std::min(ids.size(), begin + size_t(seq_len));
    Sample s;
    s.ids.assign(ids.begin() + long(begin), ids.begin() + long(end));
    s.labels = s.ids;
    out.push_back(std::move(s));
  }
  return out;
}

Batch pack_samples(const std::vector<const Sample*>& samples) {
  Batch b;
  b.cu_seqlens.push_back(0);
  for (const Sample* s : samples) {
    const size_t n = s->ids.size();
    for (size_t i = 0; i < n; ++i) {
      b.ids.push_back(s->ids[i]);
      b.targets.push_back(i + 1 < n ? s->labels[i + 1] : -100);
      b.positions.push_back(int32_t(i));
    }
    b.cu_seqlens.push_back(int32_t(b.ids.size()));
  }
  return b;
}

Batcher::Batcher(std::vector<Sample> samples, int64_t batch_size, bool shuffle, uint64_t seed,
                 int64_t token_budget)
    : samples_(std::move(samples)),
      batch_size_(batch_size),
      token_budget_(token_budget),
      shuffle_(shuffle),
      rng_(seed) {
  SF_CHECK(batch_size_ >= 1, "batch size must be at least 1 (got ", batch_size_, ")");
  SF_CHECK(!samples_.empty(), "no training samples");
  new_epoch();  // epochs count from 1
}

void Batcher::new_epoch() {
  order_.resize(samples_.size());
  for (size_t i = 0; i < order_.size(); ++i) order_[i] = i;
  if (shuffle_) std::shuffle(order_.begin(), order_.end(), rng_);
  cursor_ = 0;
  ++epoch_;
}

Batch Batcher::next() {
  std::vector<const Sample*> picked;
  int64_t tokens = 0;
  for (;;) {
    if (cursor_ == order_.size()) new_epoch();
    const Sample* s = &samples_[order_[cursor_]];
    if (token_budget_ > 0) {
      // Packing: fill the step's rows; a sample that does not fit waits for the next step.
      if (!picked.empty() && tokens + int64_t(s->ids.size()) > token_budget_) break;
    } else if (int64_t(picked.size()) == batch_size_) {
      break;
    }
    picked.push_back(s);
    tokens += int64_t(s->ids.size());
    ++cursor_;
  }
  return pack_samples(picked);
}

int64_t Batcher::max_tokens() const {
  size_t longest = 0;
  for (const auto& s : samples_) longest = std::max(longest, s.ids.size());
  // Packing: the budget, or one sample longer than it. Otherwise the longest sample may be taken
  // more than once (across an epoch boundary).
  if (token_budget_ > 0) return std::max(token_budget_, int64_t(longest));
  return int64_t(longest) * batch_size_;
}

int64_t Batcher::max_sample_tokens() const {
  size_t longest = 0;
  for (const auto& s : samples_) longest = std::max(longest, s.ids.size());
  return int64_t(longest);
}

int64_t Batcher::max_sequences() const {
  if (token_budget_ <= 0) return batch_size_;
  size_t shortest = SIZE_MAX;
  for (const auto& s : samples_) shortest = std::min(shortest, s.ids.size());
  return std::max<int64_t>(1, token_budget_ / int64_t(std::max<size_t>(shortest, 1)));
}

}  // namespace sf
