// defines: the internal stages of sf::Tokenizer — JsonSource (errors naming file + JSON path),
// Pieces (text split into pre-tokens), Normalizer, PreTokenizer and Decoder with their
// factories from tokenizer.json. Not part of the public API (see data/tokenizer.h).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace sf::tok {

using Json = nlohmann::json;

// Where a JSON value came from, for error messages: "<file>: at `pre_tokenizer.pretokenizers[0]`".
struct JsonSource {
  std::string file;
  [[noreturn]] void fail(const std::string& path, const std::string& what) const;
  // The member `key` of object `obj` (at `path`); fails when missing.
  const Json& at(const Json& obj, const std::string& path, const char* key) const;
  std::string str(const Json& obj, const std::string& path, const char* key) const;
  bool boolean(const Json& obj, const std::string& path, const char* key, bool def) const;
  // The "type" of a component object at `path`.
  std::string type(const Json& obj, const std::string& path) const;
};
std::string json_path(const std::string& parent, const char* key);
std::string json_path(const std::string& parent, size_t index);

// A text cut into pieces; each piece is a byte range of `buf`.
struct Pieces {
  struct Span {
    uint32_t off, len;
    bool first;  // starts at offset 0 of the input (Metaspace prepend_scheme "first")
  };
  std::string buf;
  std::vector<Span> spans;
  std::string_view view(const Span& s) const { return std::string_view(buf).substr(s.off, s.len); }
};

// A Sequence of normalizers or pre-tokenizers may grow its input at most this many times (plus
// kMaxGrowthSlack bytes): one ByteLevel doubles a text at most, Metaspace about triples it;
// 49 stacked ByteLevel steps would grow it 2^49 times (issue 14).
inline constexpr size_t kMaxGrowth = 8, kMaxGrowthSlack = 4096;
// Fails naming `where` when `now` bytes grew past the bound from `before`.
void check_growth(size_t before, size_t now, const std::string& where);

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void apply(std::string& s) const = 0;
};
// `j` may be null (returns nullptr).
std::unique_ptr<Normalizer> make_normalizer(const Json& j, const std::string& path,
                                            const JsonSource& src);

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  virtual void apply(Pieces& p) const = 0;
};
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Json& j, const std::string& path,
                                                 const JsonSource& src);

class Decoder {
 public:
  virtual ~Decoder() = default;
  // Hugging Face's decode_chain: tokens in, tokens out (joined by the caller).
  virtual void apply(std::vector<std::string>& tokens) const = 0;
};
std::unique_ptr<Decoder> make_decoder(const Json& j, const std::string& path,
                                      const JsonSource& src);

// A "pattern" object: {"String": "..."} or {"Regex": "..."}.
struct PatternSpec {
  std::string text;
  bool is_regex = false;
};
PatternSpec parse_pattern(const Json& j, const std::string& path, const JsonSource& src);

}  // namespace sf::tok
