#include "model/init.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <random>

#include "core/error.h"
#include "core/host_memory.h"
#include "model/spec.h"
#include "model/weights.h"

namespace sf {

void validate_tiny_model_options(const TinyModelOptions& o) {
  // Every option is checked before any is used (--heads 0 divided hidden by zero).
  const std::pair<const char*, int64_t> dims[] = {
      {"--hidden", o.hidden},         {"--layers", o.layers}, {"--heads", o.heads},
      {"--kv-heads", o.kv_heads},     {"--intermediate", o.intermediate},
      {"--vocab", o.vocab},           {"--max-positions", o.max_positions}};
  for (auto& [name, v] : dims) {
    SF_CHECK(v > 0, "init-model: ", name, " is ", v, "; it must be positive");
    SF_CHECK(v < (int64_t(1) << 24), "init-model: ", name, " is ", v,
             "; it must stay below 2^24 (init-model makes small test models)");
  }
  SF_CHECK(o.head_dim >= 0 && o.head_dim < (int64_t(1) << 24), "init-model: --head-dim is ",
           o.head_dim, "; it must be positive (or 0: hidden / heads)");
  SF_CHECK(o.head_dim > 0 || o.hidden % o.heads == 0, "init-model: --hidden ", o.hidden,
           " is not divisible by --heads ", o.heads, "; give --head-dim or change them");
  SF_CHECK(o.heads % o.kv_heads == 0, "init-model: --heads ", o.heads,
           " is not divisible by --kv-heads ", o.kv_heads);
  const int64_t head_dim = o.head_dim ? o.head_dim : o.hidden / o.heads;
  SF_CHECK(head_dim % 2 == 0, "init-model: the head dimension ", head_dim,
           " is odd; RoPE needs it even");
  SF_CHECK(std::isfinite(o.rope_theta) && o.rope_theta > 0, "init-model: --rope-theta is ",
           o.rope_theta, "; it must be a positive finite number");
  SF_CHECK(std::isfinite(o.rms_norm_eps) && float(o.rms_norm_eps) > 0,
           "init-model: --rms-norm-eps is ", o.rms_norm_eps, "; it must be positive (in float)");
  for (auto [name, id] : {std::pair{"bos_token_id", o.bos_id}, std::pair{"eos_token_id", o.eos_id}})
    SF_CHECK(id >= 0 && id < o.vocab, "init-model: ", name, " ", id,
             " is outside the vocabulary of ", o.vocab, " tokens");
  SF_CHECK(std::isfinite(o.init_std) && o.init_std >= 0, "init-model: --init-std is ",
           o.init_std, "; it must be a finite non-negative number");
}

std::string tiny_model_config_json(const TinyModelOptions& o) {
  validate_tiny_model_options(o);
  static const std::pair<const char*, const char*> kArch[] = {
      {"llama", "LlamaForCausalLM"},
      {"mistral", "MistralForCausalLM"},
      {"qwen2", "Qwen2ForCausalLM"},
      {"qwen3", "Qwen3ForCausalLM"}};
  const char* cls = nullptr;
  for (auto& [k, v] : kArch)
    if (o.arch == k) cls = v;
  SF_CHECK(cls, "unknown architecture '", o.arch, "': use llama, mistral, qwen2 or qwen3");
  nlohmann::json j;
  j["architectures"] = {cls};
  j["model_type"] = o.arch;
  j["hidden_size"] = o.hidden;
  j["num_hidden_layers"] = o.layers;
  j["num_attention_heads"] = o.heads;
  j["num_key_value_heads"] = o.kv_heads;
  j["head_dim"] = o.head_dim ? o.head_dim : o.hidden / o.heads;
  j["intermediate_size"] = o.intermediate;
  j["vocab_size"] = o.vocab;
  j["max_position_embeddings"] = o.max_positions;
  j["rms_norm_eps"] = o.rms_norm_eps;
  j["rope_theta"] = o.rope_theta;
  j["hidden_act"] = "silu";
  j["tie_word_embeddings"] = o.tie_word_embeddings;
  j["attention_dropout"] = 0.0;
  j["torch_dtype"] = "float32";
  j["bos_token_id"] = o.bos_id;
  j["eos_token_id"] = o.eos_id;
  if (o.arch == "qwen2" || o.arch == "qwen3") j["use_sliding_window"] = false;
  if (o.arch == "mistral") j["sliding_window"] = nullptr;
  return j.dump(2) + "\n";
}

void write_random_model(const std::filesystem::path& dir, const TinyModelOptions& o) {
  const std::string config = tiny_model_config_json(o);
  const ModelSpec spec = parse_model_spec(config, (dir / "config.json").string());
  std::mt19937_64 rng(o.seed);
  std::normal_distribution<float> normal(0.0f, float(o.init_std));
  uint64_t bytes = 0;  // every tensor in fp32, held at once
  for (const TensorDesc& d : expected_tensors(spec)) {
    uint64_t n = 4;
    for (int64_t s : d.shape) n *= uint64_t(s);
    bytes += n;
  }
  if (const auto avail = host_memory_available(); avail && bytes > avail->bytes)
    SF_FAIL("init-model: this model would take ", gib(bytes), " in memory (fp32) and ",
            gib(avail->bytes), " is available (", avail->source,
            "); init-model makes small test models: lower --hidden, --layers, --intermediate or "
            "--vocab");
  std::vector<std::vector<float>> storage;
  std::vector<TensorToWrite> tensors;
  for (const TensorDesc& d : expected_tensors(spec)) {
    int64_t n = 1;
    for (int64_t s : d.shape) n *= s;
    std::vector<float> v(static_cast<size_t>(n));
    const bool is_norm = d.name.find("norm") != std::string::npos;
    const bool is_bias = d.name.find(".bias") != std::string::npos;
    for (float& x : v) x = is_norm ? 1.0f : is_bias ? 0.0f : normal(rng);
    storage.push_back(std::move(v));
    tensors.push_back(TensorToWrite{d.name, d.shape, storage.back().data()});
  }
  save_hf_checkpoint(dir, spec, config, tensors, DType::kF32);
}

}  // namespace sf
