// defines: sf::TrainSummary, sf::run_training, sf::make_backend — `slideformer train`: load a
// Hugging Face model directory, train on the engine for max_steps or num_train_epochs (one
// engine step per optimizer step, holding all its accumulated micro-batches), evaluate, save
// checkpoints that resume exactly, and the final HF model.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/spec.h"
#include "optim/schedule.h"
#include "train/config.h"

namespace sf {

struct TrainSummary {
  double first_loss = 0, last_loss = 0;
  int64_t steps = 0;        // optimizer steps done (counting a resumed run's earlier ones)
  int64_t total_steps = 0;  // of the schedule
  int64_t steps_per_epoch = 0;
  std::vector<double> losses;  // of the steps this call ran
  double eval_loss = -1;       // the final evaluation's (-1: none)
  int64_t eval_tokens = 0;
  int signal = 0;  // SIGINT/SIGTERM that stopped the run after a save, or 0
  std::filesystem::path last_checkpoint;
};

// `terminal`: the log is a terminal, so the progress line is updated in place.
TrainSummary run_training(const TrainConfig& config, std::ostream& log, bool terminal = false);


}  // namespace sf
