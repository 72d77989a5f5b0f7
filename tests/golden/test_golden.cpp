// The end-to-end test that matters most: tiny models made by transformers
// (tests/golden/make_golden.py) go through the real loader and the sliding engine on the CPU
// backend, and must reproduce transformers + torch.optim.AdamW in fp32: logits and loss to 1e-5,
// every gradient and every parameter after 3 clipped AdamW steps to 1e-4 — for windows 1, 2, 3.
// Errors are max|ours − ref| / max|ref| per tensor. The fixtures use Adam eps = 1e-4: with 1e-8,
// Adam divides near-zero gradients (e.g. the k_proj bias, whose exact gradient is 0 because
// softmax ignores a constant shift) by their own rounding noise, and torch fp32 itself then differs
// from torch fp64 by up to 6e-3 after 3 steps (measured; tests/golden/README.md). With 1e-4 that
// floor is below 1e-5, so 1e-4 tests our math rather than fp32 summation order.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "backend/cpu/cpu_backend.h"
#include "engine/engine.h"
#include "io/safetensors.h"
#include "model/spec.h"
#include "train/checkpoint.h"

namespace sf {
namespace {

namespace fs = std::filesystem;

fs::path golden_dir() { return fs::path(SF_SOURCE_DIR) / "tests/golden/data"; }

// max|a-b| / max|b|: a normalised error, insensitive to a few tiny reference entries.
double rel_error(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::fabs(double(a[i]) - double(b[i])));
    den = std::max(den, std::fabs(double(b[i])));
  }
  return den > 0 ? num / den : num;
}

std::vector<float> read_all(const SafetensorsReader& r, const std::string& name) {
  const TensorInfo& t = r.get(name);
  size_t n = 1;
  for (int64_t s : t.shape) n *= size_t(s);
  std::vector<float> v(n);
  r.read_f32(name, v.data(), n);
  return v;
}

struct Case {
  ModelSpec spec;
  Batch batch;
  nlohmann::json hp;
};

Case load_case(const fs::path& dir) {
  Case c;
  c.spec = load_model_spec(dir);
  std::ifstream f(dir / "batch.json");
  nlohmann::json j = nlohmann::json::parse(f);
  c.hp = j["hparams"];
  auto ids = j["input_ids"].get<std::vector<std::vector<int>>>();
  auto labels = j["labels"].get<std::vector<std::vector<int>>>();
  c.batch.cu_seqlens.push_back(0);
  for (size_t b = 0; b < ids.size(); ++b) {
    const size_t S = ids[b].size();
    for (size_t s = 0; s < S; ++s) {
      c.batch.ids.push_back(ids[b][s]);
      // transformers shifts labels inside the loss: token s predicts labels[s + 1].
      c.batch.targets.push_back(s + 1 < S ? labels[b][s + 1] : -100);
      c.batch.positions.push_back(int32_t(s));
    }
    c.batch.cu_seqlens.push_back(int32_t(c.batch.ids.size()));
  }
  return c;
}

class Golden : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(Golden, MatchesTransformers) {
  const auto& [name, window] = GetParam();
  const fs::path dir = golden_dir() / name;
  ASSERT_TRUE(fs::exists(dir)) << dir << " is missing: run tests/golden/make_golden.py";
  Case c = load_case(dir);
  SafetensorsReader golden(dir / "golden.safetensors");

  auto backend = make_cpu_backend();
  EngineOptions opt;
  opt.window = window;
  opt.max_tokens = c.batch.tokens();
  opt.max_sequences = int64_t(c.batch.cu_seqlens.size()) - 1;
  opt.adamw.lr = c.hp["lr"];
  opt.adamw.beta1 = c.hp["beta1"];
  opt.adamw.beta2 = c.hp["beta2"];
  opt.adamw.eps = c.hp["eps"];
  opt.adamw.weight_decay = c.hp["weight_decay"];
  opt.max_grad_norm = c.hp["max_grad_norm"];
  Engine engine(*backend, c.spec, opt);
  load_model_weights(engine, dir);

  EXPECT_LT(rel_error(engine.logits(c.batch), read_all(golden, "logits")), 1e-5) << "logits";

  const std::vector<float> losses = read_all(golden, "step_losses");
  const std::vector<float> norms = read_all(golden, "grad_norms");
  const float lr = c.hp["lr"];
  for (int s = 0; s < int(c.hp["steps"]); ++s) {
    StepResult r = engine.step(c.batch, lr);
    EXPECT_NEAR(r.loss, losses[size_t(s)], 1e-5 * std::fabs(losses[size_t(s)])) << "step " << s;
    EXPECT_NEAR(r.grad_norm, norms[size_t(s)], 1e-4 * norms[size_t(s)]) << "step " << s;
    if (s == 0) {
      EXPECT_NEAR(r.loss, read_all(golden, "loss")[0], 1e-5 * std::fabs(losses[0]));
      for (const std::string& n : golden.names()) {
        if (n.rfind("grad.", 0) != 0) continue;
        EXPECT_LT(rel_error(engine.gradient(n.substr(5)), read_all(golden, n)), 1e-4) << n;
      }
    }
  }
  int checked = 0;
  engine.visit_weights([&](const TensorDesc& d, const float* p) {
    const std::string key = "param_after3." + d.name;
    ASSERT_TRUE(golden.contains(key)) << key;
    std::vector<float> ours(p, p + read_all(golden, key).size());
    EXPECT_LT(rel_error(ours, read_all(golden, key)), 1e-4) << d.name;
    ++checked;
  });
  EXPECT_GT(checked, 0);
}

INSTANTIATE_TEST_SUITE_P(
    AllCases, Golden,
    ::testing::Combine(::testing::Values("llama3_rope", "llama_tied", "mistral", "qwen2_bias",
                                         "qwen3_qknorm", "llama_gqa1_long"),
                       ::testing::Values(1, 2, 3)),
    [](const auto& info) {
      return std::get<0>(info.param) + "_W" + std::to_string(std::get<1>(info.param));
    });

}  // namespace
}  // namespace sf
