// Decoders of tokenizer.json: ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip, Sequence
// — each Hugging Face's decode_chain, token list in, token list out.
#include "core/error.h"
#include "data/pretokenize_regex.h"
#include "data/tokenizer_pipeline.h"
#include "data/unicode_utf8.h"

namespace sf::tok {

namespace {

// Maps the byte-level alphabet back to bytes; a token with a character outside the alphabet
// keeps its UTF-8 bytes. The whole result is repaired like String::from_utf8_lossy.
class ByteLevel final : public Decoder {
 public:
  void apply(std::vector<std::string>& tokens) const override {
    const auto& table = utf8::byte_level_table();
    std::string bytes;
    for (const std::string& t : tokens) {
      size_t mark = bytes.size();
      const char* p = t.data();
      const char* end = p + t.size();
      bool ok = true;
      while (p < end) {
        uint32_t c = utf8::next(p);
        int b = c < table.cp_to_byte.size() ? table.cp_to_byte[c] : -1;
        if (b < 0) {
          ok = false;
          break;
        }
        bytes += char(b);
      }
      if (!ok) {
        bytes.resize(mark);
        bytes += t;
      }
    }
    tokens.assign(1, utf8::is_valid(bytes) ? bytes : utf8::repair(bytes));
  }
};

class Metaspace final : public Decoder {
 public:
  Metaspace(std::string rep, bool strip_first) : rep_(std::move(rep)), strip_first_(strip_first) {}
  void apply(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string out;
      const std::string& t = tokens[i];
      size_t prev = 0, at;
      while ((at = t.find(rep_, prev)) != std::string::npos) {
        out.append(t, prev, at - prev);
        // Hugging Face drops every replacement character of the first token.
        if (!(i == 0 && strip_first_)) out += ' ';
        prev = at + rep_.size();
      }
      out.append(t, prev, std::string::npos);
      tokens[i] = std::move(out);
    }
  }

 private:
  std::string rep_;
  bool strip_first_;
};

class Replace final : public Decoder {
 public:
  Replace(const PatternSpec& p, std::string content, const std::string& where)
      : pattern_(p.text), content_(std::move(content)) {
    if (p.is_regex) regex_ = std::make_unique<Regex>(p.text, false, where);
  }
  void apply(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) {
      if (regex_) {
        t = regex_->replace_all(t, content_);
        continue;
      }
      if (pattern_.empty()) continue;
      std::string out;
      size_t prev = 0, at;
      while ((at = t.find(pattern_, prev)) != std::string::npos) {
        out.append(t, prev, at - prev);
        out += content_;
        prev = at + pattern_.size();
      }
      out.append(t, prev, std::string::npos);
      t = std::move(out);
    }
  }

 private:
  std::string pattern_, content_;
  std::unique_ptr<Regex> regex_;
};

// Runs of "<0xNN>" tokens become their bytes when those form valid UTF-8, else one U+FFFD per
// byte (Hugging Face's rule).
class ByteFallback final : public Decoder {
 public:
  void apply(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    out.reserve(tokens.size());
    std::string bytes;
    size_t nbytes = 0;
    auto flush = [&] {
      if (nbytes == 0) return;
      if (utf8::is_valid(bytes)) {
        out.push_back(bytes);
      } else {
        for (size_t k = 0; k < nbytes; ++k) out.emplace_back("\xEF\xBF\xBD");
      }
      bytes.clear();
      nbytes = 0;
    };
    for (std::string& t : tokens) {
      int v = -1;
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>') v = hex_byte(t[3], t[4]);
      if (v >= 0) {
        bytes += char(v);
        ++nbytes;
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens = std::move(out);
  }

 private:
  static int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  static int hex_byte(char a, char b) {
    int h = hex(a), l = hex(b);
    return h < 0 || l < 0 ? -1 : h * 16 + l;
  }
};

class Fuse final : public Decoder {
 public:
  void apply(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const auto& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

// Removes up to `start` leading and `stop` trailing `content` characters from every token.
class Strip final : public Decoder {
 public:
  Strip(std::string content, size_t start, size_t stop)
      : content_(std::move(content)), start_(start), stop_(stop) {}
  void apply(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) {
      size_t b = 0, e = t.size();
      for (size_t k = 0; k < start_ && t.compare(b, content_.size(), content_) == 0 && b < e; ++k)
        b += content_.size();
      for (size_t k = 0; k < stop_ && e >= b + content_.size() &&
                         t.compare(e - content_.size(), content_.size(), content_) == 0;
           ++k)
        e -= content_.size();
      t = t.substr(b, e - b);
    }
  }

 private:
  std::string content_;
  size_t start_, stop_;
};

class Sequence final : public Decoder {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Decoder>> parts) : parts_(std::move(parts)) {}
  void apply(std::vector<std::string>& tokens) const override {
    for (const auto& p : parts_) p->apply(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

}  // namespace

std::unique_ptr<Decoder> make_decoder(const Json& j, const std::string& path,
                                      const JsonSource& src) {
  if (j.is_null()) return nullptr;
  std::string type = src.type(j, path);
  if (type == "ByteLevel") return std::make_unique<ByteLevel>();
  if (type == "Metaspace") {
    bool strip_first = true;
    if (j.contains("prepend_scheme"))
      strip_first = src.str(j, path, "prepend_scheme") != "never";
    else
      strip_first = src.boolean(j, path, "add_prefix_space", true);
    return std::make_unique<Metaspace>(src.str(j, path, "replacement"), strip_first);
  }
  if (type == "Replace") {
    PatternSpec p = parse_pattern(src.at(j, path, "pattern"), json_path(path, "pattern"), src);
    return std::make_unique<Replace>(p, src.str(j, path, "content"),
                                     src.file + ": at `" + json_path(path, "pattern") + "`");
  }
  if (type == "ByteFallback") return std::make_unique<ByteFallback>();
  if (type == "Fuse") return std::make_unique<Fuse>();
  if (type == "Strip") {
    const Json& start = src.at(j, path, "start");
    const Json& stop = src.at(j, path, "stop");
    if (!start.is_number_unsigned() || !stop.is_number_unsigned())
      src.fail(path, "Strip's start and stop must be non-negative integers");
    return std::make_unique<Strip>(src.str(j, path, "content"), start.get<size_t>(),
                                   stop.get<size_t>());
  }
  if (type == "Sequence") {
    std::string key_path = json_path(path, "decoders");
    const Json& arr = src.at(j, path, "decoders");
    if (!arr.is_array()) src.fail(key_path, "expected an array");
    std::vector<std::unique_ptr<Decoder>> parts;
    for (size_t i = 0; i < arr.size(); ++i) {
      auto d = make_decoder(arr[i], json_path(key_path, i), src);
      if (d) parts.push_back(std::move(d));
    }
    return std::make_unique<Sequence>(std::move(parts));
  }
  src.fail(json_path(path, "type"),
           "unsupported decoder type \"" + type +
               "\" (supported: ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip, "
               "Sequence)");
}

}  // namespace sf::tok
