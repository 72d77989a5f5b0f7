// defines: prepare_output_dir, SignalGuard, check_weights_usable — what keeps a run from losing
// its work or saving a bad model: the output directory checked before the first step, SIGINT and
// SIGTERM turned into "finish the step, save, stop", and the weights checked before every save.
#pragma once

#include <csignal>
#include <filesystem>
#include <ostream>

#include "engine/engine.h"
#include "train/config.h"

namespace sf {

// Refuses an output directory equal to the model directory, or one that holds a run (unless
// resuming, or overwrite_output_dir: then the old checkpoints, `latest` and metrics are
// removed); creates it and proves it writable; removes temporaries a killed run left.
void prepare_output_dir(const TrainConfig& c, bool resuming, std::ostream& log);

// Free space for what the run will write (the final model and, with save_steps, a checkpoint
// with its fp32 state); `bytes_needed` estimated by the caller.
void check_output_space(const std::filesystem::path& output, double bytes_needed);

// While alive, SIGINT and SIGTERM only set a flag (a second one stops at once).
class SignalGuard {
 public:
  SignalGuard();
  ~SignalGuard();
  SignalGuard(const SignalGuard&) = delete;
  SignalGuard& operator=(const SignalGuard&) = delete;
  int pending() const;  // the signal received, or 0
 private:
  struct sigaction old_int_, old_term_;
};

// Throws, naming the tensor, the element and its value, when a master weight is not finite or
// beyond ±1e6 (no trained LLM has such weights; it means the run diverged).
void check_weights_usable(Engine& engine, int64_t step, float lr);

}  // namespace sf
