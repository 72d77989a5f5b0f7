// Data options of `slideformer train`: a dataset's text records longer than cutoff_len are cut
// into pieces as a .txt file is, or truncated (text_overflow), with the count printed; the chat
// template's keyword options (chat_template_kwargs, enable_thinking) reach every render, so they
// change what is trained on.
#include <gtest/gtest.h>

#include <sstream>

#include "data/pipeline.h"
#include "data/tokenizer.h"
#include "train/config_file.h"
#include "train/options.h"
#include "train/trainer.h"
#include "train_test_util.h"

namespace sf {
namespace {

using namespace sf::testing;

const fs::path kSource = SF_SOURCE_DIR;
const fs::path kGpt2 = kSource / "assets/tokenizers/gpt2";

fs::path gpt2_model(const fs::path& d) {
  TinyModelOptions o;
  o.hidden = 32;
  o.layers = 1;
  o.heads = 2;
  o.kv_heads = 1;
  o.intermediate = 64;
  o.vocab = 50304;
  write_random_model(d / "model", o);
  return d / "model";
}

TEST(TrainData, LongTextRecordsAreChunkedLikeTxtOrTruncated) {
  const fs::path d = fresh_dir("text_overflow");
  std::string longer;
  for (int i = 0; i < 40; ++i) longer += "Alice sat by her sister on the bank. ";
  write_text(d / "t.jsonl", "{\"text\": \"" + longer + "\"}\n{\"text\": \"Short one.\"}\n");
  const Tokenizer tok = Tokenizer::load(kGpt2);
  std::vector<int32_t> whole = tok.encode(longer, true);
  whole.push_back(tok.eos_id());  // a text record ends with EOS
  ASSERT_GT(whole.size(), 100u);

  DataConfig dc;
  dc.file = d / "t.jsonl";
  dc.vocab = 50304;
  dc.encode.cutoff_len = 32;
  dc.encode.text_chunk = true;
  DataStats st;
  std::vector<Sample> s = prepare_samples(dc, &tok, nullptr, &st);
  EXPECT_EQ(st.chunked, 1);
  EXPECT_EQ(st.truncated, 0);
  ASSERT_EQ(st.chunks, int64_t((whole.size() + 31) / 32));
  ASSERT_EQ(s.size(), size_t(st.chunks) + 1);
  std::vector<int32_t> joined;
  for (size_t i = 0; i + 1 < s.size(); ++i) {
    EXPECT_LE(s[i].ids.size(), 32u) << i;
    EXPECT_EQ(s[i].labels, s[i].ids) << i;
    joined.insert(joined.end(), s[i].ids.begin(), s[i].ids.end());
  }
  EXPECT_EQ(joined, whole);  // nothing lost, nothing repeated
  EXPECT_EQ(tok.decode(s.back().ids, true), "Short one.");

  dc.encode.text_chunk = false;
  s = prepare_samples(dc, &tok, nullptr, &st);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(st.truncated, 1);
  EXPECT_EQ(s[0].ids, std::vector<int32_t>(whole.begin(), whole.begin() + 32));
  // The cache keeps the two apart.
  dc.encode.text_chunk = true;
  const uint64_t chunk_key = samples_cache_key(dc, &tok, nullptr);
  dc.encode.text_chunk = false;
  EXPECT_NE(samples_cache_key(dc, &tok, nullptr), chunk_key);

  // Through train: chunk is the default, and the log says what happened.
  TrainConfig c;
  c.model_dir = gpt2_model(d);
  c.tokenizer_dir = kGpt2;
  c.data = d / "t.jsonl";
  c.cutoff_len = 32;
  c.steps = 1;
  c.no_save = true;
  std::ostringstream log;
  run_training(c, log);
  EXPECT_NE(log.str().find(str_cat(": ", st.chunks + 1, " samples, ", whole.size() + 4,
                                   " tokens, 1 text records longer than 32 cut into ", st.chunks,
                                   " samples")),
            std::string::npos)
      << log.str();
  set_train_option(c, "text_overflow", "truncate", "test");
  std::ostringstream tlog;
  run_training(c, tlog);
  EXPECT_NE(tlog.str().find(": 2 samples, 36 tokens, 1 truncated to 32"), std::string::npos)
      << tlog.str();
  EXPECT_NE(error_text([&] {
              set_train_option(c, "text_overflow", "wrap", "test");
            }).find("test: must be one of chunk|truncate, got 'wrap'"),
            std::string::npos);
}

// Qwen3's template: with enable_thinking false the generation prompt ends with an empty
// <think></think> block, so the reply after it alone carries the loss (as LLaMA-Factory trains
// with enable_thinking: false); by default the block is part of the reply.
TEST(TrainData, EnableThinkingReachesTheTemplate) {
  const fs::path qwen3 = kSource / "../shared/data/tokenizers/qwen3";
  if (!fs::exists(qwen3)) GTEST_SKIP() << "skipped: ../shared/data is absent";
  const fs::path d = fresh_dir("enable_thinking");
  write_text(d / "chat.jsonl",
             "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, "
             "{\"role\": \"assistant\", \"content\": \"Hello.\"}]}\n");
  tiny_arch_model(d / "model", "qwen3", 151936);
  TrainConfig c;
  c.model_dir = d / "model";
  c.tokenizer_dir = qwen3;
  c.data = d / "chat.jsonl";
  c.steps = 1;
  c.no_save = true;
  c.show_sample = true;
  std::ostringstream def;
  run_training(c, def);
  EXPECT_NE(def.str().find("<|im_start|>assistant\n«<think>\n\n</think>\n\nHello.<|im_end|>»"),
            std::string::npos)
      << def.str();

  const std::string off = "<|im_start|>assistant\n<think>\n\n</think>\n\n«Hello.<|im_end|>»";
  set_train_option(c, "enable_thinking", "false", "test");
  std::ostringstream a;
  run_training(c, a);
  EXPECT_NE(a.str().find(off), std::string::npos) << a.str();

  // The same through chat_template_kwargs, written as a YAML mapping.
  write_text(d / "run.yaml", "chat_template_kwargs: {enable_thinking: false}\n");
  TrainConfig y = c;
  y.enable_thinking = "auto";
  load_config_file(y, d / "run.yaml");
  EXPECT_EQ(y.chat_template_kwargs, "{\"enable_thinking\":false}");
  std::ostringstream b;
  run_training(y, b);
  EXPECT_NE(b.str().find(off), std::string::npos) << b.str();
  // ... which round-trips through the effective configuration.
  write_text(d / "effective.yaml", config_to_yaml(y));
  TrainConfig back;
  load_config_file(back, d / "effective.yaml");
  EXPECT_EQ(back.chat_template_kwargs, y.chat_template_kwargs);

  y.enable_thinking = "true";
  EXPECT_NE(error_text([&] {
              validate_config(y);
            }).find("enable_thinking and chat_template_kwargs both set enable_thinking"),
            std::string::npos);
  EXPECT_NE(error_text([&] {
              set_train_option(c, "chat_template_kwargs", "[1]", "test");
            }).find("test: expects a JSON object such as {\"enable_thinking\": false}"),
            std::string::npos);
}

}  // namespace
}  // namespace sf
