// defines: parse_model_spec, load_model_spec (config.json → ModelSpec, every key type-checked),
// layer_tensors/outer_tensors (the one builder behind the per-architecture tables),
// parameter_count, arch_def.
#include "model/spec.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/input_file.h"

namespace sf {
using json = nlohmann::json;

namespace {

const ArchDef* const kArchs[] = {&llama_arch_def(), &mistral_arch_def(), &qwen2_arch_def(),
                                 &qwen3_arch_def()};

std::string supported_list() {
  std::string s;
  for (const ArchDef* a : kArchs) s += str_cat(s.empty() ? "" : ", ", a->class_name);
  return s;
}

// Type-checked access to one JSON object of config.json; errors name the file and the key path.
class Config {
 public:
  Config(const json& j, std::string source, std::string prefix = "")
      : j_(j), source_(std::move(source)), prefix_(std::move(prefix)) {}

  bool contains(const char* key) const { return j_.contains(key); }
  // Present and not null.
  bool has(const char* key) const { return j_.contains(key) && !j_.at(key).is_null(); }
  const json& raw(const char* key) const { return j_.at(key); }
  std::string path(const char* key) const { return prefix_ + key; }

  int64_t get_int(const char* key) const {
    require(key);
    const json& v = j_.at(key);
    // Accept 4096.0 as well: some exporters write integers as floats.
    if (v.is_number_float() && std::isfinite(v.get<double>()) &&
        v.get<double>() == std::trunc(v.get<double>()) && std::abs(v.get<double>()) < 9e15) {
      return int64_t(v.get<double>());
    }
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > (1ull << 62)))
      type_error(key, "an integer", v);
    return v.get<int64_t>();
  }
  int64_t get_int(const char* key, int64_t def) const { return has(key) ? get_int(key) : def; }
  int64_t get_positive(const char* key) const {
    const int64_t v = get_int(key);
    SF_CHECK(v > 0, source_, ": '", path(key), "' is ", v, "; it must be positive");
    return v;
  }
  double get_double(const char* key, double def) const {
    if (!has(key)) return def;
    const json& v = j_.at(key);
    if (!v.is_number()) type_error(key, "a number", v);
    const double d = v.get<double>();
    SF_CHECK(std::isfinite(d), source_, ": '", path(key), "' is not finite");
    return d;
  }
  double get_double(const char* key) const {
    require(key);
    return get_double(key, 0.0);
  }
  bool get_bool(const char* key, bool def) const {
    if (!has(key)) return def;
    if (!j_.at(key).is_boolean()) type_error(key, "true or false", j_.at(key));
    return j_.at(key).get<bool>();
  }
  std::string get_string(const char* key, const std::string& def) const {
    if (!has(key)) return def;
    if (!j_.at(key).is_string()) type_error(key, "a string", j_.at(key));
    return j_.at(key).get<std::string>();
  }
  Config object(const char* key) const {
    if (!j_.at(key).is_object()) type_error(key, "an object", j_.at(key));
    return Config(j_.at(key), source_, path(key) + ".");
  }
  // An int, a list of ints (the first is taken: Llama 3 lists several eos ids) or null.
  int64_t get_token_id(const char* key) const {
    if (!has(key)) return -1;
    const json& v = j_.at(key);
    if (!v.is_array()) return get_int(key);
    if (v.empty()) return -1;
    if (!v[0].is_number_integer()) type_error(key, "an integer or a list of integers", v);
    return v[0].get<int64_t>();
  }
  [[noreturn]] void type_error(const char* key, const char* want, const json& v) const {
    SF_FAIL(source_, ": '", path(key), "' must be ", want, ", found ", v.type_name(), " ",
            v.dump().substr(0, 80), "; fix config.json");
  }
  const std::string& source() const { return source_; }

 private:
  void require(const char* key) const {
    SF_CHECK(j_.contains(key), source_, ": required key '", path(key),
             "' is missing; use the config.json that came with the checkpoint");
    SF_CHECK(!j_.at(key).is_null(), source_, ": required key '", path(key), "' is null");
  }
  const json& j_;
  std::string source_, prefix_;
};

const ArchDef& find_arch(const Config& c) {
  std::string found;
  if (c.has("architectures")) {
    const json& list = c.raw("architectures");
    if (!list.is_array()) c.type_error("architectures", "a list of strings", list);
    for (const json& name : list) {
      if (!name.is_string()) c.type_error("architectures", "a list of strings", list);
      for (const ArchDef* a : kArchs)
        if (name.get<std::string>() == a->class_name) return *a;
    }
    found = list.dump();
  }
  if (found.empty() || found == "[]") {  // no class named: fall back to model_type as HF does
    const std::string type = c.get_string("model_type", "");
    for (const ArchDef* a : kArchs)
      if (type == a->model_type) return *a;
    found = type.empty() ? "neither 'architectures' nor 'model_type'"
                         : str_cat("model_type '", type, "'");
  }
  SF_FAIL(c.source(), ": unsupported architecture: found ", found,
          "; supported: ", supported_list());
}

void parse_rope(const Config& c, const ArchDef& def, ModelSpec& s) {
  s.rope_theta = c.get_double("rope_theta", def.default_rope_theta);
  // transformers v5 writes rope_parameters {rope_type, rope_theta, ...}; older files write
  // rope_theta next to rope_scaling {rope_type or type, factor, ...}.
  const char* key = c.has("rope_parameters") ? "rope_parameters"
                    : c.has("rope_scaling")  ? "rope_scaling"
                                             : nullptr;
  if (!key) return;
  const Config r = c.object(key);
  s.rope_theta = r.get_double("rope_theta", s.rope_theta);
  const std::string type = r.get_string("rope_type", r.get_string("type", "default"));
  if (type == "default") return;
  SF_CHECK(type == "llama3", c.source(), ": '", key, "' has rope type '", type,
           "', which is not supported; only default and llama3 RoPE are supported");
  s.rope_scaling.type = RopeScaling::Type::kLlama3;
  s.rope_scaling.factor = r.get_double("factor");
  s.rope_scaling.low_freq_factor = r.get_double("low_freq_factor");
  s.rope_scaling.high_freq_factor = r.get_double("high_freq_factor");
  s.rope_scaling.original_max_position_embeddings = r.get_int("original_max_position_embeddings");
  const RopeScaling& rs = s.rope_scaling;
  SF_CHECK(rs.factor >= 1.0 && rs.low_freq_factor > 0 && rs.high_freq_factor > rs.low_freq_factor &&
               rs.original_max_position_embeddings > 0,
           c.source(), ": '", key, "' llama3 parameters are inconsistent (need factor >= 1, ",
           "0 < low_freq_factor < high_freq_factor, original_max_position_embeddings > 0)");
}

void parse_window(const Config& c, const ArchDef& def, ModelSpec& s) {
  if (def.window == ArchDef::Window::kNone) return;
  if (def.window == ArchDef::Window::kSlidingWindowKey) {
    // Absent: MistralConfig's default applies; null: no window (Mistral 7B v0.2 and later).
    if (!c.contains("sliding_window")) {
      s.sliding_window = def.default_sliding_window;
    } else if (c.has("sliding_window")) {
      s.sliding_window = c.get_int("sliding_window");
    }
  } else {
    if (!c.get_bool("use_sliding_window", false)) return;
    if (c.contains("sliding_window") && !c.has("sliding_window")) return;  // null: none
    const int64_t window = c.get_int("sliding_window", def.default_sliding_window);
    bool used = false;
    if (c.has("layer_types")) {  // transformers v5 spells out each layer's attention
      const json& types = c.raw("layer_types");
      if (!types.is_array()) c.type_error("layer_types", "a list of strings", types);
      for (const json& t : types) used = used || t == "sliding_attention";
    } else {
      used = c.get_int("max_window_layers", def.default_max_window_layers) < s.layers;
    }
    if (used) s.sliding_window = window;
  }
  if (s.sliding_window) {
    SF_CHECK(*s.sliding_window > 0, c.source(), ": 'sliding_window' is ", *s.sliding_window,
             "; it must be positive or null");
  }
}

}  // namespace

const ArchDef& arch_def(Arch arch) {
  for (const ArchDef* a : kArchs)
    if (a->arch == arch) return *a;
  SF_FAIL("arch_def: unknown architecture ", int(arch));
}

namespace {

// RoPE's inverse frequencies theta^(-2i/D) must all be finite and positive: a theta of 5e-324
// (or 1e308 with a tiny head_dim) gives inf or 0 and then NaN logits with exit 0.
void check_rope_frequencies(const Config& c, const ModelSpec& s) {
  SF_CHECK(std::isfinite(s.rope_theta) && s.rope_theta > 0, c.source(), ": 'rope_theta' is ",
           s.rope_theta, "; it must be a positive finite number (10000 or 500000 in real models)");
  for (int64_t i = 0; i < s.head_dim / 2; ++i) {
    const double f = std::pow(s.rope_theta, -2.0 * double(i) / double(s.head_dim));
    const float ff = float(f);
    SF_CHECK(std::isfinite(ff) && ff > 0, c.source(), ": 'rope_theta' ", s.rope_theta,
             " gives RoPE frequency ", i, " = ", f, ", which is not a positive finite float; ",
             "fix config.json");
  }
}

void check_partial_rotary(const Config& c) {
  if (!c.has("partial_rotary_factor")) return;
  const double f = c.get_double("partial_rotary_factor");
  SF_CHECK(f == 1.0, c.source(), ": '", c.path("partial_rotary_factor"), "' is ", f,
           ": partial RoPE is not implemented (only 1.0, RoPE over the whole head)");
}

}  // namespace

ModelSpec parse_model_spec(const std::string& json_text, const std::string& source) {
  check_json_depth(json_text, source);
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::exception& e) {
    SF_FAIL(source, ": not valid JSON (", e.what(), "); use the checkpoint's config.json");
  }
  SF_CHECK(j.is_object(), source, ": config.json must be a JSON object");
  const Config c(j, source);
  const ArchDef& def = find_arch(c);
  ModelSpec s;
  s.arch = def.arch;
  s.arch_name = def.class_name;
  s.hidden = c.get_positive("hidden_size");
  s.layers = c.get_positive("num_hidden_layers");
  s.heads = c.get_positive("num_attention_heads");
  s.intermediate = c.get_positive("intermediate_size");
  s.vocab = c.get_positive("vocab_size");
  s.kv_heads = c.has("num_key_value_heads") ? c.get_positive("num_key_value_heads") : s.heads;
  if (c.has("head_dim")) {
    s.head_dim = c.get_positive("head_dim");
  } else {
    SF_CHECK(s.hidden % s.heads == 0, source, ": hidden_size ", s.hidden,
             " is not divisible by num_attention_heads ", s.heads, " and head_dim is not set");
    s.head_dim = s.hidden / s.heads;
  }
  SF_CHECK(s.heads % s.kv_heads == 0, source, ": num_attention_heads ", s.heads,
           " is not divisible by num_key_value_heads ", s.kv_heads, "; fix config.json");
  SF_CHECK(s.head_dim % 2 == 0, source, ": head_dim ", s.head_dim, " is odd; RoPE needs it even");
  // Keep every weight's element count far from int64 overflow.
  for (int64_t v : {s.hidden, s.layers, s.heads, s.head_dim, s.intermediate, s.vocab})
    SF_CHECK(v < (int64_t(1) << 24), source, ": a model dimension (", v, ") is implausibly large");
  s.max_position_embeddings =
      c.get_int("max_position_embeddings", def.default_max_position_embeddings);
  s.rms_norm_eps = c.get_double("rms_norm_eps", 1e-6);
  SF_CHECK(s.rms_norm_eps > 0, source, ": 'rms_norm_eps' must be positive");
  parse_rope(c, def, s);
  check_rope_frequencies(c, s);
  check_partial_rotary(c);
  if (c.has("rope_parameters")) check_partial_rotary(c.object("rope_parameters"));
  SF_CHECK(float(s.rms_norm_eps) > 0, source, ": 'rms_norm_eps' ", s.rms_norm_eps,
           " is 0 in float; use a value like 1e-5 or 1e-6");
  SF_CHECK(s.max_position_embeddings > 0, source, ": 'max_position_embeddings' is ",
           s.max_position_embeddings, "; it must be positive");
  switch (def.bias) {
    case ArchDef::Bias::kNone:
      break;
    case ArchDef::Bias::kAttentionBiasKey:
      s.attention_bias = s.o_bias = c.get_bool("attention_bias", false);
      break;
    case ArchDef::Bias::kQkvAlways:
      s.attention_bias = true;
      s.o_bias = false;
      break;
  }
  s.mlp_bias = def.mlp_bias_key && c.get_bool("mlp_bias", false);
  s.qk_norm = def.qk_norm;
  // The engine implements SwiGLU with SiLU and no dropout: anything else would train silently
  // differently from transformers.
  SF_CHECK(!c.contains("hidden_act") || c.has("hidden_act"), source,
           ": 'hidden_act' is null; set it to \"silu\" (the only activation supported)");
  const std::string act = c.get_string("hidden_act", "silu");
  SF_CHECK(act == "silu" || act == "swish", c.source(), ": hidden_act \"", act,
           "\" is not supported (only silu, the activation of these architectures)");
  const double dropout = c.get_double("attention_dropout", 0.0);
  SF_CHECK(dropout == 0.0, c.source(), ": attention_dropout ", dropout,
           " is not supported (training runs without dropout): set it to 0.0 in config.json");
  s.tie_word_embeddings = c.get_bool("tie_word_embeddings", false);
  parse_window(c, def, s);
  s.bos_token_id = c.get_token_id("bos_token_id");
  s.eos_token_id = c.get_token_id("eos_token_id");
  // transformers builds nn.Embedding(padding_idx=pad_token_id): that row's gradient is always 0.
  s.pad_token_id = c.get_token_id("pad_token_id");
  // A negative padding_idx counts from the end in torch (-1: the last row): not what we do.
  SF_CHECK(!c.has("pad_token_id") || s.pad_token_id >= 0, c.source(), ": 'pad_token_id' is ",
           s.pad_token_id, "; a negative padding index is not supported: set it to null or to ",
           "the pad token's id");
  SF_CHECK(s.pad_token_id < s.vocab, c.source(), ": pad_token_id ", s.pad_token_id,
           " is outside the vocabulary of ", s.vocab, "; fix config.json");
  return s;
}

ModelSpec load_model_spec(const std::filesystem::path& model_dir) {
  const std::filesystem::path file = model_dir / "config.json";
  SF_CHECK(std::filesystem::exists(file), file.string(),
           ": cannot open; point at a Hugging Face checkpoint directory");
  return parse_model_spec(read_input_file(file, "the model config"), file.string());
}

std::array<TensorDesc, size_t(LayerTensor::kCount)> layer_tensors(const ModelSpec& s,
                                                                  int64_t layer) {
  SF_CHECK(layer >= 0 && layer < s.layers, "layer_tensors: layer ", layer, " out of range [0, ",
           s.layers, ")");
  const std::string p = str_cat("model.layers.", layer, ".");
  const int64_t C = s.hidden, D = s.head_dim, I = s.intermediate;
  const int64_t Q = s.heads * D, KV = s.kv_heads * D;
  std::array<TensorDesc, size_t(LayerTensor::kCount)> t;
  auto set = [&](LayerTensor k, std::string name, std::vector<int64_t> shape, bool present) {
    t[size_t(k)] = TensorDesc{p + name, std::move(shape), present};
  };
  using L = LayerTensor;
  set(L::kInputNorm, "input_layernorm.weight", {C}, true);
  set(L::kQ, "self_attn.q_proj.weight", {Q, C}, true);
  set(L::kK, "self_attn.k_proj.weight", {KV, C}, true);
  set(L::kV, "self_attn.v_proj.weight", {KV, C}, true);
  set(L::kO, "self_attn.o_proj.weight", {C, Q}, true);
  set(L::kQBias, "self_attn.q_proj.bias", {Q}, s.attention_bias);
  set(L::kKBias, "self_attn.k_proj.bias", {KV}, s.attention_bias);
  set(L::kVBias, "self_attn.v_proj.bias", {KV}, s.attention_bias);
  set(L::kOBias, "self_attn.o_proj.bias", {C}, s.o_bias);
  set(L::kQNorm, "self_attn.q_norm.weight", {D}, s.qk_norm);
  set(L::kKNorm, "self_attn.k_norm.weight", {D}, s.qk_norm);
  set(L::kPostNorm, "post_attention_layernorm.weight", {C}, true);
  set(L::kGate, "mlp.gate_proj.weight", {I, C}, true);
  set(L::kUp, "mlp.up_proj.weight", {I, C}, true);
  set(L::kDown, "mlp.down_proj.weight", {C, I}, true);
  set(L::kGateBias, "mlp.gate_proj.bias", {I}, s.mlp_bias);
  set(L::kUpBias, "mlp.up_proj.bias", {I}, s.mlp_bias);
  set(L::kDownBias, "mlp.down_proj.bias", {C}, s.mlp_bias);
  return t;
}

std::array<TensorDesc, size_t(OuterTensor::kCount)> outer_tensors(const ModelSpec& s) {
  std::array<TensorDesc, size_t(OuterTensor::kCount)> t;
  t[size_t(OuterTensor::kEmbed)] = {"model.embed_tokens.weight", {s.vocab, s.hidden}, true};
  t[size_t(OuterTensor::kFinalNorm)] = {"model.norm.weight", {s.hidden}, true};
  t[size_t(OuterTensor::kLmHead)] = {"lm_head.weight", {s.vocab, s.hidden}, !s.tie_word_embeddings};
  return t;
}

int64_t parameter_count(const ModelSpec& s) {
  auto numel = [](const TensorDesc& d) {
    int64_t n = 1;
    for (int64_t x : d.shape) n *= x;
    return d.present ? n : 0;
  };
  int64_t per_layer = 0, outer = 0;
  if (s.layers > 0)  // every layer has the same table
    for (const auto& d : layer_tensors(s, 0)) per_layer += numel(d);
  for (const auto& d : outer_tensors(s)) outer += numel(d);
  return per_layer * s.layers + outer;
}

}  // namespace sf
