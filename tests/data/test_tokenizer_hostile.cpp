// Hostile or unusual tokenizer.json files (issue 14): what Hugging Face `tokenizers` does we do
// (expected ids below are tokenizers 0.23.3's, from the same JSON built in python), and what
// would exhaust the stack or the memory is an error naming the file and the JSON path.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/tokenizer.h"

namespace {

using json = nlohmann::ordered_json;
using Ids = std::vector<std::vector<int32_t>>;

const char* const kTexts[] = {"HelloWorld Foo", "abcd bbb abab", "a  b   c    d",
                              "Hello  World",   " x ",           "ab,  cd.  !"};

// A BPE over single characters plus five merges; `pre` the pre-tokenizer, `added` added tokens.
json tokenizer_json(json pre, json added = json::array()) {
  json vocab = json::object();
  const std::string chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ ,.!-";
  for (size_t i = 0; i < chars.size(); ++i) vocab[std::string(1, chars[i])] = i;
  for (const char* t : {"ab", "cd", "He", "llo", "ll"}) vocab[t] = vocab.size();
  json model = {{"type", "BPE"},          {"dropout", nullptr},
                {"unk_token", nullptr},   {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr}, {"fuse_unk", false},
                {"byte_fallback", false}, {"ignore_merges", false},
                {"vocab", vocab},         {"merges", {"a b", "c d", "H e", "l l", "ll o"}}};
  return {{"version", "1.0"},     {"truncation", nullptr},    {"padding", nullptr},
          {"added_tokens", added}, {"normalizer", nullptr},   {"pre_tokenizer", pre},
          {"post_processor", nullptr}, {"decoder", nullptr}, {"model", model}};
}

Ids encode_all(const json& tj) {
  sf::Tokenizer t = sf::Tokenizer::from_json(tj.dump(), "", "hostile/tokenizer.json");
  Ids out;
  for (const char* s : kTexts) out.push_back(t.encode(s, false));
  return out;
}

std::string load_error(const std::string& text) {
  try {
    sf::Tokenizer::from_json(text, "", "hostile/tokenizer.json");
  } catch (const sf::Error& e) {
    return e.what();
  }
  return "";
}

json split(json pattern, const char* behavior) {
  return {{"type", "Split"}, {"pattern", pattern}, {"behavior", behavior}, {"invert", false}};
}

#define EXPECT_HAS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << text

}  // namespace

// An empty-matching regex splits (before each capital letter here), as in Hugging Face.
TEST(TokenizerHostile, SplitRegexMatchingEmptyStringSplitsLikeHf) {
  const Ids hf = {{59, 60, 48, 14, 17, 11, 3, 52, 31, 14, 14},
                  {57, 58, 52, 1, 1, 1, 52, 57, 57},
                  {0, 52, 52, 1, 52, 52, 52, 2, 52, 52, 52, 52, 3},
                  {59, 60, 52, 52, 48, 14, 17, 11, 3},
                  {52, 23, 52},
                  {57, 53, 52, 52, 58, 54, 52, 52, 55}};
  EXPECT_EQ(encode_all(tokenizer_json(split({{"Regex", "(?=[A-Z])"}}, "Isolated"))), hf);
  EXPECT_EQ(encode_all(tokenizer_json(split({{"Regex", "(?=[A-Z])"}}, "MergedWithNext"))), hf);
  // b* matches empty between the b-runs: onig's find_iter semantics.
  const Ids hf_star = {{33, 4, 11, 11, 14, 48, 14, 17, 11, 3, 52, 31, 14, 14},
                       {0, 1, 2, 3, 52, 1, 1, 1, 52, 0, 1, 0, 1},
                       {0, 52, 52, 1, 52, 52, 52, 2, 52, 52, 52, 52, 3},
                       {33, 4, 11, 11, 14, 52, 52, 48, 14, 17, 11, 3},
                       {52, 23, 52},
                       {0, 1, 53, 52, 52, 2, 3, 54, 52, 52, 55}};
  EXPECT_EQ(encode_all(tokenizer_json(split({{"Regex", "b*"}}, "Isolated"))), hf_star);
}

// {"String": ...} patterns load (PCRE2_LITERAL without PCRE2_UCP) and split as in HF.
TEST(TokenizerHostile, SplitStringPatternLoadsAndMatchesHf) {
  const Ids hf_space = {{59, 60, 48, 14, 17, 11, 3, 31, 14, 14}, {57, 58, 1, 1, 1, 57, 57},
                        {0, 1, 2, 3}, {59, 60, 48, 14, 17, 11, 3}, {23}, {57, 53, 58, 54, 55}};
  EXPECT_EQ(encode_all(tokenizer_json(split({{"String", " "}}, "Removed"))), hf_space);
  const Ids hf_ll = {{59, 61, 14, 48, 14, 17, 11, 3, 52, 31, 14, 14},
                     {57, 58, 52, 1, 1, 1, 52, 57, 57},
                     {0, 52, 52, 1, 52, 52, 52, 2, 52, 52, 52, 52, 3},
                     {59, 61, 14, 52, 52, 48, 14, 17, 11, 3},
                     {52, 23, 52},
                     {57, 53, 52, 52, 58, 54, 52, 52, 55}};
  EXPECT_EQ(encode_all(tokenizer_json(split({{"String", "ll"}}, "Isolated"))), hf_ll);
  // A regex metacharacter in a String pattern is literal.
  EXPECT_NO_THROW(encode_all(tokenizer_json(split({{"String", "(."}}, "Isolated"))));
}

// A whitespace-only added token with rstrip: HF counts a match inside the whitespace the
// previous match stripped ("    " → the token twice).
TEST(TokenizerHostile, WhitespaceAddedTokenWithRstripMatchesHf) {
  json added = json::array({{{"id", 99}, {"content", "  "}, {"single_word", false},
                             {"lstrip", false}, {"rstrip", true}, {"normalized", false},
                             {"special", true}}});
  const Ids hf = {{59, 60, 48, 14, 17, 11, 3, 52, 31, 14, 14},
                  {57, 58, 52, 1, 1, 1, 52, 57, 57},
                  {0, 62, 1, 62, 2, 62, 62, 3},
                  {59, 60, 62, 48, 14, 17, 11, 3},
                  {52, 23, 52},
                  {57, 53, 62, 58, 54, 62, 55}};
  EXPECT_EQ(encode_all(tokenizer_json(nullptr, added)), hf);
  json added2 = json::array({{{"id", 99}, {"content", " "}, {"single_word", false},
                              {"lstrip", true}, {"rstrip", true}, {"normalized", false},
                              {"special", false}}});
  const Ids hf2 = {{59, 60, 48, 14, 17, 11, 3, 52, 31, 14, 14},
                   {57, 58, 52, 1, 1, 1, 52, 57, 57},
                   {0, 52, 1, 52, 2, 52, 3},
                   {59, 60, 52, 48, 14, 17, 11, 3},
                   {52, 23, 52},
                   {57, 53, 52, 58, 54, 52, 55}};
  EXPECT_EQ(encode_all(tokenizer_json(nullptr, added2)), hf2);
}

TEST(TokenizerHostile, DeeplyNestedSequenceIsAnError) {
  // {"type":"Sequence","pretokenizers":[ ... 50k deep ... ]}
  std::string pre;
  for (int i = 0; i < 50000; ++i) pre += R"({"type":"Sequence","pretokenizers":[)";
  for (int i = 0; i < 50000; ++i) pre += "]}";
  std::string text = tokenizer_json("@@").dump();
  text.replace(text.find("\"@@\""), 4, pre);
  std::string e = load_error(text);
  EXPECT_HAS(e, "hostile/tokenizer.json: JSON nested deeper than 128 levels");
}

TEST(TokenizerHostile, StackedByteLevelIsRefused) {
  json seq = {{"type", "Sequence"}, {"pretokenizers", json::array()}};
  for (int i = 0; i < 49; ++i)
    seq["pretokenizers"].push_back(
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}});
  std::string e = load_error(tokenizer_json(seq).dump());
  EXPECT_HAS(e, "hostile/tokenizer.json");
  EXPECT_HAS(e, "pre_tokenizer");
  EXPECT_HAS(e, "49 ByteLevel pre-tokenizers");
}

TEST(TokenizerHostile, GrowingNormalizerSequenceIsBounded) {
  json tj = tokenizer_json(nullptr);
  json norms = json::array();
  for (int i = 0; i < 40; ++i)
    norms.push_back({{"type", "Replace"}, {"pattern", {{"String", "a"}}}, {"content", "aa"}});
  tj["normalizer"] = {{"type", "Sequence"}, {"normalizers", norms}};
  sf::Tokenizer t = sf::Tokenizer::from_json(tj.dump(), "", "hostile/tokenizer.json");
  try {
    t.encode(std::string(1000, 'a'), false);
    ADD_FAILURE() << "no error";
  } catch (const sf::Error& e) {
    EXPECT_HAS(e.what(), "hostile/tokenizer.json: at `normalizer`");
    EXPECT_HAS(e.what(), "kMaxGrowth");
  }
}

TEST(TokenizerHostile, VocabularyIdFarBeyondItsSizeIsRefused) {
  json tj = tokenizer_json(nullptr);
  tj["model"]["vocab"]["zz"] = 2147483647;
  std::string e = load_error(tj.dump());
  EXPECT_HAS(e, "hostile/tokenizer.json");
  EXPECT_HAS(e, "model.vocab");
  EXPECT_HAS(e, "id 2147483647 is far beyond the vocabulary's 63 entries");
  json added = json::array({{{"id", 4294967296LL}, {"content", "<x>"}, {"special", true}}});
  e = load_error(tokenizer_json(nullptr, added).dump());
  EXPECT_HAS(e, "added_tokens[0].id");
}

// Post-processor ids past int32 used to wrap (4294967297 became id 1: a silently wrong BOS).
TEST(TokenizerHostile, PostProcessorIdsPastInt32AreRefused) {
  for (const json& bad : {json(4294967297LL), json(-1), json(18446744073709551615ULL)}) {
    json tj = tokenizer_json(nullptr);
    tj["post_processor"] = {
        {"type", "TemplateProcessing"},
        {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
        {"special_tokens",
         {{"<s>",
           {{"id", "<s>"}, {"ids", json::array({bad})}, {"tokens", json::array({"<s>"})}}}}}};
    std::string e = load_error(tj.dump());
    EXPECT_HAS(e, "hostile/tokenizer.json");
    EXPECT_HAS(e,
               "at `post_processor.special_tokens.<s>`: ids must be integers in [0, 2147483647]");
    tj["post_processor"] = {{"type", "BertProcessing"},
                            {"cls", json::array({"[CLS]", bad})},
                            {"sep", json::array({"[SEP]", 2})}};
    e = load_error(tj.dump());
    EXPECT_HAS(e, "post_processor.cls");
    EXPECT_HAS(e, "with an id in [0, 2147483647]");
  }
}

TEST(TokenizerHostile, FolderInPlaceOfTokenizerJsonNamesIt) {
  const auto dir = std::filesystem::temp_directory_path() / "sf_tok_hostile_folder";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "tokenizer.json");
  try {
    sf::Tokenizer::load(dir);
    ADD_FAILURE() << "no error";
  } catch (const sf::Error& e) {
    EXPECT_HAS(e.what(), (dir / "tokenizer.json").string() + " is a folder");
  }
  std::filesystem::remove_all(dir);
}
