// Loss masks of long conversations (issue 14): the prefix tokenisation is incremental (added
// tokens cut the text), --loss-mask last computes one span, and the spans are those of the
// reference method (every prefix encoded from the start).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "core/error.h"
#include "data/encode.h"

namespace sf {
namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

fs::path tokenizer_dir(const std::string& name) {
  return fs::path(SF_SOURCE_DIR) / "../shared/data/tokenizers" / name;
}

ojson conversation(int n) {
  ojson m = ojson::array();
  for (int i = 0; i < n; ++i)
    m.push_back({{"role", i % 2 ? "assistant" : "user"},
                 {"content", "message " + std::to_string(i) + " with  some words\n\nin it."}});
  return m;
}

// The reference: each span boundary found by encoding the prefix from the start.
int64_t reference_prefix(const std::string& full, size_t chars, const Tokenizer& tok) {
  return int64_t(tok.encode(std::string_view(full).substr(0, chars), false).size());
}

}  // namespace

TEST(LossMaskScaling, SpansEqualTheReferenceAndLastComputesOnlyTheLast) {
  for (const char* name : {"qwen2.5", "llama3"}) {
    if (!fs::exists(tokenizer_dir(name) / "tokenizer.json")) GTEST_SKIP() << "no ../shared/data";
    const Tokenizer tok = Tokenizer::load(tokenizer_dir(name));
    const ChatTemplate chat = ChatTemplate::from_tokenizer_dir(tokenizer_dir(name));
    const ojson m = conversation(40);
    const std::string full = chat.render(m, false, ojson::object());
    const std::vector<int32_t> ids = tok.encode(full, false);
    const auto spans = assistant_spans(m, ids, tok, chat);
    ASSERT_EQ(spans.size(), 20u) << name;
    // Every boundary is a reference prefix length: decode(ids[0:b]) re-encodes to b tokens.
    for (const TokenSpan& s : spans) {
      const std::string before = tok.decode(std::vector<int32_t>(ids.begin(), ids.begin() + s.begin));
      EXPECT_EQ(reference_prefix(full, before.size(), tok), s.begin) << name;
      EXPECT_TRUE(tok.is_special(ids[size_t(s.end - 1)])) << name << ": ends at end-of-turn";
    }
    const auto last = assistant_spans(m, ids, tok, chat, true);
    ASSERT_EQ(last.size(), 1u);
    EXPECT_EQ(last[0].begin, spans.back().begin);
    EXPECT_EQ(last[0].end, spans.back().end);
  }
}

TEST(LossMaskScaling, LongConversationIsFast) {
  if (!fs::exists(tokenizer_dir("qwen2.5") / "tokenizer.json")) GTEST_SKIP() << "no ../shared/data";
  const Tokenizer tok = Tokenizer::load(tokenizer_dir("qwen2.5"));
  const ChatTemplate chat = ChatTemplate::from_tokenizer_dir(tokenizer_dir("qwen2.5"));
  Record r;
  r.kind = Record::Kind::kChat;
  r.messages = conversation(1600);
  EncodeOptions o;
  o.cutoff_len = int64_t(1) << 30;
  o.mask = LossMask::kLastAssistant;
  auto t0 = std::chrono::steady_clock::now();
  Sample last = encode_record(r, &tok, &chat, o);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5)) << "--loss-mask last";
  o.mask = LossMask::kAssistant;
  t0 = std::chrono::steady_clock::now();
  Sample all = encode_record(r, &tok, &chat, o);
  // Renders stay one per prefix (O(n^2) in all, ~5 s here); tokenisation is now linear. Was > 60 s.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(60)) << "--loss-mask assistant";
  int64_t n_last = 0, n_all = 0;
  for (int32_t l : last.labels) n_last += l != -100;
  for (int32_t l : all.labels) n_all += l != -100;
  EXPECT_GT(n_last, 0);
  EXPECT_GT(n_all, 100 * n_last);
}

// GPT-2's tokenizer with the ChatML template: no added token cuts the text (<|im_end|> is plain
// text to it), so prefixes continue from verified boundaries, and encoding from the start is the
// fallback. The spans still equal the reference; 1600 messages stay fast; a conversation whose
// prefix renders alone pass the work limit is refused quickly, naming the turn and the limit.
// (Contents end in a letter: GPT-2 merges "." with the "<|" that follows into one pre-token, and
// then no token boundary ends the turn, for the reference too.)
TEST(LossMaskScaling, ConversationWithoutCuttingTokensIsBounded) {
  auto conversation = [](int n) {
    ojson m = ojson::array();
    for (int i = 0; i < n; ++i)
      m.push_back({{"role", i % 2 ? "assistant" : "user"},
                   {"content", "message " + std::to_string(i) + " with  some words\n\nin it"}});
    return m;
  };
  if (!fs::exists(tokenizer_dir("gpt2") / "tokenizer.json")) GTEST_SKIP() << "no ../shared/data";
  const Tokenizer tok = Tokenizer::load(tokenizer_dir("gpt2"));
  const ChatTemplate chat = ChatTemplate::builtin("chatml");
  {
    const ojson m = conversation(40);
    const std::string full = chat.render(m, false, ojson::object());
    const std::vector<int32_t> ids = tok.encode(full, false);
    const auto spans = assistant_spans(m, ids, tok, chat);
    ASSERT_EQ(spans.size(), 20u);
    for (const TokenSpan& sp : spans) {
      const std::string before =
          tok.decode(std::vector<int32_t>(ids.begin(), ids.begin() + sp.begin));
      EXPECT_EQ(reference_prefix(full, before.size(), tok), sp.begin);
    }
  }
  Record r;
  r.kind = Record::Kind::kChat;
  r.messages = conversation(1600);
  EncodeOptions o;
  o.cutoff_len = int64_t(1) << 30;
  auto t0 = std::chrono::steady_clock::now();
  const Sample s = encode_record(r, &tok, &chat, o);
  // ~5 s on an idle 2-core machine (renders stay one per prefix: O(n²)); was O(n²) encodes too.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(60)) << "1600 messages";
  int64_t trained = 0;
  for (int32_t l : s.labels) trained += l != -100;
  EXPECT_GT(trained, 800 * 5);  // 800 assistant turns of several tokens each

  r.messages = conversation(8000);
  t0 = std::chrono::steady_clock::now();
  std::string e;
  try {
    encode_record(r, &tok, &chat, o);
  } catch (const Error& err) {
    e = err.what();
  }
  // Refused from the estimate, before any prefix is rendered: one render and one encode.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10)) << "8000 messages";
  EXPECT_NE(e.find("finding the loss mask of this conversation (8000 messages, 4000 assistant "
                   "turns"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("bytes of prefix renders, more than 268435456"), std::string::npos) << e;
  EXPECT_NE(e.find("kMaxLossMaskWorkBytes"), std::string::npos) << e;
  EXPECT_NE(e.find("use --loss-mask last"), std::string::npos) << e;
  o.mask = LossMask::kLastAssistant;  // the remedy named: one turn
  t0 = std::chrono::steady_clock::now();
  EXPECT_NO_THROW(encode_record(r, &tok, &chat, o));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20)) << "last of 8000";
}

}  // namespace sf
