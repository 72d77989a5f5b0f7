// Normalizers of tokenizer.json: NFC/NFD/NFKC/NFKD, Lowercase, Prepend, Replace, Strip, Sequence.
#include "core/error.h"
#include "data/pretokenize_regex.h"
#include "data/tokenizer_pipeline.h"
#include "data/unicode_utf8.h"

namespace sf::tok {

namespace {

class UnicodeForm final : public Normalizer {
 public:
  explicit UnicodeForm(utf8::NormalForm f) : form_(f) {}
  void apply(std::string& s) const override { s = utf8::normalize(s, form_); }

 private:
  utf8::NormalForm form_;
};

class Lowercase final : public Normalizer {
 public:
  void apply(std::string& s) const override { s = utf8::lowercase(s); }
};

// Prepends `prepend` to non-empty text (Llama-2/Mistral's "▁").
class Prepend final : public Normalizer {
 public:
  explicit Prepend(std::string p) : prepend_(std::move(p)) {}
  void apply(std::string& s) const override {
    if (!s.empty()) s.insert(0, prepend_);
  }

 private:
  std::string prepend_;
};

class Replace final : public Normalizer {
 public:
  Replace(const PatternSpec& p, std::string content, const std::string& where)
      : pattern_(p.text), content_(std::move(content)) {
    if (p.is_regex) regex_ = std::make_unique<Regex>(p.text, false, where);
  }
  void apply(std::string& s) const override {
    if (regex_) {
      s = regex_->replace_all(s, content_);
      return;
    }
    if (pattern_.empty() || s.find(pattern_) == std::string::npos) return;
    std::string out;
    out.reserve(s.size() + s.size() / 4);
    size_t prev = 0, at;
    while ((at = s.find(pattern_, prev)) != std::string::npos) {
      out.append(s, prev, at - prev);
      out += content_;
      prev = at + pattern_.size();
    }
    out.append(s, prev, std::string::npos);
    s = std::move(out);
  }

 private:
  std::string pattern_, content_;
  std::unique_ptr<Regex> regex_;
};

// Strips Unicode whitespace on the left and/or right.
class Strip final : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  void apply(std::string& s) const override {
    size_t b = 0, e = s.size();
    if (left_) {
      const char* p = s.data();
      while (p < s.data() + e) {
        const char* q = p;
        if (!utf8::is_whitespace(utf8::next(q))) break;
        p = q;
      }
      b = size_t(p - s.data());
    }
    if (right_) {
      while (e > b) {
        size_t k = e - 1;
        while (k > b && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
        const char* q = s.data() + k;
        if (!utf8::is_whitespace(utf8::next(q))) break;
        e = k;
      }
    }
    s = s.substr(b, e - b);
  }

 private:
  bool left_, right_;
};

class Sequence final : public Normalizer {
 public:
  Sequence(std::vector<std::unique_ptr<Normalizer>> parts, std::string where)
      : parts_(std::move(parts)), where_(std::move(where)) {}
  void apply(std::string& s) const override {
    const size_t before = s.size();
    for (const auto& p : parts_) {
      p->apply(s);
      check_growth(before, s.size(), where_);
    }
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
  std::string where_;
};

}  // namespace

void check_growth(size_t before, size_t now, const std::string& where) {
  if (now > kMaxGrowth * before + kMaxGrowthSlack)
    SF_FAIL(where, ": this sequence grew a text of ", before, " bytes to ", now,
            " bytes, past the bound of ", kMaxGrowth, " times + ", kMaxGrowthSlack,
            " bytes (kMaxGrowth, data/tokenizer_pipeline.h): the steps feed each other "
            "(stacked ByteLevel or Replace steps?); fix the tokenizer.json");
}

std::unique_ptr<Normalizer> make_normalizer(const Json& j, const std::string& path,
                                            const JsonSource& src) {
  if (j.is_null()) return nullptr;
  std::string type = src.type(j, path);
  if (type == "NFC") return std::make_unique<UnicodeForm>(utf8::NormalForm::kNFC);
  if (type == "NFD") return std::make_unique<UnicodeForm>(utf8::NormalForm::kNFD);
  if (type == "NFKC") return std::make_unique<UnicodeForm>(utf8::NormalForm::kNFKC);
  if (type == "NFKD") return std::make_unique<UnicodeForm>(utf8::NormalForm::kNFKD);
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "Prepend") return std::make_unique<Prepend>(src.str(j, path, "prepend"));
  if (type == "Replace") {
    PatternSpec p = parse_pattern(src.at(j, path, "pattern"), json_path(path, "pattern"), src);
    return std::make_unique<Replace>(p, src.str(j, path, "content"),
                                     src.file + ": at `" + json_path(path, "pattern") + "`");
  }
  if (type == "Strip") {
    return std::make_unique<Strip>(src.boolean(j, path, "strip_left", true),
                                   src.boolean(j, path, "strip_right", true));
  }
  if (type == "Sequence") {
    std::string key_path = json_path(path, "normalizers");
    const Json& arr = src.at(j, path, "normalizers");
    if (!arr.is_array()) src.fail(key_path, "expected an array");
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (size_t i = 0; i < arr.size(); ++i) {
      auto n = make_normalizer(arr[i], json_path(key_path, i), src);
      if (n) parts.push_back(std::move(n));
    }
    return std::make_unique<Sequence>(std::move(parts), src.file + ": at `" + path + "`");
  }
  src.fail(json_path(path, "type"),
           "unsupported normalizer type \"" + type +
               "\" (supported: NFC, NFD, NFKC, NFKD, Lowercase, Prepend, Replace, Strip, "
               "Sequence)");
}

}  // namespace sf::tok
