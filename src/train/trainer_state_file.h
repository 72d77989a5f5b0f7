// defines: sf::TrainerState, parse_trainer_state, read_trainer_state, resume_config_difference —
// the trainer_state.json of a training checkpoint (train_state.h writes it) and the check that a
// resume keeps the saved configuration. No engine here: the fuzz target of the saved training
// state (tests/fuzz, fuzz_train_state) links this file alone.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "train/config.h"

namespace sf {

struct TrainerState {
  int64_t global_step = 0;
  int64_t total_steps = 0;  // of the schedule
  double epoch = 0;         // fractional, as transformers logs it
  std::string batcher;      // Batcher::save_state()
  std::string config_yaml;  // config_to_yaml of the run
};

// The format tag written into trainer_state.json.
inline constexpr const char* kTrainerStateFormat = "slideformer-trainer-state-1";
inline constexpr const char* kTrainerStateFile = "trainer_state.json";

// The text of a trainer_state.json (`file` names it in errors). Refuses, naming the file and the
// field, what save_training_checkpoint cannot have written: invalid or too deep JSON, a missing
// field or one of the wrong type, a step count < 1 or beyond the schedule, an epoch that is not a
// finite number ≥ 0.
TrainerState parse_trainer_state(const std::string& text, const std::filesystem::path& file);

// parse_trainer_state of DIR/trainer_state.json (cheap: read first, so a resume that does not fit
// is refused before the tensors are read).
TrainerState read_trainer_state(const std::filesystem::path& dir);

// The options of the run that a resume must keep (those that change what is computed), compared
// between two effective configurations; "" when they agree, else what differs (an unreadable
// saved configuration is a difference, said so).
std::string resume_config_difference(const std::string& saved_yaml, const TrainConfig& now);

}  // namespace sf
