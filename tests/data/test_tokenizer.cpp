// Unit tests of sf::Tokenizer's pieces on small hand-written tokenizer.json files: merges formats,
// byte-level mapping, added/special-token splitting, byte fallback, decoders, UTF-8 repair and
// the error messages for malformed files.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "data/tokenizer.h"
#include "data/unicode_utf8.h"

namespace sf {
namespace {

using Ids = std::vector<int32_t>;

// A byte-level BPE tokenizer over the vocabulary {a, b, c, ab, abc, Ġ, Ġa, <|x|>...}.
std::string byte_level_json(const std::string& merges, const std::string& extra_added = "") {
  return R"({
    "version": "1.0", "truncation": null, "padding": null,
    "added_tokens": [
      {"id": 11, "content": "<|x|>", "single_word": false, "lstrip": false, "rstrip": false,
       "normalized": false, "special": true})" +
         extra_added + R"(],
    "normalizer": null,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true,
                      "use_regex": true},
    "post_processor": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false,
                       "use_regex": true},
    "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true,
                "use_regex": true},
    "model": {"type": "BPE", "dropout": null, "unk_token": null,
              "continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": false,
              "byte_fallback": false,
              "vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "abc": 4, "Ġ": 5, "Ġa": 6, "Ġab": 7,
                        "Ġabc": 8, "x": 9, "!": 10},
              "merges": )" +
         merges + R"(}
  })";
}

TEST(Tokenizer, MergesAsStringsAndAsPairsAgree) {
  Tokenizer s = Tokenizer::from_json(byte_level_json(R"(["a b", "ab c", "Ġ a", "Ġa b", "Ġab c"])"));
  Tokenizer p = Tokenizer::from_json(
      byte_level_json(R"([["a","b"], ["ab","c"], ["Ġ","a"], ["Ġa","b"], ["Ġab","c"]])"));
  for (const Tokenizer* t : {&s, &p}) {
    EXPECT_EQ(t->encode("abc", false), (Ids{4}));
    // " abc": Ġ a b c → Ġ ab c (rank 0) → Ġ abc (rank 1); "Ġ abc" is no merge.
    EXPECT_EQ(t->encode("abc abc", false), (Ids{4, 5, 4}));
    EXPECT_EQ(t->encode("cab", false), (Ids{2, 3}));
  }
}

TEST(Tokenizer, MergeRankOrderDecides) {
  // With the "Ġ" merges ranked first, " abc" grows from the left into one token.
  Tokenizer t = Tokenizer::from_json(byte_level_json(R"(["Ġ a", "Ġa b", "Ġab c", "a b", "ab c"])"));
  EXPECT_EQ(t.encode("abc abc", false), (Ids{4, 8}));
  Tokenizer u = Tokenizer::from_json(byte_level_json(R"(["a b", "ab c"])"));
  EXPECT_EQ(u.encode("aab", false), (Ids{0, 3}));
}

TEST(Tokenizer, ByteLevelTableRoundTrips) {
  const auto& table = utf8::byte_level_table();
  EXPECT_EQ(table.byte_to_cp[' '], 0x120u);   // 'Ġ'
  EXPECT_EQ(table.byte_to_cp['\n'], 0x10Au);  // 'Ċ'
  EXPECT_EQ(table.byte_to_cp['A'], uint32_t('A'));
  EXPECT_EQ(table.byte_to_cp[0], 0x100u);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(table.cp_to_byte[table.byte_to_cp[b]], b);
}

TEST(Tokenizer, SpecialTokensAreCutOutBeforeTheModel) {
  Tokenizer t = Tokenizer::from_json(byte_level_json(R"(["a b", "ab c", "Ġ a", "Ġa b"])"));
  EXPECT_EQ(t.encode("ab<|x|>abc", false), (Ids{3, 11, 4}));
  EXPECT_EQ(t.encode("<|x|><|x|>", false), (Ids{11, 11}));
  EXPECT_EQ(t.encode("<|x|", false), (Ids{9}));  // '<' and '|' are not in this tiny vocab
  EXPECT_EQ(t.token_to_id("<|x|>"), 11);
  EXPECT_EQ(t.id_to_token(11), "<|x|>");
  EXPECT_TRUE(t.is_special(11));
  EXPECT_EQ(t.vocab_size(), 12);
}

TEST(Tokenizer, AddedTokenStripAndSingleWord) {
  std::string extra = R"(,
      {"id": 12, "content": "xx", "single_word": true, "lstrip": false, "rstrip": false,
       "normalized": false, "special": false},
      {"id": 13, "content": "!!", "single_word": false, "lstrip": true, "rstrip": true,
       "normalized": false, "special": false})";
  Tokenizer t = Tokenizer::from_json(byte_level_json(R"(["a b", "Ġ a"])", extra));
  EXPECT_EQ(t.encode("xx a", false), (Ids{12, 6}));
  EXPECT_EQ(t.encode("axx", false), (Ids{0, 9, 9}));        // inside a word: not an added token
  EXPECT_EQ(t.encode("a  !!  a", false), (Ids{0, 13, 0}));  // spaces around "!!" are absorbed
  EXPECT_FALSE(t.is_special(12));
}

TEST(Tokenizer, DecodeByteLevelAndSkipSpecial) {
  Tokenizer t = Tokenizer::from_json(byte_level_json(R"(["a b", "ab c", "Ġ a", "Ġa b", "Ġab c"])"));
  Ids ids = t.encode("abc abc<|x|>", false);
  EXPECT_EQ(ids, (Ids{4, 5, 4, 11}));
  EXPECT_EQ(t.decode(ids), "abc abc<|x|>");
  EXPECT_EQ(t.decode(ids, /*skip_special_tokens=*/true), "abc abc");
  EXPECT_EQ(t.decode(Ids{4, 12345, 8}), "abc abc");  // unknown ids are skipped
}

// SentencePiece-style BPE as in Llama-2/Mistral: normalizer Prepend + Replace, byte fallback.
std::string sentencepiece_json() {
  return R"({
    "version": "1.0", "truncation": null, "padding": null,
    "added_tokens": [
      {"id": 0, "content": "<unk>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
      {"id": 1, "content": "<s>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
      {"id": 2, "content": "</s>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}],
    "normalizer": {"type": "Sequence", "normalizers": [
      {"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
    "pre_tokenizer": null,
    "post_processor": {"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
      "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
    "decoder": {"type": "Sequence", "decoders": [
      {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"},
      {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
    "model": {"type": "BPE", "dropout": null, "unk_token": "<unk>", "continuing_subword_prefix": null,
      "end_of_word_suffix": null, "fuse_unk": true, "byte_fallback": true,
      "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "<0xC3>": 3, "<0xA9>": 4, "<0xE2>": 5, "<0x82>": 6,
                "<0xAC>": 7, "▁": 8, "h": 9, "i": 10, "▁h": 11, "▁hi": 12},
      "merges": ["▁ h", "▁h i"]}
  })";
}

TEST(Tokenizer, ByteFallbackAndTemplateBos) {
  Tokenizer t = Tokenizer::from_json(sentencepiece_json());
  EXPECT_EQ(t.encode("hi", false), (Ids{12}));
  EXPECT_EQ(t.encode("hi", true), (Ids{1, 12}));
  EXPECT_EQ(t.bos_id(), 1);
  EXPECT_EQ(t.bos_token(), "<s>");
  // "é" is not in the vocab: its two UTF-8 bytes become <0xC3> <0xA9>.
  EXPECT_EQ(t.encode("hé", false), (Ids{11, 3, 4}));
  EXPECT_EQ(t.decode(Ids{11, 3, 4}), "hé");
  // A lone byte that is not valid UTF-8 decodes to U+FFFD.
  EXPECT_EQ(t.decode(Ids{11, 3}), "h\xEF\xBF\xBD");
  // "€" (E2 82 AC) is all byte tokens; the leading "▁" is stripped by the decoder.
  EXPECT_EQ(t.decode(t.encode("hi €", false)), "hi €");
  EXPECT_EQ(t.decode(t.encode("hi", true)), "<s> hi");
  EXPECT_EQ(t.decode(t.encode("hi", true), true), "hi");
}

// Metaspace pre-tokenizer/decoder as in newer Llama/Mistral files (prepend_scheme "first": only
// the text at the very start gets "▁", not the text after a special token). Expected ids are
// those of HF tokenizers 0.23 on the same JSON.
std::string metaspace_json(bool split) {
  return std::string(R"({
    "version": "1.0", "truncation": null, "padding": null,
    "added_tokens": [
      {"id": 0, "content": "<unk>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
      {"id": 1, "content": "<s>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}],
    "normalizer": null,
    "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": )") +
         (split ? "true" : "false") + R"(},
    "post_processor": null,
    "decoder": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": false},
    "model": {"type": "BPE", "dropout": null, "unk_token": "<unk>", "continuing_subword_prefix": null,
      "end_of_word_suffix": null, "fuse_unk": true, "byte_fallback": false,
      "vocab": {"<unk>": 0, "<s>": 1, "▁": 2, "h": 3, "i": 4, "▁h": 5, "▁hi": 6, "hi": 7},
      "merges": ["▁ h", "▁h i", "h i"]}
  })";
}

TEST(Tokenizer, MetaspacePrependFirst) {
  Tokenizer t = Tokenizer::from_json(metaspace_json(false));
  EXPECT_EQ(t.encode("hi hi", false), (Ids{6, 6}));
  EXPECT_EQ(t.encode("<s>hi", false), (Ids{1, 7}));
  EXPECT_EQ(t.encode("<s> hi", false), (Ids{1, 6}));
  EXPECT_EQ(t.encode("hi<s>hi", false), (Ids{6, 1, 7}));
  EXPECT_EQ(t.encode(" hi", false), (Ids{6}));
  EXPECT_EQ(t.encode("hiq", false), (Ids{6, 0}));       // unknown char → <unk>
  EXPECT_EQ(t.encode("qq hi", false), (Ids{2, 0, 6}));  // fuse_unk: one <unk> for "qq"
  EXPECT_EQ(t.decode(Ids{6, 1, 7}), "hi<s>hi");
  EXPECT_EQ(t.decode(Ids{2, 0, 6}), "<unk> hi");
  Tokenizer u = Tokenizer::from_json(metaspace_json(true));
  EXPECT_EQ(u.encode("<s>hi hi", false), (Ids{1, 7, 6}));
}

// The "Whitespace" pre-tokenizer splits on \w+|[^\w\s]+ and drops the whitespace, so the "i !"
// merge (ranked first) never applies across "hi" and "!". Expected ids from Hugging Face
// `tokenizers` 0.23 on this same file.
TEST(Tokenizer, WhitespacePreTokenizerSplitsWordsFromPunctuation) {
  Tokenizer t = Tokenizer::from_json(R"({
    "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
    "normalizer": null, "pre_tokenizer": {"type": "Whitespace"},
    "post_processor": null, "decoder": null,
    "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
      "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
      "vocab": {"h": 0, "i": 1, "!": 2, "hi": 3, "i!": 4, "?": 5}, "merges": ["i !", "h i"]}
  })");
  EXPECT_EQ(t.encode("hi!", false), (Ids{3, 2}));
  EXPECT_EQ(t.encode("hi  hi", false), (Ids{3, 3}));
  EXPECT_EQ(t.encode("hi!?!", false), (Ids{3, 2, 5, 2}));
  EXPECT_EQ(t.encode(" h\ti ", false), (Ids{0, 1}));
}

TEST(Tokenizer, InvalidUtf8IsReplacedLikePython) {
  EXPECT_EQ(utf8::repair("a\xFFz"), "a\xEF\xBF\xBDz");
  EXPECT_EQ(utf8::repair("\xE0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // two maximal subparts
  EXPECT_EQ(utf8::repair("\xF0\x9F\x98"), "\xEF\xBF\xBD");          // truncated emoji: one
  EXPECT_EQ(utf8::repair("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_TRUE(utf8::is_valid("héllo 🙂"));
  EXPECT_FALSE(utf8::is_valid("\xC0\xAF"));
  Tokenizer t = Tokenizer::from_json(sentencepiece_json());
  EXPECT_EQ(t.encode("h\xFF", false), t.encode("h\xEF\xBF\xBD", false));
}

std::string error_of(const std::string& json) {
  try {
    Tokenizer::from_json(json, {}, "/models/x/tokenizer.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

void replace_once(std::string& s, const std::string& from, const std::string& to) {
  size_t at = s.find(from);
  ASSERT_NE(at, std::string::npos) << from;
  s.replace(at, from.size(), to);
}

TEST(Tokenizer, ErrorsNameFileKeyAndType) {
  std::string j = byte_level_json(R"(["a b"])");
  replace_once(j, R"("type": "BPE")", R"("type": "WordPiece")");
  std::string e = error_of(j);
  EXPECT_NE(e.find("/models/x/tokenizer.json"), std::string::npos) << e;
  EXPECT_NE(e.find("model.type"), std::string::npos) << e;
  EXPECT_NE(e.find("WordPiece"), std::string::npos) << e;

  j = byte_level_json(R"(["a b", "a q"])");
  e = error_of(j);
  EXPECT_NE(e.find("model.merges[1]"), std::string::npos) << e;
  EXPECT_NE(e.find("\"q\""), std::string::npos) << e;

  j = byte_level_json(R"(["a b"])");
  replace_once(j, R"("normalizer": null)", R"("normalizer": {"type": "BertNormalizer"})");
  e = error_of(j);
  EXPECT_NE(e.find("normalizer.type"), std::string::npos) << e;
  EXPECT_NE(e.find("BertNormalizer"), std::string::npos) << e;

  j = byte_level_json(R"(["a b"])");
  replace_once(
      j, R"("pre_tokenizer": {"type": "ByteLevel")",
      R"("pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Punctuation"}]}, "x": {"type": "ByteLevel")");
  e = error_of(j);
  EXPECT_NE(e.find("pre_tokenizer.pretokenizers[0].type"), std::string::npos) << e;
  EXPECT_NE(e.find("Punctuation"), std::string::npos) << e;

  j = byte_level_json(R"(["a b"])");
  replace_once(j, R"("merges": ["a b"])", R"("mergez": [])");
  e = error_of(j);
  EXPECT_NE(e.find("model.merges"), std::string::npos) << e;
  EXPECT_NE(e.find("missing"), std::string::npos) << e;

  e = error_of("{ not json");
  EXPECT_NE(e.find("/models/x/tokenizer.json"), std::string::npos) << e;
  EXPECT_NE(e.find("not valid JSON"), std::string::npos) << e;

  try {
    Tokenizer::load("/nonexistent/model");
    FAIL() << "expected an error";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("/nonexistent/model/tokenizer.json"), std::string::npos);
  }
}

TEST(Tokenizer, AddedTokenIdsFollowHuggingFace) {
  // An added token whose id does not follow the vocabulary gets the id HF gives it (11 here).
  std::string j = byte_level_json(R"(["a b"])");
  replace_once(j, R"({"id": 11, "content": "<|x|>")", R"({"id": 500, "content": "<|x|>")");
  Tokenizer t = Tokenizer::from_json(j);
  EXPECT_EQ(t.token_to_id("<|x|>"), 11);
}

TEST(Tokenizer, ConfigAddsBosWhenThePostProcessorDoesNot) {
  std::string cfg =
      R"({"add_bos_token": true, "bos_token": "<|x|>", "eos_token": {"content": "!"}})";
  Tokenizer t = Tokenizer::from_json(byte_level_json(R"(["a b"])"), cfg);
  EXPECT_EQ(t.encode("ab", true), (Ids{11, 3}));
  EXPECT_EQ(t.encode("ab", false), (Ids{3}));
  EXPECT_EQ(t.eos_id(), 10);
}

}  // namespace
}  // namespace sf
