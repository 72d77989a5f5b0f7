#include "data/tokenizer_added.h"

#include <algorithm>

#include "data/unicode_utf8.h"

namespace sf::tok {

void AddedMatcher::build(std::vector<AddedToken> tokens, const std::vector<std::string>& patterns) {
  tokens_ = std::move(tokens);
  nodes_.assign(1, Node{});
  std::fill(std::begin(first_byte_), std::end(first_byte_), false);
  for (size_t t = 0; t < tokens_.size(); ++t) {
    const std::string& pat = patterns[t];
    if (pat.empty()) continue;
    first_byte_[uint8_t(pat[0])] = true;
    int32_t node = 0;
    for (char c : pat) {
      int32_t next = child(node, uint8_t(c));
      if (next < 0) {
        next = int32_t(nodes_.size());
        nodes_.push_back(Node{});
        auto& edges = nodes_[size_t(node)].next;
        edges.insert(std::lower_bound(edges.begin(), edges.end(),
                                      std::pair<uint8_t, int32_t>(uint8_t(c), -1)),
                     {uint8_t(c), next});
      }
      node = next;
    }
    // The first of identical patterns wins, as in an Aho-Corasick automaton.
    if (nodes_[size_t(node)].token < 0) nodes_[size_t(node)].token = int32_t(t);
  }
}

int32_t AddedMatcher::child(int32_t node, uint8_t b) const {
  const auto& edges = nodes_[size_t(node)].next;
  auto it = std::lower_bound(edges.begin(), edges.end(), std::pair<uint8_t, int32_t>(b, -1));
  return it != edges.end() && it->first == b ? it->second : -1;
}

namespace {

// The code point that ends just before byte `pos` (pos > 0).
uint32_t char_before(std::string_view s, size_t pos) {
  size_t k = pos - 1;
  while (k > 0 && (uint8_t(s[k]) & 0xC0) == 0x80) --k;
  const char* p = s.data() + k;
  return utf8::next(p);
}

}  // namespace

void AddedMatcher::split(std::string_view text, std::vector<Segment>& out) const {
  size_t n = text.size();
  if (n == 0) return;
  if (tokens_.empty()) {
    out.push_back({0, n, -1});
    return;
  }
  size_t start_offset = 0, i = 0;
  while (i < n) {
    if (!first_byte_[uint8_t(text[i])]) {
      ++i;
      continue;
    }
    // Longest pattern starting at i.
    int32_t node = 0, best = -1;
    size_t best_end = 0;
    for (size_t k = i; k < n; ++k) {
      node = child(node, uint8_t(text[k]));
      if (node < 0) break;
      if (nodes_[size_t(node)].token >= 0) {
        best = nodes_[size_t(node)].token;
        best_end = k + 1;
      }
    }
    if (best < 0) {
      ++i;
      continue;
    }
    const AddedToken& tok = tokens_[size_t(best)];
    size_t start = i, stop = best_end;
    i = best_end;  // matches never overlap, even when this one is discarded below
    if (tok.single_word) {
      bool start_space = start == 0 || !utf8::is_word_char(char_before(text, start));
      bool stop_space = true;
      if (stop < n) {
        const char* p = text.data() + stop;
        stop_space = !utf8::is_word_char(utf8::next(p));
      }
      if (!start_space || !stop_space) continue;
    }
    if (tok.lstrip) {
      size_t s = start;
      while (s > 0) {
        size_t k = s - 1;
        while (k > 0 && (uint8_t(text[k]) & 0xC0) == 0x80) --k;
        const char* p = text.data() + k;
        if (!utf8::is_whitespace(utf8::next(p))) break;
        s = k;
      }
      start = std::max(s, start_offset);
    }
    if (tok.rstrip) {
      while (stop < n) {
        const char* p = text.data() + stop;
        if (!utf8::is_whitespace(utf8::next(p))) break;
        stop = size_t(p - text.data());
      }
    }
    if (start_offset < start) out.push_back({start_offset, start, -1});
    // An lstrip that reaches back only into what the previous match took leaves an empty match,
    // which Hugging Face drops (PreTokenizedString::split keeps non-empty pieces only).
    if (start < stop) out.push_back({start, stop, tok.id});
    start_offset = stop;
    // Hugging Face finds every match in the original text first, then strips: a match inside
    // whitespace an rstrip already took still counts ("    " with an rstrip "  " token gives the
    // token twice), so scanning resumes at the match's end, not at the stripped end.
  }
  if (start_offset != n) out.push_back({start_offset, n, -1});
}

}  // namespace sf::tok
