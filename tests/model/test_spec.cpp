// Tests: config.json → ModelSpec for the four architectures (old and transformers-v5 layouts),
// the tensor tables, parameter counts against transformers, and every bad-input error.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/spec.h"

namespace sf {
namespace {
using json = nlohmann::json;

// Llama-3.1-8B's config.json as published.
const char* kLlama31 = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "hidden_act": "silu",
  "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
  "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "transformers_version": "4.43.0.dev0", "use_cache": true, "vocab_size": 128256})";

// As transformers 5 writes it: rope_parameters, architectures null.
const char* kLlamaV5 = R"({
  "architectures": null, "attention_bias": true, "bos_token_id": 1, "eos_token_id": 2,
  "head_dim": 16, "hidden_size": 64, "intermediate_size": 128, "max_position_embeddings": 2048,
  "mlp_bias": true, "model_type": "llama", "num_attention_heads": 4, "num_hidden_layers": 2,
  "num_key_value_heads": 2, "rms_norm_eps": 1e-06,
  "rope_parameters": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
    "original_max_position_embeddings": 8192, "rope_theta": 500000.0, "rope_type": "llama3"},
  "tie_word_embeddings": false, "transformers_version": "5.24.0", "vocab_size": 100})";

// Qwen3-0.6B: head_dim 128 while hidden/heads is 64; tied head.
const char* kQwen3 = R"({
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "bos_token_id": 151643,
  "eos_token_id": 151645, "head_dim": 128, "hidden_size": 1024, "intermediate_size": 3072,
  "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
  "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
  "tie_word_embeddings": true, "use_sliding_window": false, "vocab_size": 151936})";

// Qwen2.5-7B: sliding_window given but use_sliding_window false.
const char* kQwen25 = R"({
  "architectures": ["Qwen2ForCausalLM"], "bos_token_id": 151643, "eos_token_id": 151643,
  "hidden_size": 3584, "intermediate_size": 18944, "max_position_embeddings": 131072,
  "max_window_layers": 28, "model_type": "qwen2", "num_attention_heads": 28,
  "num_hidden_layers": 28, "num_key_value_heads": 4, "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0, "sliding_window": 131072, "tie_word_embeddings": false,
  "use_sliding_window": false, "vocab_size": 152064})";

// Mistral-7B-v0.1: a 4096-token sliding window.
const char* kMistral = R"({
  "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2,
  "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 32768,
  "model_type": "mistral", "num_attention_heads": 32, "num_hidden_layers": 32,
  "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
  "sliding_window": 4096, "tie_word_embeddings": false, "vocab_size": 32000})";

std::string edit(const char* base, const std::function<void(json&)>& f) {
  json j = json::parse(base);
  f(j);
  return j.dump();
}

// parse must throw an sf::Error whose message holds every one of `parts`.
void expect_error(const std::string& text, const std::vector<std::string>& parts) {
  try {
    parse_model_spec(text, "/ckpt/config.json");
    FAIL() << "no error for " << text;
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const auto& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << "message lacks '" << p << "': " << msg;
  }
}

TEST(ModelSpec, Llama31WithLlama3RopeScaling) {
  const ModelSpec s = parse_model_spec(kLlama31, "config.json");
  EXPECT_EQ(s.arch, Arch::kLlama);
  EXPECT_EQ(s.arch_name, "LlamaForCausalLM");
  EXPECT_EQ(s.hidden, 4096);
  EXPECT_EQ(s.layers, 32);
  EXPECT_EQ(s.heads, 32);
  EXPECT_EQ(s.kv_heads, 8);
  EXPECT_EQ(s.head_dim, 128);
  EXPECT_EQ(s.intermediate, 14336);
  EXPECT_EQ(s.vocab, 128256);
  EXPECT_EQ(s.max_position_embeddings, 131072);
  EXPECT_DOUBLE_EQ(s.rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(s.rope_theta, 500000.0);
  EXPECT_EQ(s.rope_scaling.type, RopeScaling::Type::kLlama3);
  EXPECT_DOUBLE_EQ(s.rope_scaling.factor, 8.0);
  EXPECT_DOUBLE_EQ(s.rope_scaling.low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(s.rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(s.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_FALSE(s.attention_bias || s.o_bias || s.mlp_bias || s.qk_norm || s.tie_word_embeddings);
  EXPECT_FALSE(s.sliding_window);
  EXPECT_EQ(s.bos_token_id, 128000);
  EXPECT_EQ(s.eos_token_id, 128001);          // the first of the list
  EXPECT_EQ(parameter_count(s), 8030261248);  // transformers' count for Llama-3.1-8B
  // The older "type" spelling of rope_scaling is accepted too.
  const ModelSpec t = parse_model_spec(edit(kLlama31,
                                            [](json& j) {
                                              j["rope_scaling"].erase("rope_type");
                                              j["rope_scaling"]["type"] = "llama3";
                                            }),
                                       "c");
  EXPECT_EQ(t.rope_scaling.type, RopeScaling::Type::kLlama3);
}

TEST(ModelSpec, TransformersV5RopeParametersAndBiases) {
  const ModelSpec s = parse_model_spec(kLlamaV5, "config.json");
  EXPECT_EQ(s.arch, Arch::kLlama);  // from model_type: architectures is null
  EXPECT_DOUBLE_EQ(s.rope_theta, 500000.0);
  EXPECT_EQ(s.rope_scaling.type, RopeScaling::Type::kLlama3);
  EXPECT_TRUE(s.attention_bias && s.o_bias && s.mlp_bias);
  const auto t = layer_tensors(s, 1);
  EXPECT_EQ(t[size_t(LayerTensor::kOBias)].name, "model.layers.1.self_attn.o_proj.bias");
  EXPECT_TRUE(t[size_t(LayerTensor::kOBias)].present);
  EXPECT_TRUE(t[size_t(LayerTensor::kDownBias)].present);
  EXPECT_EQ(t[size_t(LayerTensor::kDownBias)].shape, std::vector<int64_t>{64});
  EXPECT_FALSE(t[size_t(LayerTensor::kQNorm)].present);
  const ModelSpec d = parse_model_spec(
      edit(kLlamaV5,
           [](json& j) {
             j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1234.0}};
           }),
      "c");
  EXPECT_EQ(d.rope_scaling.type, RopeScaling::Type::kNone);
  EXPECT_DOUBLE_EQ(d.rope_theta, 1234.0);
}

TEST(ModelSpec, Qwen3HeadDimApartFromHiddenOverHeads) {
  const ModelSpec s = parse_model_spec(kQwen3, "config.json");
  EXPECT_EQ(s.arch, Arch::kQwen3);
  EXPECT_EQ(s.head_dim, 128);
  EXPECT_TRUE(s.qk_norm);
  EXPECT_TRUE(s.tie_word_embeddings);
  EXPECT_FALSE(s.attention_bias || s.o_bias);
  EXPECT_FALSE(s.sliding_window);
  EXPECT_DOUBLE_EQ(s.rope_theta, 1e6);
  const auto t = layer_tensors(s, 0);
  EXPECT_EQ(t[size_t(LayerTensor::kQ)].shape, (std::vector<int64_t>{16 * 128, 1024}));
  EXPECT_EQ(t[size_t(LayerTensor::kK)].shape, (std::vector<int64_t>{8 * 128, 1024}));
  EXPECT_EQ(t[size_t(LayerTensor::kO)].shape, (std::vector<int64_t>{1024, 16 * 128}));
  EXPECT_EQ(t[size_t(LayerTensor::kQNorm)].name, "model.layers.0.self_attn.q_norm.weight");
  EXPECT_EQ(t[size_t(LayerTensor::kKNorm)].shape, std::vector<int64_t>{128});
  EXPECT_TRUE(t[size_t(LayerTensor::kKNorm)].present);
  EXPECT_FALSE(outer_tensors(s)[size_t(OuterTensor::kLmHead)].present);
  EXPECT_EQ(parameter_count(s), 596049920);  // Qwen3-0.6B per transformers
  // attention_bias on Qwen3 adds q/k/v and o biases.
  const ModelSpec b =
      parse_model_spec(edit(kQwen3, [](json& j) { j["attention_bias"] = true; }), "c");
  EXPECT_TRUE(b.attention_bias && b.o_bias);
}

TEST(ModelSpec, Qwen2BiasesAndSlidingWindowFlag) {
  const ModelSpec s = parse_model_spec(kQwen25, "config.json");
  EXPECT_EQ(s.arch, Arch::kQwen2);
  EXPECT_TRUE(s.attention_bias);
  EXPECT_FALSE(s.o_bias);
  EXPECT_FALSE(s.sliding_window);  // use_sliding_window false
  const auto t = layer_tensors(s, 27);
  EXPECT_TRUE(t[size_t(LayerTensor::kQBias)].present);
  EXPECT_EQ(t[size_t(LayerTensor::kVBias)].shape, std::vector<int64_t>{4 * 128});
  EXPECT_FALSE(t[size_t(LayerTensor::kOBias)].present);
  EXPECT_EQ(parameter_count(s), 7615616512);  // Qwen2.5-7B per transformers
  // Enabled, with layers past max_window_layers: the window applies.
  const ModelSpec w = parse_model_spec(edit(kQwen25,
                                            [](json& j) {
                                              j["use_sliding_window"] = true;
                                              j["sliding_window"] = 4096;
                                              j["max_window_layers"] = 21;
                                            }),
                                       "c");
  ASSERT_TRUE(w.sliding_window);
  EXPECT_EQ(*w.sliding_window, 4096);
  // Enabled but max_window_layers covers every layer: no layer uses it.
  const ModelSpec n =
      parse_model_spec(edit(kQwen25, [](json& j) { j["use_sliding_window"] = true; }), "c");
  EXPECT_FALSE(n.sliding_window);
  EXPECT_THROW(
      parse_model_spec(edit(kQwen25, [](json& j) { j["use_sliding_window"] = "no"; }), "c"), Error);
}

TEST(ModelSpec, MistralSlidingWindow) {
  const ModelSpec s = parse_model_spec(kMistral, "config.json");
  EXPECT_EQ(s.arch, Arch::kMistral);
  ASSERT_TRUE(s.sliding_window);
  EXPECT_EQ(*s.sliding_window, 4096);
  EXPECT_FALSE(s.attention_bias || s.o_bias || s.mlp_bias || s.qk_norm);
  EXPECT_EQ(parameter_count(s), 7241732096);  // Mistral-7B per transformers
  const ModelSpec n = parse_model_spec(edit(kMistral,
                                            [](json& j) {
                                              j["sliding_window"] = nullptr;
                                              j["head_dim"] =
                                                  nullptr;  // null head_dim means hidden/heads
                                            }),
                                       "c");
  EXPECT_FALSE(n.sliding_window);
  EXPECT_EQ(n.head_dim, 128);
  // Mistral-Nemo: head_dim 128 with hidden 5120 / 32 heads.
  const ModelSpec nemo = parse_model_spec(edit(kMistral,
                                               [](json& j) {
                                                 j["hidden_size"] = 5120;
                                                 j["head_dim"] = 128;
                                               }),
                                          "c");
  EXPECT_EQ(nemo.head_dim, 128);
  EXPECT_EQ(layer_tensors(nemo, 0)[size_t(LayerTensor::kO)].shape,
            (std::vector<int64_t>{5120, 4096}));
}

TEST(ModelSpec, OuterTensorsAndDefaults) {
  const ModelSpec s = parse_model_spec(edit(kMistral,
                                            [](json& j) {
                                              j.erase("architectures");  // model_type decides
                                              j.erase("num_key_value_heads");
                                              j.erase("rope_theta");
                                              j.erase("bos_token_id");
                                            }),
                                       "c");
  EXPECT_EQ(s.arch, Arch::kMistral);
  EXPECT_EQ(s.kv_heads, 32);
  EXPECT_DOUBLE_EQ(s.rope_theta, 10000.0);
  EXPECT_EQ(s.bos_token_id, -1);
  const auto o = outer_tensors(s);
  EXPECT_EQ(o[size_t(OuterTensor::kEmbed)].name, "model.embed_tokens.weight");
  EXPECT_EQ(o[size_t(OuterTensor::kEmbed)].shape, (std::vector<int64_t>{32000, 4096}));
  EXPECT_EQ(o[size_t(OuterTensor::kFinalNorm)].name, "model.norm.weight");
  EXPECT_EQ(o[size_t(OuterTensor::kLmHead)].name, "lm_head.weight");
  EXPECT_TRUE(o[size_t(OuterTensor::kLmHead)].present);
  EXPECT_THROW(layer_tensors(s, 32), Error);
  EXPECT_STREQ(arch_def(Arch::kQwen2).class_name, "Qwen2ForCausalLM");
}

TEST(ModelSpec, BadInputsNameFileAndKey) {
  expect_error("{not json", {"/ckpt/config.json", "JSON"});
  expect_error("[1]", {"/ckpt/config.json", "object"});
  expect_error(edit(kLlama31, [](json& j) { j.erase("hidden_size"); }),
               {"/ckpt/config.json", "'hidden_size'", "missing"});
  expect_error(edit(kLlama31, [](json& j) { j.erase("vocab_size"); }), {"'vocab_size'"});
  expect_error(edit(kLlama31, [](json& j) { j["num_hidden_layers"] = "32"; }),
               {"/ckpt/config.json", "'num_hidden_layers'", "integer"});
  expect_error(edit(kLlama31, [](json& j) { j["rms_norm_eps"] = "1e-5"; }),
               {"'rms_norm_eps'", "number"});
  expect_error(edit(kLlama31, [](json& j) { j["tie_word_embeddings"] = 0; }),
               {"'tie_word_embeddings'"});
  expect_error(edit(kLlama31, [](json& j) { j["intermediate_size"] = 0; }),
               {"'intermediate_size'", "positive"});
  expect_error(edit(kLlama31, [](json& j) { j["rope_scaling"] = 3; }), {"'rope_scaling'"});
  expect_error(edit(kLlama31, [](json& j) { j["rope_scaling"].erase("factor"); }),
               {"'rope_scaling.factor'"});
  expect_error(edit(kLlama31, [](json& j) { j["eos_token_id"] = "x"; }), {"'eos_token_id'"});
  expect_error(edit(kLlama31, [](json& j) { j["architectures"] = {"GemmaForCausalLM"}; }),
               {"/ckpt/config.json", "GemmaForCausalLM", "LlamaForCausalLM", "MistralForCausalLM",
                "Qwen2ForCausalLM", "Qwen3ForCausalLM"});
  expect_error(edit(kLlama31,
                    [](json& j) {
                      j.erase("architectures");
                      j["model_type"] = "phi3";
                    }),
               {"phi3", "Qwen3ForCausalLM"});
  expect_error(edit(kLlama31, [](json& j) { j["architectures"] = "LlamaForCausalLM"; }),
               {"'architectures'"});
  for (const char* type : {"linear", "dynamic", "yarn", "longrope"}) {
    expect_error(edit(kLlama31, [&](json& j) { j["rope_scaling"]["rope_type"] = type; }),
                 {"/ckpt/config.json", type, "default and llama3"});
    expect_error(edit(kLlamaV5, [&](json& j) { j["rope_parameters"]["rope_type"] = type; }),
                 {"'rope_parameters'", type});
  }
  expect_error(edit(kLlama31, [](json& j) { j["num_key_value_heads"] = 7; }),
               {"/ckpt/config.json", "not divisible", "num_key_value_heads"});
  expect_error(edit(kLlama31, [](json& j) { j["num_attention_heads"] = 30; }),
               {"hidden_size", "num_attention_heads"});
  expect_error(edit(kLlama31, [](json& j) { j["head_dim"] = 127; }), {"head_dim", "odd"});
  expect_error(edit(kMistral, [](json& j) { j["sliding_window"] = -5; }), {"sliding_window"});
  // What the engine does not implement is refused, never trained differently.
  expect_error(edit(kLlama31, [](json& j) { j["hidden_act"] = "gelu"; }),
               {"/ckpt/config.json", "hidden_act", "gelu", "silu"});
  expect_error(edit(kLlama31, [](json& j) { j["attention_dropout"] = 0.1; }),
               {"/ckpt/config.json", "attention_dropout", "set it to 0.0"});
  EXPECT_NO_THROW(parse_model_spec(edit(kLlama31, [](json& j) { j["hidden_act"] = "swish"; }),
                                   "/ckpt/config.json"));
  expect_error(edit(kLlama31, [](json& j) { j["hidden_size"] = 1e30; }), {"'hidden_size'"});
}

}  // namespace
}  // namespace sf
