// `slideformer train` on a conversation dataset with a real Hugging Face tokenizer and its chat
// template: assistant-only loss, packing, and the tokenised cache read back by the second run.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "model/init.h"
#include "train/trainer.h"
#include "train_test_util.h"

namespace sf {
namespace {

namespace fs = std::filesystem;
using testing::tiny_arch_model;

TEST(TrainChat, AlpacaWithQwenTemplatePackingAndCache) {
  const fs::path tok = fs::path(SF_SOURCE_DIR) / "../shared/data/tokenizers/qwen2.5";
  if (!fs::exists(tok)) GTEST_SKIP() << "skipped: ../shared/data is absent";
  const fs::path d = fs::temp_directory_path() / "sf_train_chat";
  fs::remove_all(d);
  tiny_arch_model(d / "model", "qwen2", 151936);
  {
    std::ofstream f(d / "data.jsonl");
    for (int i = 0; i < 12; ++i)
      f << R"({"instruction": "Count to )" << i << R"(.", "output": "Counting: )" << i
        << R"( — done.", "system": "You count."})"
        << "\n";
  }
  TrainConfig c;
  c.model_dir = d / "model";
  c.tokenizer_dir = tok;
  c.data = d / "data.jsonl";
  c.output_dir = d / "out";
  c.steps = 3;
  c.batch_size = 2;
  c.cutoff_len = 64;
  c.packing = true;
  c.lr = 1e-3f;
  std::ostringstream first, second;
  run_training(c, first);
  EXPECT_NE(first.str().find("data "), std::string::npos) << first.str();
  EXPECT_EQ(first.str().find("tokenised cache"), std::string::npos) << first.str();
  EXPECT_NE(first.str().find("step 3/3  loss "), std::string::npos) << first.str();
  // The saved model directory carries the tokenizer it was trained with.
  EXPECT_TRUE(fs::exists(d / "out" / "tokenizer.json"));
  EXPECT_TRUE(fs::exists(d / "out" / "tokenizer_config.json"));
  c.overwrite_output_dir = true;  // the same output again: start afresh, the cache stays
  run_training(c, second);
  EXPECT_NE(second.str().find("from the tokenised cache"), std::string::npos) << second.str();
  // Packing: each step fills 2 rows of 64 tokens with whole samples (~35 tokens each), so it
  // holds 3 samples — more tokens than the 2 samples a step takes without packing.
  const std::string log = first.str();
  const size_t at = log.find("tokens ", log.find("step 1/3"));
  ASSERT_NE(at, std::string::npos);
  const int step_tokens = std::stoi(log.substr(at + 7));
  EXPECT_GT(step_tokens, 90) << log;
  EXPECT_LE(step_tokens, 128) << log;
}

}  // namespace
}  // namespace sf
