// Greedy decoding on the CPU backend (fp32) equals transformers' model.generate(do_sample=False)
// token for token on every golden fixture model (tests/golden/data/generate.json, made by
// make_generate.py: two prompts a model, 40 new tokens or up to the end-of-sequence id), with the
// prompt in one pass and in passes of 3 tokens (the later ones attending to the cache), and
// through the binary (`slideformer generate --prompt-ids … --print-ids`).
#include <gtest/gtest.h>

#include <array>
#include <cstdio>

#include "backend/cpu/cpu_backend.h"
#include "generate_fixture.h"
#include "train/generate.h"

namespace sf {
namespace {

using golden::GenerateCase;

std::string case_name(const GenerateCase& c) {
  return c.model + " prompt of " + std::to_string(c.prompt.size());
}

TEST(GenerateGolden, GreedyEqualsTransformersGenerate) {
  const std::vector<GenerateCase> cases = golden::generate_cases();
  ASSERT_EQ(cases.size(), 2 * golden::case_names().size());
  auto be = make_cpu_backend();
  for (const GenerateCase& c : cases) {
    const auto dir = golden::data_dir() / c.model;
    GenerateOptions o;
    o.max_new_tokens = c.max_new_tokens;
    o.eos_ids = eos_token_ids(dir);
    for (int64_t chunk : {int64_t(512), int64_t(3)}) {
      DecoderOptions d;
      d.max_tokens = int64_t(c.prompt.size()) + c.max_new_tokens;
      d.prefill_chunk = chunk;
      auto decoder = load_decoder(*be, dir, d);
      EXPECT_EQ(generate_tokens(*decoder, c.prompt, o), c.new_ids)
          << case_name(c) << ", prefill chunk " << chunk;
    }
  }
}

// The binary, given the prompt as ids (the fixtures have no tokenizer), prints the same new ids.
TEST(GenerateGolden, ThroughTheBinary) {
  for (const GenerateCase& c : golden::generate_cases()) {
    std::string ids;
    for (int32_t id : c.prompt) ids += (ids.empty() ? "" : ",") + std::to_string(id);
    const std::string cmd = std::string(SF_BINARY) + " generate --backend cpu --model " +
                            (golden::data_dir() / c.model).string() + " --prompt-ids " + ids +
                            " --max-new-tokens " + std::to_string(c.max_new_tokens) +
                            " --print-ids 2>/dev/null";
    FILE* p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string out;
    std::array<char, 4096> buf;
    for (size_t n; (n = fread(buf.data(), 1, buf.size(), p)) > 0;) out.append(buf.data(), n);
    ASSERT_EQ(pclose(p), 0) << cmd << "\n" << out;
    const auto j = nlohmann::json::parse(out);
    EXPECT_EQ(j.at("prompt_ids").get<std::vector<int32_t>>(), c.prompt) << case_name(c);
    EXPECT_EQ(j.at("new_ids").get<std::vector<int32_t>>(), c.new_ids) << case_name(c);
  }
}

}  // namespace
}  // namespace sf
