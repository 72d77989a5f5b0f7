// defines: sf::Progress — what a run shows and records: a progress line (updated in place on a
// terminal, else one line per logging_steps, the first and the last always) and
// OUTPUT/metrics.jsonl (one JSON object a line, transformers' names, full precision), and the
// same scalars to TensorBoard when asked (train/loss, train/grad_norm, ..., eval/loss).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <string>

#include "train/tensorboard.h"

namespace sf {

struct StepReport {
  int64_t step = 0;  // 1-based optimizer step
  double epoch = 0;  // fractional epochs done
  double loss = 0, grad_norm = 0;
  float learning_rate = 0;
  int64_t tokens = 0, valid_targets = 0;
  double seconds = 0;  // of this step
};

class Progress {
 public:
  // `metrics` empty: no metrics file. `first_step`: the step a resumed run starts after.
  Progress(std::ostream& log, bool terminal, int64_t logging_steps, int64_t total_steps,
           double total_epochs, const std::filesystem::path& metrics, int64_t first_step,
           TensorBoardWriter* tensorboard = nullptr);
  void step(const StepReport& r);
  void eval(int64_t step, double epoch, double loss, int64_t valid_targets);
  // A line of its own (the in-place line is ended first).
  void note(const std::string& line);
  void finish();

 private:
  void write_metrics(const std::string& json_line);
  std::ostream& log_;
  bool terminal_;
  int64_t logging_steps_, total_, first_step_;
  double total_epochs_;
  std::ofstream metrics_;
  TensorBoardWriter* tb_;
  std::filesystem::path metrics_path_;
  bool line_open_ = false;
  std::chrono::steady_clock::time_point start_;
};

std::string format_duration(double seconds);  // "1:02:03", "2:03"

}  // namespace sf
