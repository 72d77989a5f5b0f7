// The command line: usage, unknown options and bad values give one clear line and a non-zero
// exit; a tiny end-to-end run through the real binary prints every step's loss.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/host_memory.h"
#include "train_test_util.h"

namespace {

using Result = sf::testing::CommandResult;
Result run(const std::string& args) { return sf::testing::run_slideformer(args); }

TEST(Cli, UsageAndErrors) {
  Result r = run("");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("usage: slideformer"), std::string::npos);
  r = run("fly");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("unknown command 'fly'"), std::string::npos);
  r = run("train --model x --data y --stepz 3");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("unknown option --stepz"), std::string::npos) << r.out;
  r = run("train --model x --data y --steps three");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("--steps: expects an integer"), std::string::npos) << r.out;
  r = run("train --data y");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("model_name_or_path is required: give --model DIR"), std::string::npos)
      << r.out;
}

TEST(Cli, TokenizeChatUsesTheTemplateAndStopsOnItsErrors) {
  namespace fs = std::filesystem;
  const fs::path tok = fs::path(SF_SOURCE_DIR) / "../shared/data/tokenizers/mistral";
  if (!fs::exists(tok)) GTEST_SKIP() << "skipped: ../shared/data is absent";
  const fs::path tmpl = fs::path(SF_SOURCE_DIR) / "tests/data/chat/mistral_inst.jinja";
  const fs::path in = fs::temp_directory_path() / "sf_cli_chat.jsonl";
  {
    std::FILE* f = std::fopen(in.c_str(), "w");
    std::fputs("{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}]}\n", f);
    std::fputs(
        "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}, "
        "{\"role\": \"user\", \"content\": \"b\"}]}\n",
        f);
    std::fclose(f);
  }
  Result r = run("tokenize --tokenizer " + tok.string() + " --chat --chat-template " +
                 tmpl.string() + " < " + in.string());
  EXPECT_EQ(r.code, 1);
  // line 1: <s> [INST] Hi [/INST] — BOS written by the template, not added again
  EXPECT_EQ(r.out.rfind("{\"ids\":[1,", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("stdin line 2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Conversation roles must alternate"), std::string::npos) << r.out;
  r = run("tokenize --tokenizer " +
          (fs::path(SF_SOURCE_DIR) / "../shared/data/tokenizers/gpt2").string() + " --chat < " +
          in.string());
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("--chat-template llama3|llama2|chatml"), std::string::npos) << r.out;
}

TEST(Cli, InitModelThenTrain) {
  namespace fs = std::filesystem;
  fs::path d = fs::temp_directory_path() / "sf_cli_e2e";
  fs::remove_all(d);
  Result r = run("init-model --out " + (d / "m").string() +
                 " --hidden 32 --layers 2 --heads 2 --kv-heads 1 --intermediate 64");
  ASSERT_EQ(r.code, 0) << r.out;
  const fs::path text = fs::path(SF_SOURCE_DIR) / "assets/data/carroll-alice.txt";
  r = run("train --model " + (d / "m").string() + " --data " + text.string() +
          " --steps 3 --batch-size 2 --cutoff-len 32 --lr 1e-3 --output " + (d / "o").string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("step 1/3  loss "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("step 3/3  loss "), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(d / "o" / "model.safetensors"));
}

// --trace into a directory that does not exist yet: created; into one that cannot be (its parent
// is a file): refused before the first step, naming the option, not after the last one.
TEST(Cli, TraceDirectoryIsMadeOrRefusedBeforeTraining) {
  namespace fs = std::filesystem;
  fs::path d = fs::temp_directory_path() / "sf_cli_trace";
  fs::remove_all(d);
  Result r = run("init-model --out " + (d / "m").string() +
                 " --hidden 32 --layers 2 --heads 2 --kv-heads 1 --intermediate 64");
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string train = "train --model " + (d / "m").string() + " --data " +
                            (fs::path(SF_SOURCE_DIR) / "assets/data/carroll-alice.txt").string() +
                            " --steps 2 --batch-size 2 --cutoff-len 32 --lr 1e-3 --no-save";
  const fs::path trace = d / "new" / "sub" / "t.json";
  r = run(train + " --trace " + trace.string());
  ASSERT_EQ(r.code, 0) << r.out;
  std::ifstream in(trace);
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_FALSE(j.at("traceEvents").empty());
  EXPECT_FALSE(fs::exists(trace.string() + ".tmp"));
  std::ofstream(d / "afile") << "x";
  r = run(train + " --trace " + (d / "afile" / "t.json").string());
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("trace " + (d / "afile" / "t.json").string()), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("step 1/2"), std::string::npos) << r.out;
}

// init-model --tokenizer: the tokenizer's vocabulary padded to a multiple of 64, its BOS/EOS in
// config.json, its files beside the weights; trained on text, the result decodes to text.
TEST(Cli, InitModelWithATokenizerTrainsAndGeneratesText) {
  namespace fs = std::filesystem;
  const fs::path tok = fs::path(SF_SOURCE_DIR) / "assets/tokenizers/gpt2";
  fs::path d = fs::temp_directory_path() / "sf_cli_gpt2";
  fs::remove_all(d);
  Result r = run("init-model --out " + (d / "m").string() + " --tokenizer " + tok.string() +
                 " --hidden 32 --layers 1 --heads 2 --kv-heads 1 --intermediate 64");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("vocabulary 50304 for the 50257 ids"), std::string::npos) << r.out;
  const auto cfg = nlohmann::json::parse(sf::testing::read_text(d / "m" / "config.json"));
  EXPECT_EQ(cfg["vocab_size"], 50304);
  EXPECT_EQ(cfg["bos_token_id"], 50256);  // <|endoftext|>
  EXPECT_EQ(cfg["eos_token_id"], 50256);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    EXPECT_EQ(sf::testing::read_text(d / "m" / f), sf::testing::read_text(tok / f)) << f;
  r = run("init-model --out " + (d / "small").string() + " --tokenizer " + tok.string() +
          " --vocab 50000");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("--vocab 50000 is smaller than the 50257 ids of the tokenizer"),
            std::string::npos)
      << r.out;

  const fs::path text = fs::path(SF_SOURCE_DIR) / "assets/data/carroll-alice.txt";
  r = run("train --model " + (d / "m").string() + " --data " + text.string() +
          " --steps 2 --batch-size 2 --cutoff-len 16 --lr 1e-3 --output " + (d / "o").string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.find("byte-level stand-in"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(d / "o" / "tokenizer.json"));
  r = run("generate --model " + (d / "o").string() +
          " --prompt \"Alice was\" --max-new-tokens 4 --backend cpu --print-ids");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out.substr(r.out.rfind("{\"prompt_ids\"")));
  // "Alice was" is 2 GPT-2 tokens ("Alice", " was" = 373), not 9 bytes.
  ASSERT_EQ(j["prompt_ids"].size(), 2u) << r.out;
  EXPECT_EQ(j["prompt_ids"][1], 373) << r.out;
  EXPECT_EQ(j["new_ids"].size(), 4u);
}

// init-model holds the whole model in fp32: one far larger than the memory available (Llama-3.1-
// 405B's shapes, ~1.5 TB) is refused with both figures, and nothing is written.
TEST(Cli, InitModelLargerThanMemoryIsRefused) {
  namespace fs = std::filesystem;
  const auto avail = sf::host_memory_available();
  if (!avail) GTEST_SKIP() << "skipped: no /proc/meminfo or cgroup figure here";
  if (avail->bytes > (uint64_t(1) << 40)) GTEST_SKIP() << "skipped: over 1 TiB available here";
  fs::path d = fs::temp_directory_path() / "sf_cli_huge";
  fs::remove_all(d);
  Result r = run("init-model --out " + d.string() +
                 " --hidden 16384 --layers 126 --heads 128 --kv-heads 8 --intermediate 53248"
                 " --vocab 128256");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("in memory (fp32) and"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("makes small test models"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(d));
}

}  // namespace
