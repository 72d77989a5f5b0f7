#include "train/generate.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>

#include "core/error.h"
#include "train/config_file.h"
#include "train/data.h"

namespace sf {

int32_t pick_token(const float* logits, int64_t vocab, double temperature, double top_p,
                   double uniform) {
  if (temperature <= 0) return int32_t(std::max_element(logits, logits + vocab) - logits);
  const double top = *std::max_element(logits, logits + vocab);
  std::vector<double> p(static_cast<size_t>(vocab));
  double sum = 0;
  for (int64_t i = 0; i < vocab; ++i)
    sum += p[size_t(i)] = std::exp((logits[i] - top) / temperature);
  std::vector<int32_t> order(static_cast<size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return p[size_t(a)] != p[size_t(b)] ? p[size_t(a)] > p[size_t(b)] : a < b;
  });
  // The nucleus: tokens in order of probability until their mass reaches top_p (at least one).
  size_t keep = 0;
  double mass = 0;
  while (keep < order.size() && (keep == 0 || mass < top_p * sum)) mass += p[size_t(order[keep++])];
  double target = uniform * mass, acc = 0;
  for (size_t k = 0; k < keep; ++k) {
    acc += p[size_t(order[k])];
    if (target < acc) return order[k];
  }
  return order[keep - 1];
}

std::vector<int32_t> generate_tokens(Engine& engine, const std::vector<int32_t>& prompt,
                                     const GenerateOptions& o) {
  SF_CHECK(!prompt.empty(), "generate: the prompt has no tokens");
  SF_CHECK(o.max_new_tokens >= 1, "generate: --max-new-tokens must be at least 1");
  SF_CHECK(o.temperature >= 0 && std::isfinite(o.temperature), "generate: --temperature must be ",
           ">= 0 (0: greedy), got ", o.temperature);
  SF_CHECK(o.top_p > 0 && o.top_p <= 1, "generate: --top-p must be in (0, 1], got ", o.top_p);
  const int64_t V = engine.spec().vocab;
  std::mt19937_64 rng(o.seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  Sample s;
  s.ids = prompt;
  std::vector<int32_t> out;
  for (int64_t n = 0; n < o.max_new_tokens; ++n) {
    s.labels = s.ids;
    const std::vector<float> logits = engine.logits(pack_samples({&s}));
    const float* last = logits.data() + (int64_t(s.ids.size()) - 1) * V;
    for (int64_t i = 0; i < V; ++i)
      SF_CHECK(std::isfinite(last[i]), "generate: the logits at position ", s.ids.size() - 1,
               " are not finite (token ", i, ": ", last[i], "): the model's weights overflow");
    const int32_t next = pick_token(last, V, o.temperature, o.top_p, u(rng));
    out.push_back(next);
    s.ids.push_back(next);
    if (std::find(o.eos_ids.begin(), o.eos_ids.end(), next) != o.eos_ids.end()) break;
  }
  return out;
}

std::vector<int32_t> eos_token_ids(const std::filesystem::path& model_dir) {
  for (const char* name : {"generation_config.json", "config.json"}) {
    const auto file = model_dir / name;
    if (!std::filesystem::is_regular_file(file)) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(read_text_file(file, "the model's"));
    } catch (const nlohmann::json::exception& e) {
      SF_FAIL(file.string(), ": not valid JSON (", e.what(), ")");
    }
    if (!j.is_object() || !j.contains("eos_token_id") || j["eos_token_id"].is_null()) continue;
    std::vector<int32_t> ids;
    const auto& v = j["eos_token_id"];
    for (const auto& x : v.is_array() ? v : nlohmann::json::array({v})) {
      SF_CHECK(x.is_number_integer() && x.get<int64_t>() >= 0 && x.get<int64_t>() < INT32_MAX,
               file.string(), ": eos_token_id must be a token id or a list of them, got ",
               v.dump());
      ids.push_back(int32_t(x.get<int64_t>()));
    }
    return ids;
  }
  return {};
}

}  // namespace sf
