// defines: sf::Regex — a PCRE2 pattern compiled with JIT in UTF + UCP mode (so \p{L}, \s and \w
// follow Unicode as in the Oniguruma engine Hugging Face tokenizers use). Immutable after
// construction; matching is thread-safe (per-thread JIT stacks and match data).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sf {

class Regex {
 public:
  // Throws sf::Error naming `where` (file and JSON path) when the pattern does not compile.
  // `literal` compiles the pattern as a plain string.
  Regex(const std::string& pattern, bool literal, const std::string& where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Appends the [begin, end) byte ranges of all non-overlapping matches in `text` (valid UTF-8)
  // to `out`, left to right, empty ones included as Hugging Face's (onig's) find_iter yields them.
  void find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const;
  // Replaces every match by `with`.
  std::string replace_all(std::string_view text, std::string_view with) const;

  const std::string& pattern() const { return pattern_; }

 private:
  struct Impl;
  std::string pattern_;
  bool never_matches_ = false;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sf
