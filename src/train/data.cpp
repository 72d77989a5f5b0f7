#include "train/data.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "train/config_file.h"

namespace sf {

std::vector<Sample> load_text_samples(const std::filesystem::path& file, int64_t seq_len,
                                      int64_t vocab, const Tokenizer* tok) {
  SF_CHECK(tok || vocab >= 256, "the byte-level tokenizer needs a vocabulary of at least 256 ",
           "tokens; the model has ", vocab, " (give --tokenizer DIR, or pre-tokenised JSONL)");
  SF_CHECK(seq_len >= 2, "cutoff length must be at least 2 tokens (got ", seq_len, ")");
  const std::string text = read_text_file(file, "the training text");
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
                 int64_t token_budget, int64_t accum)
    : samples_(std::make_shared<const std::vector<Sample>>(std::move(samples))),
      batch_size_(batch_size),
      token_budget_(token_budget),
      accum_(accum),
      shuffle_(shuffle),
      rng_(seed) {
  SF_CHECK(batch_size_ >= 1, "batch size must be at least 1 (got ", batch_size_, ")");
  SF_CHECK(accum_ >= 1, "gradient_accumulation_steps must be at least 1 (got ", accum_, ")");
  SF_CHECK(!samples_->empty(), "no training samples");
  new_epoch();  // epochs count from 1
}

void Batcher::new_epoch() {
  order_.resize(samples_->size());
  for (size_t i = 0; i < order_.size(); ++i) order_[i] = i;
  if (shuffle_) std::shuffle(order_.begin(), order_.end(), rng_);
  cursor_ = 0;
  ++epoch_;
  epoch_count_ = count(order_.size());
  micro_taken_ = 0;
}

Batcher::Count Batcher::count(size_t end, int64_t steps) const {
  Count n;
  for (size_t cursor = 0; cursor < end && cursor < order_.size() && n.steps != steps; ++n.steps)
    for (int64_t g = 0; g < accum_ && cursor < order_.size(); ++g, ++n.micro) {
      if (token_budget_ > 0) {
        next_micro_batch(cursor);
      } else {
        cursor = std::min(order_.size(), cursor + size_t(batch_size_));
      }
    }
  return n;
}

std::vector<const Sample*> Batcher::next_micro_batch(size_t& cursor) const {
  std::vector<const Sample*> picked;
  int64_t tokens = 0;
  while (cursor < order_.size()) {
    const Sample* s = &(*samples_)[order_[cursor]];
    if (token_budget_ > 0) {
      // Packing: fill the micro-batch's rows; a sample that does not fit waits for the next one.
      if (!picked.empty() && tokens + int64_t(s->ids.size()) > token_budget_) break;
    } else if (int64_t(picked.size()) == batch_size_) {
      break;
    }
    picked.push_back(s);
    tokens += int64_t(s->ids.size());
    ++cursor;
  }
  return picked;
}

Batch Batcher::next() {
  if (cursor_ == order_.size()) new_epoch();
  std::vector<const Sample*> step;
  for (int64_t g = 0; g < accum_ && cursor_ < order_.size(); ++g, ++micro_taken_) {
    auto micro = next_micro_batch(cursor_);
    step.insert(step.end(), micro.begin(), micro.end());
  }
  return pack_samples(step);
}

double Batcher::epoch_progress() const {
  return double(epoch_ - 1) + double(micro_taken_) / double(epoch_count_.micro);
}

double Batcher::epochs_after(int64_t steps) const {
  const int64_t whole = steps / epoch_count_.steps;
  const Count rest = count(order_.size(), steps % epoch_count_.steps);
  return double(whole) + double(rest.micro) / double(epoch_count_.micro);
}

int64_t Batcher::max_tokens() const {
  size_t longest = 0;
  for (const auto& s : *samples_) longest = std::max(longest, s.ids.size());
  // Packing: the budget, or one sample longer than it, per micro-batch.
  if (token_budget_ > 0) return std::max(token_budget_, int64_t(longest)) * accum_;
  return int64_t(longest) * batch_size_ * accum_;
}

int64_t Batcher::max_sample_tokens() const {
  size_t longest = 0;
  for (const auto& s : *samples_) longest = std::max(longest, s.ids.size());
  return int64_t(longest);
}

int64_t Batcher::max_sequences() const {
  if (token_budget_ <= 0) return batch_size_ * accum_;
  size_t shortest = SIZE_MAX;
  for (const auto& s : *samples_) shortest = std::min(shortest, s.ids.size());
  return std::max<int64_t>(1, token_budget_ / int64_t(std::max<size_t>(shortest, 1))) * accum_;
}

uint64_t Batcher::fingerprint() const {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over lengths, ids and labels
  auto mix = [&](uint64_t v) {
    for (int i = 0; i < 8; ++i) h = (h ^ ((v >> (8 * i)) & 0xff)) * 1099511628211ull;
  };
  for (const auto& s : *samples_) {
    mix(s.ids.size());
    for (int32_t id : s.ids) mix(uint32_t(id));
    for (int32_t l : s.labels) mix(uint32_t(l));
  }
  return h;
}

std::string Batcher::save_state() const {
  std::ostringstream os;
  os << "batcher-v2 " << fingerprint() << " " << samples_->size() << " " << epoch_ << " " << cursor_
     << " " << order_.size();
  for (size_t i : order_) os << " " << i;
  os << " " << rng_;
  return os.str();
}

void Batcher::restore_state(const std::string& state) {
  std::istringstream is(state);
  std::string tag;
  uint64_t hash = 0;
  size_t n = 0, cursor = 0, order_size = 0;
  int64_t epoch = 0;
  is >> tag >> hash >> n >> epoch >> cursor >> order_size;
  SF_CHECK(is && tag == "batcher-v2", "the data position of the checkpoint is not readable");
  SF_CHECK(n == samples_->size() && order_size == n, "the checkpoint was made on ", n,
           " training samples, this run has ", samples_->size(),
           ": resume with the same data, cutoff_len and val_size");
  SF_CHECK(hash == fingerprint(), "the training samples differ from the checkpoint's (same count, ",
           "other tokens): the data file or its tokenisation changed; resume with the same data");
  // Epochs beyond 2^40 are no run's (and ++epoch_ must not overflow): a corrupt file.
  SF_CHECK(epoch >= 1 && epoch < (int64_t(1) << 40) && cursor <= n,
           "the data position of the checkpoint is out of range (epoch ", epoch, ", sample ",
           cursor, " of ", n, ")");
  std::vector<size_t> order(n);
  std::vector<bool> seen(n, false);
  for (size_t& i : order) {
    is >> i;
    SF_CHECK(is && i < n && !seen[i], "the data order of the checkpoint is not a permutation");
    seen[i] = true;
  }
  std::mt19937_64 rng;
  is >> rng;
  SF_CHECK(is, "the generator state of the checkpoint is not readable");
  order_ = std::move(order);
  cursor_ = cursor;
  epoch_ = epoch;
  rng_ = rng;
  epoch_count_ = count(order_.size());
  micro_taken_ = count(cursor_).micro;
}

std::vector<Batch> make_eval_batches(const std::vector<Sample>& samples, int64_t batch_size) {
  std::vector<Batch> out;
  for (size_t b = 0; b < samples.size(); b += size_t(batch_size)) {
    std::vector<const Sample*> picked;
    for (size_t i = b; i < std::min(samples.size(), b + size_t(batch_size)); ++i)
      picked.push_back(&samples[i]);
    out.push_back(pack_samples(picked));
  }
  return out;
}

}  // namespace sf
