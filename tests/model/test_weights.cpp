// Tests: checkpoint ↔ ModelSpec checks (missing, unexpected, shape, NaN, tied head) and the
// save_hf_checkpoint → load round trip for each architecture.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/weights.h"

namespace sf {
namespace {
namespace fs = std::filesystem;
using json = nlohmann::json;

json tiny_config(const std::string& arch, bool tied) {
  json j = {{"architectures", {arch}},
            {"hidden_size", 32},
            {"num_hidden_layers", 2},
            {"num_attention_heads", 4},
            {"num_key_value_heads", 2},
            {"intermediate_size", 48},
            {"vocab_size", 40},
            {"rms_norm_eps", 1e-6},
            {"rope_theta", 10000.0},
            {"tie_word_embeddings", tied},
            {"max_position_embeddings", 128}};
  if (arch == "Qwen3ForCausalLM") j["head_dim"] = 16;  // apart from hidden/heads = 8
  if (arch == "LlamaForCausalLM") j["attention_bias"] = j["mlp_bias"] = true;
  if (arch == "MistralForCausalLM") j["sliding_window"] = nullptr;
  if (arch == "Qwen2ForCausalLM") j["model_type"] = "qwen2";
  return j;
}

struct Weights {
  std::map<std::string, std::vector<float>> data;
  std::vector<TensorToWrite> list;
};

Weights make_weights(const ModelSpec& spec) {
  Weights w;
  float seed = 0.1f;
  for (const TensorDesc& d : expected_tensors(spec)) {
    int64_t n = 1;
    for (int64_t x : d.shape) n *= x;
    auto& v = w.data[d.name];
    v.resize(size_t(n));
    for (int64_t i = 0; i < n; ++i) v[size_t(i)] = 0.05f * std::sin(seed + 0.3f * float(i));
    seed += 1.0f;
  }
  for (const TensorDesc& d : expected_tensors(spec))
    w.list.push_back({d.name, d.shape, w.data[d.name].data()});
  return w;
}

class WeightsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sf_w_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    config_ = tiny_config("LlamaForCausalLM", false);
    spec_ = parse_model_spec(config_.dump(), "config.json");
    w_ = make_weights(spec_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::vector<TensorToWrite>& ts) {
    write_safetensors(dir_, ts, {.dtype = DType::kF32});
  }
  void expect_check_error(const ModelSpec& spec, const std::vector<std::string>& parts) {
    try {
      check_checkpoint_tensors(SafetensorsReader(dir_), spec);
      FAIL() << "no error";
    } catch (const Error& e) {
      for (const auto& p : parts)
        EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
            << "message lacks '" << p << "': " << e.what();
    }
  }
  fs::path dir_;
  json config_;
  ModelSpec spec_;
  Weights w_;
};

TEST_F(WeightsTest, ExpectedTensorsInModelOrder) {
  const auto e = expected_tensors(spec_);
  ASSERT_EQ(e.size(), 3u + 2u * 16u);  // embed, norm, head + 16 per layer with all biases
  EXPECT_EQ(e.front().name, "model.embed_tokens.weight");
  EXPECT_EQ(e[1].name, "model.layers.0.input_layernorm.weight");
  EXPECT_EQ(e.back().name, "lm_head.weight");
  EXPECT_EQ(shape_str({4, 5}), "[4, 5]");
}

TEST_F(WeightsTest, RoundTripEveryArchitecture) {
  for (const char* arch :
       {"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM"}) {
    for (bool tied : {false, true}) {
      SCOPED_TRACE(std::string(arch) + (tied ? " tied" : ""));
      const fs::path out = dir_ / (std::string(arch) + (tied ? "_tied" : ""));
      const json cfg = tiny_config(arch, tied);
      const ModelSpec spec = parse_model_spec(cfg.dump(), "c");
      Weights w = make_weights(spec);
      if (tied) w.list.push_back({"lm_head.weight", {40, 32}, w.data.begin()->second.data()});
      // A small shard size exercises the index; BF16 as training saves.
      save_hf_checkpoint(out, spec, cfg.dump(2), w.list, DType::kBF16, 4096);
      EXPECT_TRUE(fs::exists(out / "model.safetensors.index.json"));
      EXPECT_EQ(load_model_spec(out).hidden, 32);
      SafetensorsReader r(out);
      check_checkpoint_tensors(r, spec);
      EXPECT_FALSE(r.contains("lm_head.weight") && tied);
      for (const TensorDesc& d : expected_tensors(spec)) {
        const auto& want = w.data[d.name];
        std::vector<float> got(want.size());
        load_tensor_f32(r, d, got.data());
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_EQ(got[i], bf16_to_f32(f32_to_bf16(want[i]))) << d.name << " " << i;
      }
      for (const auto& e : fs::directory_iterator(out))
        EXPECT_EQ(e.path().string().find(".tmp-"), std::string::npos) << e.path();
    }
  }
}

TEST_F(WeightsTest, ShapeMismatchNamesBothShapes) {
  std::vector<float> big(48 * 40);
  for (auto& t : w_.list)
    if (t.name == "model.layers.1.mlp.up_proj.weight") t = {t.name, {40, 48}, big.data()};
  write(w_.list);
  expect_check_error(spec_, {"model.layers.1.mlp.up_proj.weight", "model.safetensors", "[40, 48]",
                             "[48, 32]", "config.json"});
  SafetensorsReader r(dir_);
  std::vector<float> dst(48 * 32);
  TensorDesc d = layer_tensors(spec_, 1)[size_t(LayerTensor::kUp)];
  EXPECT_THROW(load_tensor_f32(r, d, dst.data()), Error);
}

TEST_F(WeightsTest, NonFiniteValueNamesTheFirstBadIndex) {
  auto& v = w_.data["model.layers.0.self_attn.q_proj.weight"];
  v[700] = std::numeric_limits<float>::infinity();
  v[517] = std::nanf("");
  write(w_.list);
  SafetensorsReader r(dir_);
  check_checkpoint_tensors(r, spec_);  // presence and shapes are fine
  std::vector<float> dst(v.size());
  try {
    load_tensor_f32(r, layer_tensors(spec_, 0)[size_t(LayerTensor::kQ)], dst.data());
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("model.layers.0.self_attn.q_proj.weight"), std::string::npos) << msg;
    EXPECT_NE(msg.find("element 517"), std::string::npos) << msg;
    EXPECT_NE(msg.find("model.safetensors"), std::string::npos) << msg;
  }
}

TEST_F(WeightsTest, MissingTensor) {
  auto ts = w_.list;
  ts.erase(ts.begin() + 5);
  const std::string gone = w_.list[5].name;
  write(ts);
  expect_check_error(spec_, {gone, dir_.string(), "lacks 1 tensor"});
  std::vector<float> dst(4096);
  TensorDesc d{gone, w_.list[5].shape, true};
  try {
    load_tensor_f32(SafetensorsReader(dir_), d, dst.data());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(gone), std::string::npos);
    EXPECT_NE(std::string(e.what()).find(dir_.string()), std::string::npos);
  }
}

TEST_F(WeightsTest, UntiedConfigWithoutHeadHintsAtTying) {
  auto ts = w_.list;
  ts.pop_back();  // lm_head.weight
  write(ts);
  expect_check_error(spec_, {"lm_head.weight", "tie_word_embeddings"});
}

TEST_F(WeightsTest, UnexpectedTensorsAreListed) {
  auto ts = w_.list;
  std::vector<float> x(4);
  for (int i = 0; i < 7; ++i)
    ts.push_back({"model.layers.9.extra" + std::to_string(i), {4}, x.data()});
  ts.push_back({"model.layers.0.self_attn.rotary_emb.inv_freq", {4}, x.data()});  // harmless
  write(ts);
  expect_check_error(spec_, {"7 tensor(s)", "model.layers.9.extra0", "and 2 more"});
  // A config with fewer layers than the weights: the extra layer is reported.
  write(w_.list);
  json fewer = config_;
  fewer["num_hidden_layers"] = 1;
  expect_check_error(parse_model_spec(fewer.dump(), "c"), {"model.layers.1."});
  // A bias-free config against weights with biases.
  json nobias = config_;
  nobias["attention_bias"] = false;
  expect_check_error(parse_model_spec(nobias.dump(), "c"), {"self_attn.q_proj.bias"});
}

TEST_F(WeightsTest, TiedHeadAcceptedOnlyWhenEqualToEmbedding) {
  json tied = config_;
  tied["tie_word_embeddings"] = true;
  const ModelSpec spec = parse_model_spec(tied.dump(), "c");
  auto ts = w_.list;
  ts.back().data = w_.data["model.embed_tokens.weight"].data();  // head == embedding
  write(ts);
  check_checkpoint_tensors(SafetensorsReader(dir_), spec);
  write(w_.list);  // a distinct head
  expect_check_error(spec, {"lm_head.weight", "tie_word_embeddings"});
}

TEST_F(WeightsTest, SaveRejectsInconsistentInput) {
  auto ts = w_.list;
  ts.pop_back();
  EXPECT_THROW(save_hf_checkpoint(dir_ / "a", spec_, config_.dump(), ts), Error);
  ts = w_.list;
  std::vector<float> x(4);
  ts.push_back({"extra", {4}, x.data()});
  EXPECT_THROW(save_hf_checkpoint(dir_ / "b", spec_, config_.dump(), ts), Error);
  json other = config_;
  other["hidden_size"] = 64;
  EXPECT_THROW(save_hf_checkpoint(dir_ / "c", spec_, other.dump(), w_.list), Error);
  EXPECT_FALSE(fs::exists(dir_ / "a") || fs::exists(dir_ / "b") || fs::exists(dir_ / "c"));
}

}  // namespace
}  // namespace sf
