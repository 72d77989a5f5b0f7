// The dataset pipeline: formats into records, conversations into ids with loss masks that cover
// exactly each assistant turn's content and end-of-turn token, truncation, packing, and the
// tokenised cache.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "data/dataset.h"
#include "data/encode.h"
#include "data/pipeline.h"
#include "train/data.h"

namespace sf {
namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

fs::path temp(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("sf_pipeline_" + name);
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

fs::path tokenizer_dir(const std::string& name) {
  return fs::path(SF_SOURCE_DIR) / "../shared/data/tokenizers" / name;
}

TEST(Dataset, FormatsBecomeConversations) {
  fs::path d = temp("formats");
  write(d / "alpaca.jsonl",
        R"({"instruction": "Add", "input": "2+2", "output": "4", "system": "Be brief.",)"
        R"( "history": [["Hi", "Hello"]]})" "\n");
  auto r = read_dataset(d / "alpaca.jsonl", {});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].messages.dump(),
            R"([{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"},)"
            R"({"role":"assistant","content":"Hello"},{"role":"user","content":"Add\n2+2"},)"
            R"({"role":"assistant","content":"4"}])");
  write(d / "sharegpt.json",
        R"([{"conversations": [{"from": "human", "value": "Q"}, {"from": "gpt", "value": "A"}]}])");
  r = read_dataset(d / "sharegpt.json", {});
  EXPECT_EQ(r[0].messages.dump(),
            R"([{"role":"user","content":"Q"},{"role":"assistant","content":"A"}])");
  EXPECT_EQ(r[0].line, 1);
  // ShareGPT files written with OpenAI's role/content keys.
  write(d / "sharegpt_rc.jsonl",
        R"({"conversations": [{"role": "user", "content": "Q"}, {"role": "assistant", )"
        R"("content": "A"}]})" "\n");
  r = read_dataset(d / "sharegpt_rc.jsonl", {});
  EXPECT_EQ(r[0].messages.dump(),
            R"([{"role":"user","content":"Q"},{"role":"assistant","content":"A"}])");
  write(d / "remap.jsonl", R"({"prompt": "Q", "response": "A"})" "\n");
  DatasetReadOptions opt;
  opt.format = DatasetFormat::kAlpaca;
  opt.columns.set("instruction=prompt");
  opt.columns.set("output=response");
  r = read_dataset(d / "remap.jsonl", opt);
  EXPECT_EQ(r[0].messages.size(), 2u);
  write(d / "msgs.jsonl", R"({"messages": [{"role": "user", "content": "x", "name": "n"}]})" "\n");
  r = read_dataset(d / "msgs.jsonl", {});
  EXPECT_EQ(r[0].messages[0]["name"], "n");  // extra keys reach the template
  write(d / "text.jsonl", R"({"text": "plain"})" "\n");
  EXPECT_EQ(read_dataset(d / "text.jsonl", {})[0].text, "plain");
}

TEST(Dataset, MalformedRecordsNameFileAndLine) {
  fs::path d = temp("malformed");
  write(d / "a.jsonl", R"({"instruction": "x", "output": "y"})" "\n\n"
                       R"({"instruction": "x"})" "\n"
                       "not json\n");
  std::string e = error_of([&] { read_dataset(d / "a.jsonl", {}); });
  EXPECT_NE(e.find("a.jsonl:3: missing \"output\""), std::string::npos) << e;
  DatasetReadOptions skip;
  skip.skip_malformed = true;
  DatasetStats st;
  auto r = read_dataset(d / "a.jsonl", skip, &st);
  EXPECT_EQ(r.size(), 1u);
  EXPECT_EQ(st.skipped, 2);
  write(d / "b.jsonl", R"({"conversations": [{"from": "robot", "value": "x"}]})" "\n");
  e = error_of([&] { read_dataset(d / "b.jsonl", {}); });
  EXPECT_NE(e.find("b.jsonl:1: turn 0: unknown speaker \"robot\""), std::string::npos) << e;
  write(d / "roles.jsonl", R"({"messages": [{"role": "user", "content": "x"}]})" "\n"
                           R"({"messages": [{"role": "user", "content": "x"}, )"
                           R"({"role": "robot", "content": "y"}]})" "\n");
  e = error_of([&] { read_dataset(d / "roles.jsonl", {}); });
  EXPECT_NE(e.find("roles.jsonl:2: message 1: unknown role \"robot\" (use system, user, "
                   "assistant or tool)"),
            std::string::npos)
      << e;
  write(d / "sharegpt_role.jsonl",
        R"({"conversations": [{"role": "robot", "content": "x"}]})" "\n");
  e = error_of([&] { read_dataset(d / "sharegpt_role.jsonl", {}); });
  EXPECT_NE(e.find("sharegpt_role.jsonl:1: turn 0: unknown speaker \"robot\""), std::string::npos)
      << e;
  // Empty conversations, in both formats.
  write(d / "empty.jsonl", R"({"messages": []})" "\n");
  e = error_of([&] { read_dataset(d / "empty.jsonl", {}); });
  EXPECT_NE(e.find("empty.jsonl:1: \"messages\" must be a non-empty list"), std::string::npos)
      << e;
  write(d / "empty2.jsonl", R"({"conversations": []})" "\n");
  e = error_of([&] { read_dataset(d / "empty2.jsonl", {}); });
  EXPECT_NE(e.find("empty2.jsonl:1: \"conversations\" must be a non-empty list"),
            std::string::npos)
      << e;
  // A syntax error: file, line and column in words, no JSON-library tag.
  write(d / "syntax.jsonl", R"({"text": "a"})" "\n" R"({"text": "b",})" "\n");
  e = error_of([&] { read_dataset(d / "syntax.jsonl", {}); });
  EXPECT_NE(e.find("syntax.jsonl:2: not valid JSON (at column 14: syntax error"), std::string::npos)
      << e;
  EXPECT_EQ(e.find("json.exception"), std::string::npos) << e;
  write(d / "c.jsonl", R"({"foo": 1})" "\n");
  e = error_of([&] { read_dataset(d / "c.jsonl", {}); });
  EXPECT_NE(e.find("cannot tell the format"), std::string::npos) << e;
  EXPECT_NE(error_of([] { Columns c; c.set("nope=x"); }).find("unknown column key"),
            std::string::npos);
}

// The masked tokens of each assistant turn decode to exactly its content and end-of-turn token.
void check_masks(const std::string& tok_name, const std::string& eot, const ojson& messages,
                 const std::vector<std::string>& expect) {
  if (!fs::exists(tokenizer_dir(tok_name))) GTEST_SKIP() << "skipped: ../shared/data is absent";
  Tokenizer tok = Tokenizer::load(tokenizer_dir(tok_name));
  ChatTemplate chat = ChatTemplate::from_tokenizer_dir(tokenizer_dir(tok_name));
  Record r;
  r.kind = Record::Kind::kChat;
  r.messages = messages;
  EncodeOptions opt;
  opt.cutoff_len = 100000;
  Sample s = encode_record(r, &tok, &chat, opt);
  std::vector<TokenSpan> spans = assistant_spans(messages, s.ids, tok, chat);
  ASSERT_EQ(spans.size(), expect.size());
  for (size_t i = 0; i < spans.size(); ++i) {
    std::vector<int32_t> span(s.ids.begin() + spans[i].begin, s.ids.begin() + spans[i].end);
    EXPECT_EQ(tok.decode(span), expect[i] + eot) << tok_name << " turn " << i;
  }
  // labels are -100 outside the spans and the ids inside
  size_t masked = 0;
  for (size_t t = 0; t < s.ids.size(); ++t) {
    bool inside = false;
    for (auto& sp : spans) inside |= int64_t(t) >= sp.begin && int64_t(t) < sp.end;
    EXPECT_EQ(s.labels[t], inside ? s.ids[t] : -100);
    masked += inside;
  }
  EXPECT_GT(masked, 0u);
  // last-turn-only and truncation keep the mask aligned with the ids
  opt.mask = LossMask::kLastAssistant;
  Sample last = encode_record(r, &tok, &chat, opt);
  for (size_t t = 0; t < last.ids.size(); ++t)
    EXPECT_EQ(last.labels[t], int64_t(t) >= spans.back().begin && int64_t(t) < spans.back().end
                                  ? last.ids[t] : -100);
  opt.mask = LossMask::kAssistant;
  opt.cutoff_len = spans.front().begin + 2;
  bool truncated = false;
  Sample cut = encode_record(r, &tok, &chat, opt, &truncated);
  EXPECT_TRUE(truncated);
  ASSERT_EQ(cut.ids.size(), size_t(opt.cutoff_len));
  for (size_t t = 0; t < cut.ids.size(); ++t) EXPECT_EQ(cut.labels[t], s.labels[t]);
}

ojson conversation() {
  return ojson::parse(R"([
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Name a colour. <|im_end|> <|eot_id|>"},
    {"role": "assistant", "content": "Blue."},
    {"role": "user", "content": "Another, in Japanese?"},
    {"role": "assistant", "content": "赤 (aka) — red."}])");
}

TEST(LossMask, Llama3CoversContentAndEotId) {
  check_masks("llama3", "<|eot_id|>", conversation(), {"Blue.", "赤 (aka) — red."});
}

TEST(LossMask, Qwen25CoversContentAndImEnd) {
  check_masks("qwen2.5", "<|im_end|>", conversation(), {"Blue.", "赤 (aka) — red."});
}

TEST(LossMask, Qwen3FindsTurnsWhoseReasoningTheTemplateDrops) {
  ojson m = conversation();
  m[2]["reasoning_content"] = "The user wants a colour.";
  m[4]["reasoning_content"] = "Translate.";
  // Qwen3 keeps <think> only after the last user query: the last turn's span includes it.
  check_masks("qwen3", "<|im_end|>", m,
              {"Blue.", "<think>\nTranslate.\n</think>\n\n赤 (aka) — red."});
}

TEST(Packing, StepsFillTheTokenBudgetWithoutCrossingSamples) {
  std::vector<Sample> s;
  for (int len : {5, 3, 4, 6, 2, 7}) {
    Sample x;
    for (int i = 0; i < len; ++i) x.ids.push_back(len * 10 + i);
    x.labels = x.ids;
    s.push_back(x);
  }
  Batcher b(s, /*batch_size=*/1, /*shuffle=*/false, 0, /*token_budget=*/10);
  Batch first = b.next();  // 5 + 3 fit, 4 does not
  EXPECT_EQ(first.cu_seqlens, (std::vector<int32_t>{0, 5, 8}));
  EXPECT_EQ(first.positions, (std::vector<int32_t>{0, 1, 2, 3, 4, 0, 1, 2}));
  EXPECT_EQ(first.targets[4], -100);  // no target across the sample boundary
  Batch second = b.next();  // 4 + 6
  EXPECT_EQ(second.cu_seqlens, (std::vector<int32_t>{0, 4, 10}));
  Batch third = b.next();  // 2 + 7
  EXPECT_EQ(third.tokens(), 9);
  EXPECT_LE(b.max_tokens(), 10);
}

TEST(Cache, SecondRunReadsTheTokenisedCache) {
  fs::path d = temp("cache");
  write(d / "t.jsonl", "{\"input_ids\": [1, 2, 3], \"labels\": [-100, 2, 3]}\n"
                       "{\"input_ids\": [4, 5]}\n");
  DataConfig cfg;
  cfg.file = d / "t.jsonl";
  cfg.vocab = 10;
  cfg.cache_dir = d / "cache";
  DataStats a, b;
  auto first = prepare_samples(cfg, nullptr, nullptr, &a);
  EXPECT_FALSE(a.from_cache);
  ASSERT_TRUE(fs::exists(a.cache_file));
  auto second = prepare_samples(cfg, nullptr, nullptr, &b);
  EXPECT_TRUE(b.from_cache);
  ASSERT_EQ(second.size(), first.size());
  for (size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(second[i].ids, first[i].ids);
    EXPECT_EQ(second[i].labels, first[i].labels);
  }
  // Other options (or data) are another key.
  cfg.encode.cutoff_len = 2;
  DataStats c;
  prepare_samples(cfg, nullptr, nullptr, &c);
  EXPECT_FALSE(c.from_cache);
  EXPECT_NE(c.cache_file, a.cache_file);
  // A corrupt cache is an error that names it.
  write(a.cache_file, "SFTOKS01garbage");
  cfg.encode.cutoff_len = 2048;
  std::string e = error_of([&] { prepare_samples(cfg, nullptr, nullptr, nullptr); });
  EXPECT_NE(e.find(a.cache_file.filename().string()), std::string::npos) << e;
  EXPECT_NE(e.find("delete it"), std::string::npos) << e;
}

}  // namespace
}  // namespace sf
