// defines: sf::tok::BpeModel — the BPE model of tokenizer.json (merges as "a b" strings or
// ["a", "b"] pairs, ignore_merges, byte_fallback, unk/fuse_unk, continuing_subword_prefix,
// end_of_word_suffix). Merging replicates Hugging Face's priority-queue order exactly.
// encode_word is const and thread-safe (the word cache is per thread).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/tokenizer_pipeline.h"

namespace sf::tok {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept;
};
using StringIdMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

class BpeModel {
 public:
  // `j` is the "model" object of tokenizer.json at `path`.
  BpeModel(const Json& j, const std::string& path, const JsonSource& src);

  // Appends the ids of one pre-token.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  int32_t token_to_id(std::string_view token) const;
  // nullptr when the id is not in the vocabulary.
  const std::string* id_to_token(int32_t id) const;
  int64_t max_id() const { return int64_t(id_to_token_.size()) - 1; }
  int64_t vocab_count() const { return int64_t(vocab_.size()); }

 private:
  struct MergeValue {
    uint32_t rank;
    int32_t new_id;
  };
  // Open-addressing map (a, b) → merge; built once, read-only afterwards.
  struct PairTable {
    std::vector<uint64_t> keys;  // kEmpty where unused
    std::vector<MergeValue> values;
    uint64_t mask = 0;
    void build(const std::vector<std::pair<uint64_t, MergeValue>>& items);
    const MergeValue* find(int32_t a, int32_t b) const;
  };

  void merge_word(std::string_view word, std::vector<int32_t>& out) const;
  int32_t char_id(std::string_view ch, bool first, bool last) const;

  StringIdMap vocab_;
  std::vector<std::string> id_to_token_;
  std::vector<uint8_t> has_id_;
  PairTable merges_;
  std::string prefix_, suffix_;
  bool ignore_merges_ = false, byte_fallback_ = false, fuse_unk_ = false;
  int32_t unk_id_ = -1;
  std::array<int32_t, 256> byte_ids_{};  // "<0xNN>" ids, -1 where absent
  std::vector<int32_t> small_char_ids_;  // code point < 0x800 → id of that single character
  uint64_t uid_;                         // identifies this model's entries in thread caches
};

}  // namespace sf::tok
