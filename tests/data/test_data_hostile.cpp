// Hostile dataset files and configs (issue 14): missing keys, folders, FIFOs, deep nesting, a
// replaced data file and a corrupted tokenised cache end in errors naming the file, the line and
// the key — skippable where a record is at fault — never in a crash, a hang or silent training.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "core/error.h"
#include "data/chat_template.h"
#include "data/dataset.h"
#include "data/pipeline.h"

namespace sf {
namespace {

namespace fs = std::filesystem;

fs::path temp(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("sf_data_hostile_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void write(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_HAS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << text

DataConfig tokens_config(const fs::path& file, const fs::path& cache) {
  DataConfig c;
  c.file = file;
  c.vocab = 100;
  c.cache_dir = cache;
  c.read.format = DatasetFormat::kTokens;
  return c;
}

}  // namespace

TEST(DataHostile, MissingFormatKeyNamesFileLineKeyAndIsSkippable) {
  fs::path d = temp("missing");
  write(d / "m.jsonl",
        R"({"messages": [{"role": "user", "content": "Q"}]})" "\n"
        R"({"conversations": [{"from": "human", "value": "Q"}]})" "\n");
  const std::string file = (d / "m.jsonl").string();
  std::string e = error_of([&] { read_dataset(d / "m.jsonl", {}); });
  EXPECT_HAS(e, file + ":2: missing \"messages\"");
  EXPECT_HAS(e, "--skip-malformed");
  EXPECT_EQ(e.find("json.exception"), std::string::npos) << e;
  DatasetReadOptions skip;
  skip.skip_malformed = true;
  DatasetStats st;
  EXPECT_EQ(read_dataset(d / "m.jsonl", skip, &st).size(), 1u);
  EXPECT_EQ(st.skipped, 1);
  // The same for sharegpt.
  write(d / "s.jsonl", R"({"conversations": [{"from": "human", "value": "Q"}]})" "\n"
                       R"({"messages": []})" "\n");
  EXPECT_HAS(error_of([&] { read_dataset(d / "s.jsonl", {}); }), ":2: missing \"conversations\"");
}

TEST(DataHostile, FolderOrFifoAsDataIsRefusedNamingThePath) {
  fs::path d = temp("kinds");
  fs::create_directories(d / "data.jsonl");
  std::string e = error_of([&] { read_dataset(d / "data.jsonl", {}); });
  EXPECT_HAS(e, (d / "data.jsonl").string() + " is a folder");
  ASSERT_EQ(mkfifo((d / "fifo.jsonl").c_str(), 0600), 0);
  // With the tokenised cache on, this used to block forever reading the FIFO.
  e = error_of([&] { prepare_samples(tokens_config(d / "fifo.jsonl", d / "cache"), nullptr,
                                     nullptr, nullptr); });
  EXPECT_HAS(e, (d / "fifo.jsonl").string() + " is a FIFO");
}

TEST(DataHostile, DeepNestingInARecordIsAnErrorForThatLine) {
  fs::path d = temp("deep");
  const std::string deep_msg = std::string(25000, '[') + std::string(25000, ']');
  const std::string deep_ids = std::string(100000, '[') + std::string(100000, ']');
  write(d / "d.jsonl", R"({"input_ids": [1, 2, 3]})" "\n"
                       R"({"input_ids": [1, 2], "x": )" + deep_msg + "}\n" +
                       R"({"input_ids": )" + deep_ids + "}\n");
  const std::string file = (d / "d.jsonl").string();
  std::string e = error_of([&] { read_dataset(d / "d.jsonl", {}); });
  EXPECT_HAS(e, file + ":2: JSON nested deeper than 128 levels");
  DatasetReadOptions skip;
  skip.skip_malformed = true;
  DatasetStats st;
  EXPECT_EQ(read_dataset(d / "d.jsonl", skip, &st).size(), 1u);
  EXPECT_EQ(st.skipped, 2);
  EXPECT_HAS(st.skipped_reasons[1], file + ":3: JSON nested deeper than 128");
  // A JSON array file: one level more for the array itself, same limit per record.
  write(d / "a.json", "[" + std::string(200, '[') + std::string(200, ']') + "]");
  EXPECT_HAS(error_of([&] { read_dataset(d / "a.json", {}); }), "nested deeper than 129");
}

TEST(DataHostile, CacheKeyAndRecordsComeFromTheSameBytes) {
  fs::path d = temp("reread");
  write(d / "t.jsonl", R"({"input_ids": [1, 2, 3]})" "\n");
  DataStats st;
  auto first = prepare_samples(tokens_config(d / "t.jsonl", d / "cache"), nullptr, nullptr, &st);
  EXPECT_FALSE(st.from_cache);
  // The file replaced: its new content is what trains, never the cache of the old one.
  write(d / "t.jsonl", R"({"input_ids": [4, 5, 6, 7]})" "\n");
  DataStats st2;
  auto second = prepare_samples(tokens_config(d / "t.jsonl", d / "cache"), nullptr, nullptr, &st2);
  EXPECT_FALSE(st2.from_cache);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].ids, (std::vector<int32_t>{4, 5, 6, 7}));
  // The key is a function of the bytes given, which are the bytes parsed.
  const DataConfig c = tokens_config(d / "t.jsonl", d / "cache");
  EXPECT_EQ(samples_cache_key(c, nullptr, nullptr),
            samples_cache_key(c, std::string(R"({"input_ids": [4, 5, 6, 7]})" "\n"), nullptr,
                              nullptr));
}

TEST(DataHostile, EveryBitFlipInTheCacheIsDetected) {
  fs::path d = temp("flip");
  write(d / "t.jsonl", R"({"input_ids": [1, 2, 3]})" "\n" R"({"input_ids": [7, 8]})" "\n");
  DataStats st;
  prepare_samples(tokens_config(d / "t.jsonl", d / "cache"), nullptr, nullptr, &st);
  std::ifstream in(st.cache_file, std::ios::binary);
  const std::string good((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(good.size(), 24u);
  EXPECT_EQ(parse_samples_cache(good, st.cache_file).size(), 2u);
  int detected = 0, total = 0;
  for (size_t i = 0; i < good.size(); ++i)
    for (int bit = 0; bit < 8; ++bit) {
      std::string bad = good;
      bad[i] = char(bad[i] ^ (1 << bit));
      ++total;
      std::string e = error_of([&] { parse_samples_cache(bad, st.cache_file); });
      if (e.find("delete it") != std::string::npos) ++detected;
    }
  EXPECT_EQ(detected, total);
  // Through the pipeline: a corrupted cache stops the run, naming the file.
  std::string bad = good;
  bad[20] ^= 4;
  write(st.cache_file, bad);
  std::string e = error_of([&] {
    prepare_samples(tokens_config(d / "t.jsonl", d / "cache"), nullptr, nullptr, nullptr);
  });
  EXPECT_HAS(e, st.cache_file.string() + " is corrupt (checksum mismatch)");
}

TEST(DataHostile, UnusedBadChatTemplateDoesNotStopAndUsedOneNamesTheLine) {
  fs::path d = temp("config");
  write(d / "tokenizer_config.json",
        R"({"chat_template": "{{ 1e400 }}\n{% if %}", "eos_token": "</s>"})");
  // Loading does not parse the template: a dataset of tokens never renders it.
  ChatTemplate t = ChatTemplate::from_tokenizer_dir(d);
  std::string e = error_of([&] { t.render(nlohmann::json::array(), false); });
  EXPECT_HAS(e, "tokenizer_config.json chat_template line 2");
  // 1e400 is inf, as in Python, not a std::stod exception.
  EXPECT_EQ(ChatTemplate::from_string("{{ 1e400 }}").render(nlohmann::json::array(), false),
            "inf");
  write(d / "tokenizer_config.json", R"({"chat_template": "x", "eos_token": {"content": 5}})");
  e = error_of([&] { ChatTemplate::from_tokenizer_dir(d); });
  EXPECT_HAS(e, (d / "tokenizer_config.json").string() + ": \"eos_token.content\" must be a string");
}

}  // namespace sf
