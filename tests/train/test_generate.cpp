// `slideformer generate`: greedy decoding takes the argmax of the forward's last row at every
// step (checked against independent Engine::logits calls), sampling follows softmax(logits / T)
// within the top-p nucleus and is reproducible from the seed, an end-of-sequence id stops it.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>

#include "backend/cpu/cpu_backend.h"
#include "data/tokenizer.h"
#include "model/spec.h"
#include "train/checkpoint.h"
#include "train/data.h"
#include "train/generate.h"
#include "train_test_util.h"

namespace sf {
namespace {

using namespace sf::testing;

TEST(Generate, PickToken) {
  const float two[2] = {0.0f, std::log(3.0f)};  // p = 0.25, 0.75
  EXPECT_EQ(pick_token(two, 2, 0, 1, 0.99), 1);
  EXPECT_EQ(pick_token(two, 2, 1, 1, 0.2), 1);   // the most probable first: [0, 0.75)
  EXPECT_EQ(pick_token(two, 2, 1, 1, 0.8), 0);   // then [0.75, 1)
  EXPECT_EQ(pick_token(two, 2, 1, 0.5, 0.99), 1);  // the nucleus holds token 1 alone
  const float flat[3] = {1, 1, 1};
  EXPECT_EQ(pick_token(flat, 3, 0, 1, 0), 0);  // ties: the lowest id
  EXPECT_EQ(pick_token(flat, 3, 1, 1, 0.5), 1);
}

struct Tiny {
  fs::path model;
  ModelSpec spec;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Engine> engine;
};

Tiny tiny(const std::string& name) {
  Tiny t;
  t.model = tiny_model(fresh_dir(name));
  t.spec = load_model_spec(t.model);
  t.backend = make_cpu_backend();
  EngineOptions opt;
  opt.window = 1;
  opt.max_tokens = 64;
  opt.max_sequences = 1;
  t.engine = std::make_unique<Engine>(*t.backend, t.spec, opt);
  load_model_weights(*t.engine, t.model);
  return t;
}

TEST(Generate, GreedyIsTheArgmaxOfEachStepAndEosStops) {
  Tiny t = tiny("generate_greedy");
  const std::vector<int32_t> prompt = {72, 101, 108, 108, 111};
  GenerateOptions o;
  o.max_new_tokens = 8;
  const std::vector<int32_t> out = generate_tokens(*t.engine, prompt, o);
  ASSERT_EQ(out.size(), 8u);
  Sample s;
  s.ids = prompt;
  for (int32_t next : out) {
    s.labels = s.ids;
    const std::vector<float> logits = t.engine->logits(pack_samples({&s}));
    const float* last = logits.data() + (s.ids.size() - 1) * size_t(t.spec.vocab);
    EXPECT_EQ(next, int32_t(std::max_element(last, last + t.spec.vocab) - last));
    s.ids.push_back(next);
  }
  o.eos_ids = {out[2]};
  const std::vector<int32_t> stopped = generate_tokens(*t.engine, prompt, o);
  const size_t first = size_t(std::find(out.begin(), out.end(), out[2]) - out.begin());
  EXPECT_EQ(stopped, std::vector<int32_t>(out.begin(), out.begin() + long(first) + 1));
}

TEST(Generate, SamplingIsSeeded) {
  Tiny t = tiny("generate_sample");
  GenerateOptions o;
  o.max_new_tokens = 12;
  o.temperature = 1.5;
  o.top_p = 0.95;
  o.seed = 11;
  const auto a = generate_tokens(*t.engine, {1, 2, 3}, o);
  const auto b = generate_tokens(*t.engine, {1, 2, 3}, o);
  o.seed = 12;
  const auto c = generate_tokens(*t.engine, {1, 2, 3}, o);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  o.top_p = 0;
  EXPECT_NE(error_text([&] { generate_tokens(*t.engine, {1}, o); }).find("--top-p"),
            std::string::npos);
}

std::string run(const std::string& args, int* code) {
  FILE* p = popen((std::string(SF_BINARY) + " " + args + " 2>&1").c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  for (size_t n; (n = fread(buf.data(), 1, buf.size(), p)) > 0;) out.append(buf.data(), n);
  const int status = pclose(p);
  *code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

TEST(Generate, ThroughTheBinaryWithAChatTemplate) {
  const fs::path tok = fs::path(SF_SOURCE_DIR) / "../shared/data/tokenizers/qwen2.5";
  if (!fs::exists(tok)) GTEST_SKIP() << "skipped: ../shared/data is absent";
  const fs::path d = fresh_dir("generate_chat");
  TinyModelOptions o;
  o.arch = "qwen2";
  o.hidden = 32;
  o.layers = 1;
  o.heads = 2;
  o.kv_heads = 1;
  o.intermediate = 64;
  o.vocab = 151936;
  write_random_model(d / "model", o);
  int code = 0;
  const std::string args = "generate --model " + (d / "model").string() + " --tokenizer " +
                           tok.string() + " --chat --prompt Hi --max-new-tokens 3 --print-ids";
  const std::string out = run(args, &code);
  ASSERT_EQ(code, 0) << out;
  const auto j = nlohmann::json::parse(out);
  const Tokenizer t = Tokenizer::load(tok);
  const auto prompt = j["prompt_ids"].get<std::vector<int32_t>>();
  // ... <|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n
  EXPECT_NE(t.decode(prompt).find("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"),
            std::string::npos) << t.decode(prompt);
  EXPECT_EQ(j["new_ids"].size(), 3u);
  EXPECT_EQ(run(args, &code), out);  // greedy: the same every time
}

}  // namespace
}  // namespace sf
