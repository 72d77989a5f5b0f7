// defines: sf::Tokenizer::Impl — the loaded tables behind sf::Tokenizer (internal).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "data/bpe_model.h"
#include "data/tokenizer.h"
#include "data/tokenizer_added.h"
#include "data/tokenizer_pipeline.h"

namespace sf {

struct Tokenizer::Impl {
  std::string source;  // tokenizer.json path, for messages
  std::optional<tok::BpeModel> model;
  std::unique_ptr<tok::Normalizer> normalizer;
  std::unique_ptr<tok::PreTokenizer> pre_tokenizer;
  std::unique_ptr<tok::Decoder> decoder;

  std::vector<tok::AddedToken> added;                // in file order
  std::unordered_map<int32_t, size_t> added_by_id;   // id → index in `added`
  tok::StringIdMap added_by_content;                 // content → id
  std::unordered_set<std::string> special_contents;  // skipped by decode(skip=true)
  tok::AddedMatcher raw_matcher, normalized_matcher;

  std::vector<int32_t> prefix_ids, suffix_ids;  // added around the ids by add_special_tokens
  int32_t bos = -1, eos = -1;
  std::string bos_str, eos_str;
  int64_t max_id = -1;

  // One unit of model work: a pre-token (byte range of a buffer) or an added token's id.
  struct Item {
    uint32_t off, len;
    int32_t id;  // >= 0: added token, emitted as is
  };
  // Added-token split, normalization and pre-tokenization of (valid UTF-8) `text`.
  // `at_start`: text begins the input (Metaspace prepend_scheme "first" applies); false for a
  // continuation after an added token (Tokenizer::encode_continuation).
  void split(std::string_view text, std::string& buf, std::vector<Item>& items,
             bool at_start = true) const;
  void encode_items(const std::string& buf, const std::vector<Item>& items, size_t begin,
                    size_t end, std::vector<int32_t>& out) const;
};

}  // namespace sf
