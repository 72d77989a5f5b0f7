// sf::Tokenizer on the real Hugging Face files in ../shared/data (skipped when absent): ids equal
// to HF tokenizers 0.23's for a mixed string, whole-book encoding through the parallel path, and
// encode_batch equal to encode.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "data/tokenizer.h"

namespace sf {
namespace {

using Ids = std::vector<int32_t>;
const std::filesystem::path kData = std::filesystem::path(SF_SOURCE_DIR) / ".." / "shared" / "data";

struct Expected {
  const char* name;
  Ids hello;             // encode(kHello, add_special_tokens=true)
  size_t moby_tokens;    // encode(moby dick, false).size()
  int64_t moby_sum_mod;  // sum(ids) % 1000003
};

const char* kHello = "Hello world! It's 2024:  naïve café 日本語 🙂\n";

const std::vector<Expected>& expected() {
  static const std::vector<Expected> e = {
      {"gpt2",
       {15496, 995, 0, 632, 338, 48609, 25, 220, 41492, 40304, 10545, 245, 98, 17312, 105, 45739,
        252, 32485, 198},
       345550,
       679412},
      {"llama3",
       {9906, 1917, 0, 1102, 596, 220, 2366, 19, 25, 220, 95980, 588, 53050, 105180, 102158, 28584,
        198},
       313114,
       464130},
      {"mistral",
       {1,     22557, 1526,  28808, 661,   28742, 28713, 28705, 28750, 28734, 28750, 28781, 28747,
        28705, 1879,  28920, 333,   28345, 28705, 29142, 29119, 30321, 28705, 29340, 13},
       366959,
       710739},
      {"qwen2.5",
       {9707, 1879, 0,     1084, 594,   220,   17,    15,     17,    19,
        25,   220,  94880, 586,  51950, 75402, 21894, 102819, 27484, 198},
       313594,
       132429},
      {"qwen3",
       {9707, 1879, 0,     1084, 594,   220,   17,    15,     17,    19,
        25,   220,  94880, 586,  51950, 75402, 21894, 102819, 27484, 198},
       313594,
       132429},
  };
  return e;
}

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class SharedTokenizer : public ::testing::TestWithParam<size_t> {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kData / "tokenizers")) {
      GTEST_SKIP() << "skipped: ../shared/data is absent";
    }
  }
};

TEST_P(SharedTokenizer, MatchesHuggingFace) {
  const Expected& e = expected()[GetParam()];
  Tokenizer t = Tokenizer::load(kData / "tokenizers" / e.name);
  EXPECT_EQ(t.encode(kHello, true), e.hello);
  EXPECT_EQ(t.decode(t.encode(kHello, false)), kHello);

  std::string book = read(kData / "text" / "melville-moby_dick.txt");
  Ids ids = t.encode(book, false);  // long text: the parallel path
  EXPECT_EQ(ids.size(), e.moby_tokens);
  int64_t sum = std::accumulate(ids.begin(), ids.end(), int64_t(0)) % 1000003;
  EXPECT_EQ(sum, e.moby_sum_mod);

  std::vector<std::string> lines;
  std::istringstream in(book);
  for (std::string l; std::getline(in, l) && lines.size() < 3000;) lines.push_back(l);
  auto batch = t.encode_batch(lines, true);
  ASSERT_EQ(batch.size(), lines.size());
  for (size_t i = 0; i < lines.size(); ++i) ASSERT_EQ(batch[i], t.encode(lines[i], true)) << i;

  // const methods from several threads at once (thread-local caches, shared tables).
  std::vector<std::thread> threads;
  std::vector<int> bad(4, 0);
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      for (size_t i = size_t(k); i < lines.size(); i += 2)
        if (t.encode(lines[i], true) != batch[i]) ++bad[size_t(k)];
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad, std::vector<int>(4, 0));
}

INSTANTIATE_TEST_SUITE_P(Files, SharedTokenizer, ::testing::Range<size_t>(0, 5),
                         [](const auto& info) {
                           std::string n = expected()[info.param].name;
                           for (char& c : n)
                             if (c == '.') c = '_';
                           return n;
                         });

TEST(SharedTokenizerMeta, BosEosFromConfig) {
  if (!std::filesystem::exists(kData / "tokenizers")) {
    GTEST_SKIP() << "skipped: ../shared/data is absent";
  }
  Tokenizer m = Tokenizer::load(kData / "tokenizers" / "mistral");
  EXPECT_EQ(m.bos_id(), 1);
  EXPECT_EQ(m.eos_id(), 2);
  EXPECT_EQ(m.vocab_size(), 32000);
  Tokenizer q = Tokenizer::load(kData / "tokenizers" / "qwen3");
  EXPECT_EQ(q.bos_id(), -1);
  EXPECT_EQ(q.eos_token(), "<|im_end|>");
  EXPECT_EQ(q.eos_id(), 151645);
  EXPECT_EQ(q.encode("hi", true), q.encode("hi", false));
  Tokenizer l = Tokenizer::load(kData / "tokenizers" / "llama3");
  EXPECT_EQ(l.bos_id(), 128000);
  EXPECT_EQ(l.vocab_size(), 128256);
}

}  // namespace
}  // namespace sf
