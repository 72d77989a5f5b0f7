// defines: sf::DataConfig, prepare_samples — dataset file → tokenised samples, through the
// tokenised cache: the first run writes the samples next to the output, keyed by a hash of the
// tokenizer, the chat template, the data and the options; later runs and resumes read them back.
#pragma once

#include <cstdint>
#include <filesystem>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "data/dataset.h"
#include "data/encode.h"
#include "data/sample.h"

namespace sf {

struct DataConfig {
  std::filesystem::path file;
  std::filesystem::path tokenizer_dir;  // its tokenizer.json / tokenizer_config.json key the cache
  int64_t vocab = 0;                    // the model's: every id and label is checked against it
  DatasetReadOptions read;
  EncodeOptions encode;
  std::filesystem::path cache_dir;  // empty: no cache
};

struct DataStats {
  int64_t records = 0, skipped_malformed = 0, truncated = 0, no_loss = 0, tokens = 0;
  int64_t chunked = 0, chunks = 0;  // text records cut into cutoff_len pieces, and the pieces
  bool from_cache = false;
  std::filesystem::path cache_file;
};

// Samples with at least one label (others are dropped and counted). Encoding runs in parallel
// over records; the result does not depend on the thread count. `tok` may be null for a dataset
// of tokens; `chat` is needed only for conversations.
std::vector<Sample> prepare_samples(const DataConfig& cfg, const Tokenizer* tok,
                                    const ChatTemplate* chat, DataStats* stats);

// The cache key: a 64-bit hash of everything the samples depend on.
uint64_t samples_cache_key(const DataConfig& cfg, const Tokenizer* tok, const ChatTemplate* chat);
// The same of the dataset's content `data`, already read.
uint64_t samples_cache_key(const DataConfig& cfg, const std::string& data, const Tokenizer* tok,
                           const ChatTemplate* chat);

// The cache file format (little-endian): "SFTOKS02", u64 count, then per sample u32 n,
// n × i32 ids, n × i32 labels, then a u64 FNV-1a checksum of every byte before it. A file that
// fails any check (magic, checksum, sizes) is an error naming it and saying to delete it: the run
// stops rather than silently retokenising (docs/decisions.md, 2026-12-03).
void write_samples_cache(const std::filesystem::path& file, const std::vector<Sample>& samples);
std::vector<Sample> read_samples_cache(const std::filesystem::path& file);
std::vector<Sample> parse_samples_cache(std::string_view bytes, const std::filesystem::path& file);

}  // namespace sf
