// Pre-tokenizers of tokenizer.json: Split (regex or string, every behavior, invert), ByteLevel,
// Metaspace, Digits, Whitespace, WhitespaceSplit, Sequence — with Hugging Face's semantics.
#include <utf8proc.h>

#include "core/error.h"
#include "data/pretokenize_regex.h"
#include "data/tokenizer_pipeline.h"
#include "data/unicode_utf8.h"

namespace sf::tok {

namespace {

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

Behavior parse_behavior(const Json& j, const std::string& path, const JsonSource& src) {
  std::string b = src.str(j, path, "behavior");
  if (b == "Removed") return Behavior::kRemoved;
  if (b == "Isolated") return Behavior::kIsolated;
  if (b == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return Behavior::kMergedWithNext;
  if (b == "Contiguous") return Behavior::kContiguous;
  src.fail(json_path(path, "behavior"), "unsupported split behavior \"" + b + "\"");
}

using Ranges = std::vector<std::pair<size_t, size_t>>;

// NormalizedString::split of Hugging Face: `matches` are the pattern's matches inside a piece
// of length `n`; emits the kept sub-ranges, in order, non-empty.
void split_by_matches(size_t n, const Ranges& matches, Behavior behavior, bool invert,
                      Ranges& out) {
  struct Part {
    size_t b, e;
    bool is_match;
  };
  std::vector<Part> parts;
  parts.reserve(matches.size() * 2 + 1);
  size_t prev = 0;
  for (auto [b, e] : matches) {
    if (prev != b) parts.push_back({prev, b, invert});
    parts.push_back({b, e, !invert});
    prev = e;
  }
  if (prev != n) parts.push_back({prev, n, invert});
  auto emit = [&](size_t b, size_t e) {
    if (e > b) out.emplace_back(b, e);
  };
  // Walks the parts in order, extending the last piece when joins(is_match, previous) says so.
  auto merge_forward = [&](auto joins) {
    Ranges acc;
    bool previous = false;
    for (const Part& p : parts) {
      if (!acc.empty() && joins(p.is_match, previous))
        acc.back().second = p.e;
      else
        acc.emplace_back(p.b, p.e);
      previous = p.is_match;
    }
    for (auto [b, e] : acc) emit(b, e);
  };
  switch (behavior) {
    case Behavior::kIsolated:
      for (const Part& p : parts) emit(p.b, p.e);
      break;
    case Behavior::kRemoved:
      for (const Part& p : parts)
        if (!p.is_match) emit(p.b, p.e);
      break;
    case Behavior::kContiguous:  // runs of matches, and runs of non-matches, each one piece
      merge_forward([](bool match, bool previous) { return match == previous; });
      break;
    case Behavior::kMergedWithPrevious:  // a match joins the piece before it
      merge_forward([](bool match, bool previous) { return match && !previous; });
      break;
    case Behavior::kMergedWithNext: {
      Ranges acc;
      bool previous = false;
      for (size_t i = parts.size(); i-- > 0;) {
        const Part& p = parts[i];
        if (p.is_match && !previous && !acc.empty())
          acc.back().first = p.b;
        else
          acc.emplace_back(p.b, p.e);
        previous = p.is_match;
      }
      for (size_t i = acc.size(); i-- > 0;) emit(acc[i].first, acc[i].second);
      break;
    }
  }
}

// Splits every piece in place (same buffer) by a match finder.
template <typename FindMatches>
void split_pieces(Pieces& p, Behavior behavior, bool invert, FindMatches&& find) {
  std::vector<Pieces::Span> spans;
  spans.reserve(p.spans.size() * 2);
  Ranges matches, kept;
  for (const Pieces::Span& s : p.spans) {
    matches.clear();
    kept.clear();
    find(p.view(s), matches);
    split_by_matches(s.len, matches, behavior, invert, kept);
    for (auto [b, e] : kept) {
      spans.push_back({uint32_t(s.off + b), uint32_t(e - b), s.first && b == 0});
    }
  }
  p.spans = std::move(spans);
}

// Every single character satisfying `pred` is a match (Hugging Face's `Fn(char) -> bool` pattern).
template <typename Pred>
auto char_matcher(Pred pred) {
  return [pred](std::string_view text, Ranges& out) {
    const char* base = text.data();
    const char* p = base;
    const char* end = base + text.size();
    while (p < end) {
      const char* q = p;
      uint32_t c = utf8::next(q);
      if (pred(c)) out.emplace_back(size_t(p - base), size_t(q - base));
      p = q;
    }
  };
}

class Split final : public PreTokenizer {
 public:
  Split(const PatternSpec& pattern, Behavior b, bool invert, const std::string& where)
      : regex_(pattern.text, !pattern.is_regex, where), behavior_(b), invert_(invert) {}
  void apply(Pieces& p) const override {
    split_pieces(p, behavior_, invert_,
                 [&](std::string_view t, Ranges& m) { regex_.find_all(t, m); });
  }

 private:
  Regex regex_;
  Behavior behavior_;
  bool invert_;
};

constexpr const char* kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

// GPT-2's byte-level step: optional prefix space, optional GPT-2 regex split, then every byte
// becomes its printable stand-in character.
class ByteLevel final : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, bool use_regex, const std::string& where)
      : add_prefix_space_(add_prefix_space) {
    if (use_regex) regex_ = std::make_unique<Regex>(kGpt2Pattern, false, where);
  }
  void apply(Pieces& p) const override {
    const auto& table = utf8::byte_level_table();
    Pieces out;
    out.buf.reserve(p.buf.size() * 2);
    out.spans.reserve(p.spans.size() * 2);
    std::string tmp;
    Ranges matches, kept;
    for (const Pieces::Span& s : p.spans) {
      std::string_view text = p.view(s);
      if (add_prefix_space_ && (text.empty() || text[0] != ' ')) {
        tmp.clear();
        tmp.push_back(' ');
        tmp.append(text);
        text = tmp;
      }
      kept.clear();
      if (regex_) {
        matches.clear();
        regex_->find_all(text, matches);
        split_by_matches(text.size(), matches, Behavior::kIsolated, false, kept);
      } else if (!text.empty()) {
        kept.emplace_back(0, text.size());
      }
      for (auto [b, e] : kept) {
        auto off = uint32_t(out.buf.size());
        for (size_t i = b; i < e; ++i) out.buf += table.byte_to_str[uint8_t(text[i])];
        out.spans.push_back({off, uint32_t(out.buf.size() - off), s.first && b == 0});
      }
    }
    p = std::move(out);
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> regex_;
};

enum class PrependScheme { kAlways, kFirst, kNever };

// SentencePiece's whitespace handling: ' ' → replacement, optional prefix, split before each
// replacement character.
class Metaspace final : public PreTokenizer {
 public:
  Metaspace(std::string replacement, PrependScheme scheme, bool split)
      : rep_(std::move(replacement)), scheme_(scheme), split_(split) {}
  void apply(Pieces& p) const override {
    Pieces out;
    out.buf.reserve(p.buf.size() * 2);
    for (const Pieces::Span& s : p.spans) {
      std::string_view text = p.view(s);
      auto off = uint32_t(out.buf.size());
      bool starts = text.substr(0, 1) == " " || text.substr(0, rep_.size()) == rep_;
      if (!starts &&
          (scheme_ == PrependScheme::kAlways || (scheme_ == PrependScheme::kFirst && s.first))) {
        out.buf += rep_;
      }
      for (char c : text) {
        if (c == ' ')
          out.buf += rep_;
        else
          out.buf += c;
      }
      auto len = uint32_t(out.buf.size() - off);
      if (!split_) {
        if (len) out.spans.push_back({off, len, s.first});
        continue;
      }
      // MergedWithNext on every replacement character.
      std::string_view piece = std::string_view(out.buf).substr(off, len);
      size_t start = 0, at = piece.find(rep_, 1);
      while (at != std::string_view::npos) {
        out.spans.push_back({uint32_t(off + start), uint32_t(at - start), s.first && start == 0});
        start = at;
        at = piece.find(rep_, at + rep_.size());
      }
      if (len > start) {
        out.spans.push_back({uint32_t(off + start), uint32_t(len - start), s.first && start == 0});
      }
    }
    p = std::move(out);
  }

 private:
  std::string rep_;
  PrependScheme scheme_;
  bool split_;
};

template <typename Find>
class FnSplit final : public PreTokenizer {
 public:
  FnSplit(Find f, Behavior b, bool invert) : find_(std::move(f)), behavior_(b), invert_(invert) {}
  void apply(Pieces& p) const override { split_pieces(p, behavior_, invert_, find_); }

 private:
  Find find_;
  Behavior behavior_;
  bool invert_;
};
template <typename Find>
std::unique_ptr<PreTokenizer> make_fn_split(Find f, Behavior b, bool invert) {
  return std::make_unique<FnSplit<Find>>(std::move(f), b, invert);
}

class Sequence final : public PreTokenizer {
 public:
  Sequence(std::vector<std::unique_ptr<PreTokenizer>> parts, std::string where)
      : parts_(std::move(parts)), where_(std::move(where)) {}
  void apply(Pieces& p) const override {
    const size_t before = p.buf.size();
    for (const auto& part : parts_) {
      part->apply(p);
      check_growth(before, p.buf.size(), where_);
    }
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
  std::string where_;
};

bool is_numeric(uint32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  auto cat = utf8proc_category(int32_t(c));
  return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO;
}

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Json& j, const std::string& path,
                                                 const JsonSource& src) {
  if (j.is_null()) return nullptr;
  std::string type = src.type(j, path);
  std::string where = src.file + ": at `" + path + "`";
  if (type == "Split") {
    PatternSpec pat = parse_pattern(src.at(j, path, "pattern"), json_path(path, "pattern"), src);
    return std::make_unique<Split>(pat, parse_behavior(j, path, src),
                                   src.boolean(j, path, "invert", false), where);
  }
  if (type == "ByteLevel") {
    return std::make_unique<ByteLevel>(src.boolean(j, path, "add_prefix_space", true),
                                       src.boolean(j, path, "use_regex", true), where);
  }
  if (type == "Metaspace") {
    std::string rep = src.str(j, path, "replacement");
    PrependScheme scheme = PrependScheme::kAlways;
    if (j.contains("prepend_scheme")) {
      std::string s = src.str(j, path, "prepend_scheme");
      if (s == "always")
        scheme = PrependScheme::kAlways;
      else if (s == "first")
        scheme = PrependScheme::kFirst;
      else if (s == "never")
        scheme = PrependScheme::kNever;
      else
        src.fail(json_path(path, "prepend_scheme"), "unsupported prepend_scheme \"" + s + "\"");
    } else if (!src.boolean(j, path, "add_prefix_space", true)) {
      scheme = PrependScheme::kNever;
    }
    return std::make_unique<Metaspace>(rep, scheme, src.boolean(j, path, "split", true));
  }
  if (type == "Digits") {
    bool individual = src.boolean(j, path, "individual_digits", false);
    return make_fn_split(char_matcher(is_numeric),
                         individual ? Behavior::kIsolated : Behavior::kContiguous, false);
  }
  if (type == "WhitespaceSplit") {
    return make_fn_split(char_matcher(utf8::is_whitespace), Behavior::kRemoved, false);
  }
  if (type == "Whitespace") {
    return std::make_unique<Split>(PatternSpec{"\\w+|[^\\w\\s]+", true}, Behavior::kRemoved, true,
                                   where);
  }
  if (type == "Sequence") {
    std::string key_path = json_path(path, "pretokenizers");
    const Json& arr = src.at(j, path, "pretokenizers");
    if (!arr.is_array()) src.fail(key_path, "expected an array");
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    for (size_t i = 0; i < arr.size(); ++i) {
      auto p = make_pre_tokenizer(arr[i], json_path(key_path, i), src);
      if (p) parts.push_back(std::move(p));
    }
    return std::make_unique<Sequence>(std::move(parts), where);
  }
  src.fail(json_path(path, "type"),
           "unsupported pre-tokenizer type \"" + type +
               "\" (supported: Split, ByteLevel, Metaspace, Digits, Whitespace, "
               "WhitespaceSplit, Sequence)");
}

}  // namespace sf::tok
