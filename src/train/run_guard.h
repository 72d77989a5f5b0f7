// defines: prepare_output_dir, prepare_trace_file, SignalGuard, check_weights_usable — what keeps a
// run from losing its work or saving a bad model: the output directory checked before the first
// step, SIGINT and SIGTERM turned into "finish the step, save, stop", and the weights checked
// before every save.
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
// Where --trace names a file: creates its directory and proves it writable (nothing when empty).
void prepare_trace_file(const std::filesystem::path& trace);

// The most the run has on disk in output_dir at once, in bytes: the final model in save_dtype
// and, with save_steps, the checkpoints that exist together (one per save up to
// save_total_limit, plus the one being written), each with its fp32 master weights and Adam
// moments (12 bytes a parameter) beside the weights; `side_bytes` (tokenizer and generation
// config copies) and 64 KiB of headers, configs and trainer state per directory, plus 2 %.
double output_bytes_needed(const TrainConfig& c, int64_t parameters, int64_t total_steps,
                           uint64_t side_bytes);

// Free space for what the run will write (output_bytes_needed), checked before the first step so
// that a full disk does not discard the training at its first save.
void check_output_space(const std::filesystem::path& output, double bytes_needed);
// Free space in nvme_dir for the NVMe tier's scratch file (`bytes_needed`: the plan's disk bytes
// and the bandwidth probe's), checked before anything is allocated; where output_dir is on the
// same file system, what the run writes there (`output_bytes`) counts too.
void check_nvme_space(const std::filesystem::path& nvme_dir, double bytes_needed,
                      const std::filesystem::path& output, double output_bytes);
// Tests: the free space check_output_space and check_nvme_space see (-1: the file system's).
void override_free_space_for_test(int64_t bytes);

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
