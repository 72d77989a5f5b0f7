// defines: the golden fixture case (tests/golden/data/<case>: config.json, model.safetensors,
// batch.json, golden.safetensors) as the engine sees it, and the comparisons the golden tests
// share. Header-only: test support.
#pragma once

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "io/safetensors.h"
#include "model/spec.h"

namespace sf::golden {

inline std::filesystem::path data_dir() {
  return std::filesystem::path(SF_SOURCE_DIR) / "tests/golden/data";
}

inline const std::vector<std::string>& case_names() {
  static const std::vector<std::string> kNames = {"llama3_rope", "llama_tied",   "mistral",
                                                  "qwen2_bias",  "qwen3_qknorm", "llama_gqa1_long"};
  return kNames;
}

// max|a-b| / max|b|: a normalised error, insensitive to a few tiny reference entries; a
// non-finite value of ours is an infinite error.
inline double rel_error(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    num = std::max(num, std::fabs(double(a[i]) - double(b[i])));
    den = std::max(den, std::fabs(double(b[i])));
  }
  return den > 0 ? num / den : num;
}

inline std::vector<float> read_all(const SafetensorsReader& r, const std::string& name) {
  const TensorInfo& t = r.get(name);
  size_t n = 1;
  for (int64_t s : t.shape) n *= size_t(s);
  std::vector<float> v(n);
  r.read_f32(name, v.data(), n);
  return v;
}

// Every tensor's master weights, whole, by name (visit_weights hands them over in pieces).
inline std::map<std::string, std::vector<float>> weights_by_name(Engine& engine) {
  std::map<std::string, std::vector<float>> out;
  engine.visit_weights([&](const TensorDesc& d, int64_t begin, int64_t count, const float* p) {
    std::vector<float>& w = out[d.name];
    EXPECT_EQ(int64_t(w.size()), begin) << d.name;
    w.insert(w.end(), p, p + count);
  });
  return out;
}

struct Case {
  ModelSpec spec;
  Batch batch;
  nlohmann::json hp;

  // The engine options of the fixture's hyper-parameters, for window W; micro-batched: one
  // micro-batch per sample (M = the longest sample).
  EngineOptions options(int window, bool micro = false) const {
    EngineOptions opt;
    opt.window = window;
    if (micro)
      for (size_t i = 1; i < batch.cu_seqlens.size(); ++i)
        opt.micro_tokens =
            std::max<int64_t>(opt.micro_tokens, batch.cu_seqlens[i] - batch.cu_seqlens[i - 1]);
    // Micro-batched runs also cut the MLP into blocks of 5 rows (the last one shorter).
    if (micro) opt.mlp_tokens = 5;
    opt.max_tokens = batch.tokens();
    opt.max_sequences = int64_t(batch.cu_seqlens.size()) - 1;
    opt.adamw.lr = hp["lr"];
    opt.adamw.beta1 = hp["beta1"];
    opt.adamw.beta2 = hp["beta2"];
    opt.adamw.eps = hp["eps"];
    opt.adamw.weight_decay = hp["weight_decay"];
    opt.max_grad_norm = hp["max_grad_norm"];
    return opt;
  }
};

inline Case load_case(const std::filesystem::path& dir) {
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

}  // namespace sf::golden
