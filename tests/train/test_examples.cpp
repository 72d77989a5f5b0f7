// The example configurations in tests/train/examples/ (continued pre-training on text, SFT on
// Alpaca, chat SFT on messages with Qwen3's template) load and train: each file is read as it is,
// then only the model (a tiny random one with the tokenizer's vocabulary), the output directory,
// the step count and the sizes are overridden to keep the test short.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "train/config_file.h"
#include "train/options.h"
#include "train/samples.h"
#include "train/trainer.h"
#include "train_test_util.h"

namespace sf {
namespace {

using namespace sf::testing;

const fs::path kSource = SF_SOURCE_DIR;

TrainSummary run_example(const std::string& name, const fs::path& tokenizer, int64_t vocab,
                         std::string* log_out) {
  TrainConfig c;
  load_config_file(c, kSource / "tests/train/examples" / (name + ".yaml"));
  EXPECT_TRUE(c.data.is_relative()) << "examples name their data relative to the repository";
  c.data = kSource / c.data;
  const fs::path d = fresh_dir("example_" + name);
  TinyModelOptions o;
  o.arch = tokenizer.empty() ? "llama" : "qwen2";
  o.hidden = 32;
  o.layers = 1;
  o.heads = 2;
  o.kv_heads = 1;
  o.intermediate = 64;
  o.vocab = vocab;
  write_random_model(d / "model", o);
  set_train_option(c, "model_name_or_path", (d / "model").string(), "test");
  set_train_option(c, "output_dir", (d / "out").string(), "test");
  if (!tokenizer.empty()) c.tokenizer_dir = tokenizer;
  c.steps = 2;
  c.cutoff_len = std::min<int64_t>(c.cutoff_len, 128);
  c.grad_accum = std::min<int64_t>(c.grad_accum, 2);
  c.eval_steps = 0;
  c.save_steps = 1;
  validate_config(c);
  std::ostringstream log;
  const TrainSummary s = run_training(c, log);
  *log_out = log.str();
  EXPECT_TRUE(fs::exists(d / "out" / "model.safetensors")) << log.str();
  EXPECT_TRUE(fs::exists(d / "out" / "checkpoint-2" / "training_state.safetensors"));
  return s;
}

TEST(TrainExamples, ContinuedPretrainingOnText) {
  std::string log;
  const TrainSummary s = run_example("cpt_text", "", 256, &log);
  ASSERT_EQ(s.losses.size(), 2u) << log;
  EXPECT_NEAR(s.losses[0], std::log(256.0), 0.5) << log;  // a random byte-level model
  EXPECT_GT(s.eval_tokens, 0) << log;                      // val_size: 0.02
}

TEST(TrainExamples, SftOnAlpaca) {
  const fs::path tok = kSource / "../shared/data/tokenizers/qwen2.5";
  if (!fs::exists(tok)) GTEST_SKIP() << "skipped: ../shared/data is absent";
  std::string log;
  const TrainSummary s = run_example("sft_alpaca", tok, 151936, &log);
  EXPECT_EQ(s.losses.size(), 2u) << log;
  EXPECT_NE(log.find("val_size 0.1: 1 samples held out for evaluation, 9 for training"),
            std::string::npos) << log;
  // show_sample: the first record through Qwen's template, the response alone carrying the loss.
  EXPECT_NE(log.find("carry the loss, between « and »):\n<|im_start|>system\n"), std::string::npos)
      << log;
  EXPECT_NE(log.find("Translate to French.\nGood morning<|im_end|>\n<|im_start|>assistant\n"
                     "«Bonjour<|im_end|>»"),
            std::string::npos) << log;
}

TEST(TrainExamples, ChatSftWithQwen3Template) {
  const fs::path tok = kSource / "../shared/data/tokenizers/qwen3";
  if (!fs::exists(tok)) GTEST_SKIP() << "skipped: ../shared/data is absent";
  std::string log;
  const TrainSummary s = run_example("chat_qwen3", tok, 151936, &log);
  EXPECT_EQ(s.losses.size(), 2u) << log;
  EXPECT_NE(log.find("data " + (kSource / "tests/train/examples/messages_sample.jsonl").string() +
                     ": 8 samples"),
            std::string::npos) << log;
  EXPECT_NE(log.find("TensorBoard: "), std::string::npos) << log;  // report_to: tensorboard
}

TEST(TrainExamples, RenderWithoutTokenizerShowsIds) {
  Sample s;
  s.ids = {1, 2, 3, 4, 5};
  s.labels = {-100, -100, 3, 4, -100};
  EXPECT_EQ(render_sample(s, nullptr), "1 2« 3 4» 5");
}

}  // namespace
}  // namespace sf
