#include "train/data.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"

namespace sf {

std::vector<Sample> load_text_samples(const std::filesystem::path& file, int64_t seq_len,
                                      int64_t vocab) {
  SF_CHECK(vocab >= 256, "the byte-level tokenizer needs a vocabulary of at least 256 tokens; ",
           "the model has ", vocab, " (give pre-tokenised JSONL instead)");
  SF_CHECK(seq_len >= 2, "cutoff length must be at least 2 tokens (got ", seq_len, ")");
  std::ifstream f(file, std::ios::binary);
  SF_CHECK(f, "cannot open the training text ", file, ": check the path");
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  SF_CHECK(text.size() >= 2, "the training text ", file, " is ",
           text.empty() ? "empty" : "a single byte", ": give at least 2 bytes of text");
  std::vector<Sample> out;
  for (size_t begin = 0; begin + 1 < text.size(); begin += size_t(seq_len)) {
    const size_t end = std::min(text.size(), begin + size_t(seq_len));
    Sample s;
    for (size_t i = begin; i < end; ++i) s.ids.push_back(int32_t(uint8_t(text[i])));
    s.labels = s.ids;
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<Sample> load_jsonl_samples(const std::filesystem::path& file, int64_t seq_len,
                                       int64_t vocab, int64_t* truncated) {
  std::ifstream f(file);
  SF_CHECK(f, "cannot open the training data ", file, ": check the path");
  std::vector<Sample> out;
  std::string line;
  int64_t lineno = 0, cut = 0;
  auto ints = [&](const nlohmann::json& j, const char* key) {
    SF_CHECK(j.is_array(), file.string(), ":", lineno, ": \"", key, "\" must be an array of ",
             "integers");
    std::vector<int32_t> v;
    for (const auto& x : j) {
      SF_CHECK(x.is_number_integer(), file.string(), ":", lineno, ": \"", key,
               "\" holds a non-integer value ", x.dump());
      v.push_back(int32_t(x.get<int64_t>()));
    }
    return v;
  };
  while (std::getline(f, line)) {
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      SF_FAIL(file.string(), ":", lineno, ": not valid JSON (", e.what(), ")");
    }
    SF_CHECK(j.is_object() && j.contains("input_ids"), file.string(), ":", lineno,
             ": expected an object with \"input_ids\" (and optional \"labels\")");
    Sample s;
    s.ids = ints(j["input_ids"], "input_ids");
    s.labels = j.contains("labels") ? ints(j["labels"], "labels") : s.ids;
    SF_CHECK(s.labels.size() == s.ids.size(), file.string(), ":", lineno, ": \"labels\" has ",
             s.labels.size(), " entries but \"input_ids\" has ", s.ids.size());
    for (size_t i = 0; i < s.ids.size(); ++i) {
      SF_CHECK(s.ids[i] >= 0 && s.ids[i] < vocab, file.string(), ":", lineno, ": token id ",
               s.ids[i], " at index ", i, " is outside the model's vocabulary of ", vocab);
      SF_CHECK(s.labels[i] == -100 || (s.labels[i] >= 0 && s.labels[i] < vocab), file.string(),
               ":", lineno, ": label ", s.labels[i], " at index ", i,
               " is neither -100 nor inside the vocabulary of ", vocab);
    }
    if (int64_t(s.ids.size()) > seq_len) {
      s.ids.resize(size_t(seq_len));
      s.labels.resize(size_t(seq_len));
      ++cut;
    }
    if (s.ids.size() < 2) continue;  // nothing to predict
    out.push_back(std::move(s));
  }
  SF_CHECK(!out.empty(), "the training data ", file, " holds no sample of at least 2 tokens");
  if (truncated) *truncated = cut;
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

Batcher::Batcher(std::vector<Sample> samples, int64_t batch_size, bool shuffle, uint64_t seed)
    : samples_(std::move(samples)), batch_size_(batch_size), shuffle_(shuffle), rng_(seed) {
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
  while (int64_t(picked.size()) < batch_size_) {
    if (cursor_ == order_.size()) new_epoch();
    picked.push_back(&samples_[order_[cursor_++]]);
  }
  return pack_samples(picked);
}

int64_t Batcher::max_tokens() const {
  // A batch may take the longest sample more than once (across an epoch boundary).
  size_t longest = 0;
  for (const auto& s : samples_) longest = std::max(longest, s.ids.size());
  return int64_t(longest) * batch_size_;
}

}  // namespace sf
