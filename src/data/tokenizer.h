// defines: sf::Tokenizer — a Hugging Face tokenizer.json (BPE family: GPT-2, Llama-3, Qwen2/3,
// Llama-2/Mistral SentencePiece-BPE) that gives the `tokenizers` package's ids, token for token.
//
// Pipeline (as in Hugging Face): added/special tokens are cut out of the raw text first
// (non-normalized ones on the raw text, normalized ones after the normalizer), then each
// remaining piece is normalized, pre-tokenized and run through the BPE model; the
// post-processor (TemplateProcessing, Roberta/Bert, ByteLevel, Sequence) adds BOS/EOS when
// add_special_tokens is true. Where the post-processor adds nothing (null or ByteLevel),
// tokenizer_config.json's add_bos_token / add_eos_token decide instead.
//
// Input text is UTF-8. Invalid UTF-8 is not an error: each maximal ill-formed subsequence is
// replaced by U+FFFD before encoding (Python's bytes.decode("utf-8", errors="replace")), so the
// ids equal those of HF tokenizers for the repaired string. decode() always returns valid
// UTF-8 (byte tokens that do not form valid UTF-8 become U+FFFD, as in HF).
//
// Everything unsupported in tokenizer.json (a WordPiece/Unigram model, an unknown normalizer,
// pre-tokenizer, decoder or post-processor, BPE dropout) throws sf::Error naming the file, the
// JSON path and the type found.
//
// Thread safety: a loaded Tokenizer is immutable; every const method may be called from any
// number of threads. Copies share the loaded tables. Texts larger than 4 GiB are rejected.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sf {

class Tokenizer {
 public:
  // Reads dir/tokenizer.json and, when present, dir/tokenizer_config.json. A folder with only
  // a SentencePiece tokenizer.model is refused, saying how to write its tokenizer.json.
  static Tokenizer load(const std::filesystem::path& dir);
  // Whether `dir` holds a tokenizer that load() reads or refuses with advice (tokenizer.json or
  // tokenizer.model): a folder where none is found may stand in byte ids, one with either not.
  static bool present(const std::filesystem::path& dir);
  // The same from JSON text; `source` names the file in error messages.
  static Tokenizer from_json(std::string_view tokenizer_json, std::string_view config_json = {},
                             const std::string& source = "tokenizer.json");

  // Ids of `text`; with add_special_tokens, BOS/EOS as the post-processor says. Long texts are
  // cut at pre-token boundaries and encoded on the global thread pool.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const;
  // encode(text, false) of a text that follows an added token inside a longer input (no
  // "first" prepend of Metaspace), on the calling thread.
  std::vector<int32_t> encode_continuation(std::string_view text) const;
  // Whether added token `id` cuts a text into parts encoded independently (Hugging Face splits
  // added tokens off first): a raw (not normalized) one without rstrip or single_word. Sets
  // *content to its text.
  bool cuts_after(int32_t id, std::string* content) const;
  // encode() of every text, in parallel over texts.
  std::vector<std::vector<int32_t>> encode_batch(const std::vector<std::string>& texts,
                                                 bool add_special_tokens) const;
  // Text of `ids` through the decoder; unknown ids are skipped (as HF does).
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  int32_t token_to_id(std::string_view token) const;  // -1 when absent
  std::string id_to_token(int32_t id) const;          // "" when absent
  // 1 + the largest id of the model vocabulary and the added tokens (the embedding rows needed).
  int64_t vocab_size() const;
  bool is_special(int32_t id) const;  // an added token marked "special"

  // BOS/EOS from tokenizer_config.json (bos_token / eos_token), else from the post-processor;
  // -1 and "" when the tokenizer has none.
  int32_t bos_id() const;
  int32_t eos_id() const;
  const std::string& bos_token() const;
  const std::string& eos_token() const;

  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace sf
