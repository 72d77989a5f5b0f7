// config.json values the engine does not implement, or that would give NaN, are refused naming
// the key; init-model options are validated before any is used (issue 14).
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/init.h"
#include "model/spec.h"

namespace {

nlohmann::json base_config() {
  sf::TinyModelOptions o;
  return nlohmann::json::parse(sf::tiny_model_config_json(o));
}

std::string spec_error(const nlohmann::json& j) {
  try {
    sf::parse_model_spec(j.dump(), "m/config.json");
  } catch (const sf::Error& e) {
    return e.what();
  }
  return "";
}

std::string init_error(sf::TinyModelOptions o) {
  try {
    sf::tiny_model_config_json(o);
  } catch (const sf::Error& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_HAS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << text

}  // namespace

TEST(SpecHostile, BaseConfigParses) { EXPECT_EQ(spec_error(base_config()), ""); }

TEST(SpecHostile, NegativePadTokenIdIsRefused) {
  auto j = base_config();
  j["pad_token_id"] = -1;
  std::string e = spec_error(j);
  EXPECT_HAS(e, "m/config.json: 'pad_token_id' is -1");
  j["pad_token_id"] = nullptr;
  EXPECT_EQ(spec_error(j), "");
}

TEST(SpecHostile, PartialRotaryFactorIsRefused) {
  auto j = base_config();
  j["partial_rotary_factor"] = 0.5;
  EXPECT_HAS(spec_error(j), "m/config.json: 'partial_rotary_factor' is 0.5");
  j["partial_rotary_factor"] = 1.0;
  EXPECT_EQ(spec_error(j), "");
  j.erase("partial_rotary_factor");
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0},
                          {"partial_rotary_factor", 0.25}};
  EXPECT_HAS(spec_error(j), "'rope_parameters.partial_rotary_factor' is 0.25");
}

TEST(SpecHostile, HiddenActNullOrOtherIsRefused) {
  auto j = base_config();
  j["hidden_act"] = nullptr;
  EXPECT_HAS(spec_error(j), "m/config.json: 'hidden_act' is null");
  j["hidden_act"] = "gelu";
  EXPECT_HAS(spec_error(j), "hidden_act \"gelu\" is not supported");
}

TEST(SpecHostile, RopeThetaGivingNonFiniteFrequenciesIsRefused) {
  auto j = base_config();
  j["rope_theta"] = 5e-324;
  EXPECT_HAS(spec_error(j), "m/config.json: 'rope_theta' 4.94066e-324 gives RoPE frequency");
  j["rope_theta"] = 1e308;  // frequencies underflow to 0 in float
  EXPECT_HAS(spec_error(j), "not a positive finite float");
  j["rope_theta"] = -1.0;
  EXPECT_HAS(spec_error(j), "'rope_theta' is -1");
  j["rope_theta"] = 500000.0;
  EXPECT_EQ(spec_error(j), "");
  j["rms_norm_eps"] = 1e-50;
  EXPECT_HAS(spec_error(j), "'rms_norm_eps' 1e-50 is 0 in float");
}

TEST(SpecHostile, DeeplyNestedConfigIsAnError) {
  std::string text = base_config().dump();
  text.insert(text.size() - 1, ",\"x\":" + std::string(100000, '[') + std::string(100000, ']'));
  try {
    sf::parse_model_spec(text, "m/config.json");
    ADD_FAILURE();
  } catch (const sf::Error& e) {
    EXPECT_HAS(e.what(), "m/config.json: JSON nested deeper than 128 levels");
  }
}

TEST(InitModelOptions, EveryFieldIsValidatedBeforeUse) {
  sf::TinyModelOptions o;
  o.heads = 0;  // used to divide hidden by zero (SIGFPE)
  EXPECT_HAS(init_error(o), "init-model: --heads is 0; it must be positive");
  o = {};
  o.kv_heads = 3;
  EXPECT_HAS(init_error(o), "--heads 4 is not divisible by --kv-heads 3");
  o = {};
  o.hidden = 130;
  EXPECT_HAS(init_error(o), "--hidden 130 is not divisible by --heads 4");
  o = {};
  o.vocab = int64_t(1) << 40;
  EXPECT_HAS(init_error(o), "--vocab is 1099511627776; it must stay below 2^24");
  o = {};
  o.layers = -3;
  EXPECT_HAS(init_error(o), "--layers is -3");
  o = {};
  o.head_dim = 7;
  EXPECT_HAS(init_error(o), "head dimension 7 is odd");
  o = {};
  o.rope_theta = 0;
  EXPECT_HAS(init_error(o), "rope-theta");
  EXPECT_EQ(init_error(sf::TinyModelOptions{}), "");
}

TEST(SpecHostile, FolderInPlaceOfConfigJsonNamesIt) {
  const auto dir = std::filesystem::temp_directory_path() / "sf_spec_hostile_folder";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "config.json");
  try {
    sf::load_model_spec(dir);
    ADD_FAILURE() << "no error";
  } catch (const sf::Error& e) {
    EXPECT_HAS(e.what(), (dir / "config.json").string() + " is a folder");
  }
  std::filesystem::remove_all(dir);
}
