// defines: sf::tok::AddedToken and AddedMatcher — Hugging Face's added-vocabulary split: the
// leftmost-longest matches of the added tokens, then single_word / lstrip / rstrip applied to
// each match exactly as tokenizers' AddedVocabulary::find_matches does.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sf::tok {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool single_word = false, lstrip = false, rstrip = false, normalized = false, special = false;
};

class AddedMatcher {
 public:
  struct Segment {
    size_t begin, end;
    int32_t id;  // -1: ordinary text
  };
  // `patterns[i]` is what `tokens[i]` matches (its content, or its normalized content).
  void build(std::vector<AddedToken> tokens, const std::vector<std::string>& patterns);
  bool empty() const { return tokens_.empty(); }
  // Cuts `text` into ordinary-text and added-token segments covering it (empty text: none).
  void split(std::string_view text, std::vector<Segment>& out) const;

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> next;  // sorted by byte
    int32_t token = -1;                             // index into tokens_ ending here
  };
  int32_t child(int32_t node, uint8_t b) const;

  std::vector<AddedToken> tokens_;
  std::vector<Node> nodes_;  // nodes_[0] is the root
  bool first_byte_[256] = {};
};

}  // namespace sf::tok
