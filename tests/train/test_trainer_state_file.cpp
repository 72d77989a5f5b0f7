// The saved training state a resume reads (trainer_state.json and the data position in it) on
// corrupt or hostile text (issue 14; the fuzz target fuzz_train_state runs the same path): each
// refusal names the file and the field, nothing escapes as a yaml-cpp or nlohmann exception,
// and a data position whose epoch would overflow is refused.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "train/data.h"
#include "train/trainer_state_file.h"
#include "train_test_util.h"

namespace sf {
namespace {

using namespace sf::testing;

std::vector<Sample> five_samples() {
  std::vector<Sample> s;
  for (int32_t i = 0; i < 5; ++i) s.push_back(Sample{{1, 2 + i, 3}, {-100, 2 + i, 3}});
  return s;
}

nlohmann::json valid_state(const std::string& batcher) {
  return {{"format", kTrainerStateFormat},
          {"global_step", 2},
          {"max_steps", 6},
          {"epoch", 0.5},
          {"optimizer_steps_done", 2},
          {"data_position", batcher},
          {"training_args", "learning_rate: 0.001\nseed: 42\n"}};
}

std::string parse_error(const nlohmann::json& j) {
  return error_text([&] { parse_trainer_state(j.dump(), "ck/trainer_state.json"); });
}

TEST(TrainerStateFile, ValidStateParses) {
  Batcher b(five_samples(), 2, true, 7);
  b.next();
  const TrainerState st = parse_trainer_state(valid_state(b.save_state()).dump(), "x.json");
  EXPECT_EQ(st.global_step, 2);
  EXPECT_EQ(st.total_steps, 6);
  EXPECT_EQ(st.epoch, 0.5);
  Batcher again(five_samples(), 2, true, 7);
  again.restore_state(st.batcher);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(again.next().ids, b.next().ids) << k;
}

TEST(TrainerStateFile, CorruptFieldsAreRefusedNamingTheFile) {
  const nlohmann::json ok = valid_state("batcher-v2 0 5 1 0 5 0 1 2 3 4 0");
  struct Case {
    const char* field;
    nlohmann::json value;
    const char* want;
  };
  const Case cases[] = {
      {"format", "other-format-9", "is not slideformer-trainer-state-1"},
      {"global_step", "two", "\"global_step\" is \"two\", not an integer of 64 bits"},
      {"global_step", 7, "inconsistent step counts (global_step 7"},  // past max_steps 6
      {"optimizer_steps_done", 3, "inconsistent step counts"},
      {"global_step", 0, "inconsistent step counts"},
      // Out of int64 range: nlohmann's get<int64_t>() would convert with undefined behaviour
      // (fuzz_train_state's finding: "max_steps": 5.55e108).
      {"max_steps", 5.555555e108, "\"max_steps\" is 5.555555e+108, not an integer of 64 bits"},
      {"max_steps", 18446744073709551615ULL, "\"max_steps\" is 18446744073709551615, not an"},
      {"optimizer_steps_done", 2.0, "\"optimizer_steps_done\" is 2.0, not an integer"},
      {"epoch", -1.0, "epoch -1 is not a number ≥ 0"},
      {"data_position", 5, "a field is missing or of the wrong type"},
      {"training_args", nullptr, "a field is missing or of the wrong type"},
  };
  for (const Case& c : cases) {
    nlohmann::json j = ok;
    j[c.field] = c.value;
    if (std::string(c.field) == "global_step" && c.value.is_number())
      j["optimizer_steps_done"] = c.value;
    const std::string e = parse_error(j);
    EXPECT_NE(e.find("ck/trainer_state.json"), std::string::npos) << c.field << ": " << e;
    EXPECT_NE(e.find(c.want), std::string::npos) << c.field << ": " << e;
  }
  nlohmann::json missing = ok;
  missing.erase("max_steps");
  EXPECT_NE(parse_error(missing).find("key 'max_steps' not found"), std::string::npos);
  EXPECT_NE(parse_error(nlohmann::json::array({1, 2})).find("not a JSON object"),
            std::string::npos);
  // JSON nested past the readers' limit is refused before nlohmann recurses into it.
  const std::string deep =
      "{\"format\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  const std::string e = error_text([&] { parse_trainer_state(deep, "ck/trainer_state.json"); });
  EXPECT_NE(e.find("ck/trainer_state.json: JSON nested deeper than 128 levels"), std::string::npos)
      << e;
  EXPECT_NE(error_text([&] {
              parse_trainer_state("{\"format\": \"slide", "t.json");
            }).find("t.json: not valid JSON (truncated or corrupt checkpoint)"),
            std::string::npos);
}

// yaml-cpp throws for a list or map where a scalar is expected, and for a subscript of a
// scalar document: each is a difference that says the saved configuration is unreadable.
TEST(TrainerStateFile, UnreadableSavedConfigurationIsADifferenceNotACrash) {
  const TrainConfig now;
  for (const char* yaml : {"seed: [1, 2]\n", "learning_rate: {a: 1}\n", "- a\n- b\n",
                           "just a scalar\n", "seed: [unclosed\n"}) {
    std::string d;
    EXPECT_NO_THROW(d = resume_config_difference(yaml, now)) << yaml;
    EXPECT_NE(d.find("the saved configuration is not"), std::string::npos) << yaml << ": " << d;
  }
  EXPECT_NE(resume_config_difference("seed: 43\n", now).find("seed was '43'"), std::string::npos);
}

// The fuzz target's seed (tests/fuzz/corpus/train_state/seed_valid) is a valid state of the
// target's samples, so the fuzzer starts past the fingerprint check (same samples as
// tests/fuzz/entry_points.cpp).
TEST(TrainerStateFile, FuzzSeedRestoresOntoTheTargetsSamples) {
  const fs::path seed = fs::path(SF_SOURCE_DIR) / "tests/fuzz/corpus/train_state/seed_valid";
  const TrainerState st = parse_trainer_state(read_text(seed), seed);
  Batcher b(five_samples(), 2, true, 7);
  EXPECT_NO_THROW(b.restore_state(st.batcher));
  EXPECT_EQ(resume_config_difference(st.config_yaml, TrainConfig{}).find("not readable"),
            std::string::npos);
}

TEST(TrainerStateFile, DataPositionOfAnOverflowingEpochIsRefused) {
  Batcher b(five_samples(), 2, true, 7);
  std::string st = b.save_state();  // "batcher-v2 HASH 5 EPOCH CURSOR 5 ..."
  const size_t at = st.find(" 5 1 ");
  ASSERT_NE(at, std::string::npos) << st;
  st.replace(at, 5, " 5 9223372036854775807 ");
  const std::string e = error_text([&] { b.restore_state(st); });
  EXPECT_NE(e.find("the data position of the checkpoint is out of range (epoch "
                   "9223372036854775807"),
            std::string::npos)
      << e;
}

}  // namespace
}  // namespace sf
