#include "train/generate.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>

#include "core/error.h"
#include "io/safetensors.h"
#include "model/weights.h"
#include "train/config_file.h"

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

std::vector<int32_t> generate_tokens(Decoder& decoder, const std::vector<int32_t>& prompt,
                                     const GenerateOptions& o) {
  SF_CHECK(!prompt.empty(), "generate: the prompt has no tokens");
  SF_CHECK(o.max_new_tokens >= 1, "generate: --max-new-tokens must be at least 1");
  SF_CHECK(o.temperature >= 0 && std::isfinite(o.temperature), "generate: --temperature must be ",
           ">= 0 (0: greedy), got ", o.temperature);
  SF_CHECK(o.top_p > 0 && o.top_p <= 1, "generate: --top-p must be in (0, 1], got ", o.top_p);
  SF_CHECK(int64_t(prompt.size()) + o.max_new_tokens <= decoder.capacity(), "generate: the ",
           prompt.size(), " prompt tokens and ", o.max_new_tokens, " new ones exceed the ",
           decoder.capacity(), " the decoder was made for");
  const int64_t V = decoder.spec().vocab;
  std::mt19937_64 rng(o.seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  decoder.reset();
  std::vector<float> logits = decoder.forward(prompt);
  std::vector<int32_t> out;
  for (int64_t n = 0;; ++n) {
    for (int64_t i = 0; i < V; ++i)
      SF_CHECK(std::isfinite(logits[size_t(i)]), "generate: the logits at position ",
               decoder.length() - 1, " are not finite (token ", i, ": ", logits[size_t(i)],
               "): the model's weights overflow");
    const int32_t next = pick_token(logits.data(), V, o.temperature, o.top_p, u(rng));
    out.push_back(next);
    if (n + 1 == o.max_new_tokens) break;
    if (std::find(o.eos_ids.begin(), o.eos_ids.end(), next) != o.eos_ids.end()) break;
    logits = decoder.forward({next});
  }
  return out;
}

std::unique_ptr<Decoder> load_decoder(Backend& backend, const std::filesystem::path& model_dir,
                                      const DecoderOptions& options) {
  const ModelSpec spec = load_model_spec(model_dir);
  SafetensorsReader reader(model_dir);
  check_checkpoint_tensors(reader, spec);
  return std::make_unique<Decoder>(backend, spec, options, [&](const TensorDesc& desc, float* dst) {
    load_tensor_f32(reader, desc, dst);
  });
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
