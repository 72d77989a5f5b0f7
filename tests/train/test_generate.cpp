// `slideformer generate` and its KV-cache decoder (engine/decode.h) on the CPU backend: the
// decoder's logits equal the full forward's (Engine::logits over the whole sequence) token by
// token, in one-token steps, in prefill chunks and with the layers streaming through a ring;
// greedy decoding is the argmax chain of the full forward and stops at an end-of-sequence id;
// sampling follows softmax(logits / T) within the top-p nucleus and is reproducible from the
// seed; bad requests are refused naming what and what to do.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "data/tokenizer.h"
#include "engine/engine.h"
#include "io/safetensors.h"
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
  EXPECT_EQ(pick_token(two, 2, 1, 1, 0.2), 1);     // the most probable first: [0, 0.75)
  EXPECT_EQ(pick_token(two, 2, 1, 1, 0.8), 0);     // then [0.75, 1)
  EXPECT_EQ(pick_token(two, 2, 1, 0.5, 0.99), 1);  // the nucleus holds token 1 alone
  const float flat[3] = {1, 1, 1};
  EXPECT_EQ(pick_token(flat, 3, 0, 1, 0), 0);  // ties: the lowest id
  EXPECT_EQ(pick_token(flat, 3, 1, 1, 0.5), 1);
}

// A random model whose logits are far from flat (init_std 0.2), so argmaxes are not near ties.
fs::path random_model(const fs::path& dir, const std::string& arch, int64_t vocab = 97) {
  TinyModelOptions o;
  o.arch = arch;
  o.hidden = 32;
  o.layers = 3;
  o.heads = 4;
  o.kv_heads = 2;
  o.intermediate = 48;
  o.vocab = vocab;
  o.init_std = 0.2;
  o.seed = 77;
  write_random_model(dir / "model", o);
  return dir / "model";
}

// The full forward's logits [n, V] of `ids`, by the training engine.
std::vector<float> engine_logits(const fs::path& model, const std::vector<int32_t>& ids) {
  auto be = make_cpu_backend();
  EngineOptions opt;
  opt.window = 1;
  opt.max_tokens = int64_t(ids.size());
  opt.max_sequences = 1;
  Engine engine(*be, load_model_spec(model), opt);
  load_model_weights(engine, model);
  Sample s;
  s.ids = ids;
  s.labels = ids;
  return engine.logits(pack_samples({&s}));
}

std::vector<int32_t> some_ids(int n, int vocab) {
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back(int32_t((i * 37 + 11) % vocab));
  return ids;
}

double rel_error(const float* a, const float* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    num = std::max(num, std::fabs(double(a[i]) - b[i]));
    den = std::max(den, std::fabs(double(b[i])));
  }
  return num / den;
}

class DecoderVsForward : public ::testing::TestWithParam<std::string> {};

TEST_P(DecoderVsForward, LogitsEqualTheFullForward) {
  const fs::path model = random_model(fresh_dir("decode_" + GetParam()), GetParam());
  const ModelSpec spec = load_model_spec(model);
  const int64_t V = spec.vocab, n = 24;
  const std::vector<int32_t> ids = some_ids(int(n), int(V));
  const std::vector<float> ref = engine_logits(model, ids);
  auto be = make_cpu_backend();

  // One token a pass: the first by attention_forward, the rest against the cache.
  DecoderOptions o;
  o.max_tokens = n;
  auto stepwise = load_decoder(*be, model, o);
  std::vector<float> steps;
  for (int64_t t = 0; t < n; ++t) {
    const std::vector<float> l = stepwise->forward({ids[size_t(t)]});
    steps.insert(steps.end(), l.begin(), l.end());
  }
  EXPECT_EQ(stepwise->length(), n);
  // Both are fp32 on the CPU through the same ops; only the GEMMs see other row counts.
  EXPECT_LT(rel_error(steps.data(), ref.data(), ref.size()), 1e-5) << "one token a pass";

  // Prefill in chunks of 5 (the later ones attend to the cache): every row's logits.
  o.prefill_chunk = 5;
  o.all_logits = true;
  auto chunked = load_decoder(*be, model, o);
  const std::vector<float> all = chunked->forward(ids, true);
  EXPECT_LT(rel_error(all.data(), ref.data(), ref.size()), 1e-5) << "chunks of 5";
  // The last row alone, after a reset: the same as the all-rows pass gave.
  chunked->reset();
  const std::vector<float> last = chunked->forward(ids);
  EXPECT_EQ(std::memcmp(last.data(), all.data() + (n - 1) * V, size_t(V) * 4), 0);

  // The layers streaming through a ring of 2 slots: the same bits as resident.
  DecoderOptions so;
  so.max_tokens = n;
  so.device_budget = Decoder::device_bytes(spec, so, DType::kF32, /*streaming=*/true);
  auto streamed = load_decoder(*be, model, so);
  ASSERT_TRUE(streamed->streaming()) << streamed->summary();
  EXPECT_FALSE(stepwise->streaming()) << stepwise->summary();
  EXPECT_NE(streamed->summary().find("stream from host memory through 2 device slots"),
            std::string::npos)
      << streamed->summary();
  for (int64_t t = 0; t < n; ++t) {
    const std::vector<float> l = streamed->forward({ids[size_t(t)]});
    EXPECT_EQ(std::memcmp(l.data(), steps.data() + t * V, size_t(V) * 4), 0) << "position " << t;
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, DecoderVsForward,
                         ::testing::Values("llama", "mistral", "qwen2", "qwen3"));

TEST(Generate, GreedyIsTheArgmaxOfTheFullForwardAndEosStops) {
  const fs::path model = random_model(fresh_dir("generate_greedy"), "qwen3");
  const std::vector<int32_t> prompt = {5, 17, 3, 44, 9};
  auto be = make_cpu_backend();
  DecoderOptions dopt;
  dopt.max_tokens = 32;
  auto dec = load_decoder(*be, model, dopt);
  GenerateOptions o;
  o.max_new_tokens = 12;
  const std::vector<int32_t> out = generate_tokens(*dec, prompt, o);
  ASSERT_EQ(out.size(), 12u);
  std::vector<int32_t> seq = prompt;
  seq.insert(seq.end(), out.begin(), out.end() - 1);
  const std::vector<float> full = engine_logits(model, seq);
  const int64_t V = dec->spec().vocab;
  for (size_t k = 0; k < out.size(); ++k) {
    const float* row = full.data() + (prompt.size() - 1 + k) * size_t(V);
    EXPECT_EQ(out[k], int32_t(std::max_element(row, row + V) - row)) << "new token " << k;
  }
  o.eos_ids = {out[4]};
  const std::vector<int32_t> stopped = generate_tokens(*dec, prompt, o);
  const size_t first = size_t(std::find(out.begin(), out.end(), out[4]) - out.begin());
  EXPECT_EQ(stopped, std::vector<int32_t>(out.begin(), out.begin() + long(first) + 1));
}

TEST(Generate, SamplingIsSeeded) {
  const fs::path model = random_model(fresh_dir("generate_sample"), "llama");
  auto be = make_cpu_backend();
  DecoderOptions dopt;
  dopt.max_tokens = 16;
  auto dec = load_decoder(*be, model, dopt);
  GenerateOptions o;
  o.max_new_tokens = 12;
  o.temperature = 1.5;
  o.top_p = 0.95;
  o.seed = 11;
  const auto a = generate_tokens(*dec, {1, 2, 3}, o);
  const auto b = generate_tokens(*dec, {1, 2, 3}, o);
  o.seed = 12;
  const auto c = generate_tokens(*dec, {1, 2, 3}, o);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  o.top_p = 0;
  EXPECT_NE(error_text([&] { generate_tokens(*dec, {1}, o); }).find("--top-p"), std::string::npos);
}

TEST(Generate, BadRequestsAreRefused) {
  const fs::path model = random_model(fresh_dir("generate_bad"), "llama");
  const ModelSpec spec = load_model_spec(model);
  auto be = make_cpu_backend();
  DecoderOptions dopt;
  dopt.max_tokens = 8;
  auto dec = load_decoder(*be, model, dopt);
  GenerateOptions o;
  o.max_new_tokens = 6;
  EXPECT_NE(error_text([&] {
              generate_tokens(*dec, {1, 2, 3}, o);
            }).find("the 3 prompt tokens and 6 new ones exceed the 8"),
            std::string::npos);
  EXPECT_NE(error_text([&] {
              dec->forward({1, 97});
            }).find("token id 97 at position 1 is outside the vocabulary of 97"),
            std::string::npos);
  dec->reset();
  EXPECT_NE(error_text([&] { dec->forward({1}, true); }).find("all_logits is off"),
            std::string::npos);
  DecoderOptions small = dopt;
  small.device_budget = Decoder::device_bytes(spec, dopt, DType::kF32, true) - 1;
  EXPECT_NE(error_text([&] {
              load_decoder(*be, model, small);
            }).find("shorten the prompt or --max-new-tokens"),
            std::string::npos);
}

// A final-norm weight of 3.4e38 (finite, loadable) overflows the forward: generate refuses the
// non-finite logits, naming the position, instead of sampling from NaN (issue 14).
TEST(Generate, NonFiniteLogitsAreRefused) {
  const fs::path model = random_model(fresh_dir("generate_nan"), "llama");
  set_tensor(model, "model.norm.weight", 3.4e38f);
  auto be = make_cpu_backend();
  DecoderOptions dopt;
  dopt.max_tokens = 8;
  auto dec = load_decoder(*be, model, dopt);
  GenerateOptions o;
  o.max_new_tokens = 2;
  const std::string e = error_text([&] { generate_tokens(*dec, {1, 2, 3}, o); });
  EXPECT_NE(e.find("generate: the logits at position 2 are not finite"), std::string::npos) << e;
  EXPECT_NE(e.find("the model's weights overflow"), std::string::npos) << e;
}

// `slideformer ARGS`: stdout alone, or with stderr after it.
std::string run(const std::string& args, bool with_stderr, int* code) {
  FILE* p = popen(
      (std::string(SF_BINARY) + " " + args + (with_stderr ? " 2>&1" : " 2>/dev/null")).c_str(),
      "r");
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
  tiny_arch_model(d / "model", "qwen2", 151936);
  int code = 0;
  const std::string args = "generate --model " + (d / "model").string() + " --tokenizer " +
                           tok.string() + " --chat --prompt Hi --max-new-tokens 3 --print-ids";
  const std::string out = run(args, false, &code);
  ASSERT_EQ(code, 0) << out;
  const auto j = nlohmann::json::parse(out);
  const Tokenizer t = Tokenizer::load(tok);
  const auto prompt = j["prompt_ids"].get<std::vector<int32_t>>();
  // ... <|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n
  EXPECT_NE(t.decode(prompt).find("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"),
            std::string::npos)
      << t.decode(prompt);
  EXPECT_EQ(j["new_ids"].size(), 3u);
  EXPECT_EQ(run(args, false, &code), out);  // greedy: the same every time
  const std::string with_log = run(args, true, &code);
  EXPECT_NE(with_log.find("decode on cpu: all 1 layers resident"), std::string::npos) << with_log;
}

// --template-kwargs reach the template: Qwen3's enable_thinking false opens the reply with an empty
// <think></think>, as transformers' apply_chat_template(..., enable_thinking=False) does.
TEST(Generate, TemplateKwargsReachTheTemplate) {
  const fs::path tok = fs::path(SF_SOURCE_DIR) / "../shared/data/tokenizers/qwen3";
  if (!fs::exists(tok)) GTEST_SKIP() << "skipped: ../shared/data is absent";
  const fs::path d = fresh_dir("generate_kwargs");
  tiny_arch_model(d / "model", "qwen3", 151936);
  const std::string base = "generate --model " + (d / "model").string() + " --tokenizer " +
                           tok.string() + " --chat --prompt Hi --max-new-tokens 1 --print-ids";
  const Tokenizer t = Tokenizer::load(tok);
  auto prompt_of = [&](const std::string& extra) {
    int code = 0;
    const std::string out = run(base + extra, false, &code);
    EXPECT_EQ(code, 0) << out;
    return t.decode(nlohmann::json::parse(out)["prompt_ids"].get<std::vector<int32_t>>());
  };
  const std::string plain = prompt_of("");
  EXPECT_EQ(plain.substr(plain.size() - 22), "<|im_start|>assistant\n") << plain;
  const std::string off = prompt_of(" --template-kwargs '{\"enable_thinking\": false}'");
  EXPECT_EQ(off, plain + "<think>\n\n</think>\n\n");
  int code = 0;
  std::string out = run(base + " --template-kwargs '[1]'", true, &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("--template-kwargs must be a JSON object"), std::string::npos) << out;
  out = run(base + " --template-kwargs '{nope'", true, &code);
  EXPECT_NE(out.find("--template-kwargs is not valid JSON (at column"), std::string::npos) << out;
}

TEST(Generate, BinaryRefusesABudgetTooSmall) {
  const fs::path model = random_model(fresh_dir("generate_budget"), "llama", 256);
  int code = 0;
  const std::string out = run(
      "generate --model " + model.string() + " --prompt abc --max-new-tokens 4 --gpu-memory 1KiB",
      true, &code);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("shorten the prompt or --max-new-tokens"), std::string::npos) << out;
}

}  // namespace
}  // namespace sf
