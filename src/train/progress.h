// defines: sf::Progress — what a run shows and records: a progress line (updated in place on a
// terminal, else one line per logging_steps, the first and the last always) and
// OUTPUT/metrics.jsonl (one JSON object a line, transformers' names, full precision), and the
// same scalars to TensorBoard when asked (train/loss, train/grad_norm, ..., eval/loss).
// Also sf::model_flops and sf::bf16_peak, the two halves of the line's MFU.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <ostream>
#include <string>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "engine/batch.h"
#include "model/spec.h"
#include "train/tensorboard.h"

namespace sf {

struct StepReport {
  int64_t step = 0;  // 1-based optimizer step
  double epoch = 0;  // fractional epochs done
  double loss = 0, grad_norm = 0;
  float learning_rate = 0;
  int64_t tokens = 0, valid_targets = 0;
  double seconds = 0;      // of this step
  double model_flops = 0;  // model_flops() of the step's batch; 0: no MFU
};

// The model FLOPs of one training step (forward and backward, no recompute — what MFU counts):
// 6·P per token for the matrix products, P every parameter but an untied embedding (a lookup),
// plus causal attention, 6·L·NH·D per token per visible key: 6·L·NH·D·Σ s² over the batch's
// samples of s tokens (with one length S for all, the usual 6·L·H·S per token).
double model_flops(const ModelSpec& spec, const Batch& batch);

// The device's dense bf16 peak (fp32 accumulation), in FLOP/s, and where the figure comes from.
struct PeakFlops {
  double flops = 0;  // 0: unknown — no MFU
  std::string source;
};
// From NVIDIA's datasheet figures for known GPU names (the longest matching name wins), else
// SMs × boost clock × the dense bf16 FLOPs an SM of that compute capability does a cycle.
PeakFlops bf16_peak(const CudaDeviceProperties& device);
// `tflops_override` > 0 wins; a CUDA backend ("cuda:N (...)") is looked up; the CPU has none.
PeakFlops bf16_peak(Backend& backend, double tflops_override);

class Progress {
 public:
  // `metrics` empty: no metrics file. `first_step`: the step a resumed run starts after.
  Progress(std::ostream& log, bool terminal, int64_t logging_steps, int64_t total_steps,
           double total_epochs, const std::filesystem::path& metrics, int64_t first_step,
           TensorBoardWriter* tensorboard = nullptr);
  // MFU against `peak_flops` (0: none) and device memory in use from `device_memory` (null, or
  // a total of 0, as on the CPU: none) in the progress line and metrics.jsonl.
  void set_device(double peak_flops, std::function<DeviceMemoryInfo()> device_memory);
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
  double peak_flops_ = 0;
  std::function<DeviceMemoryInfo()> device_memory_;
  std::chrono::steady_clock::time_point start_;
};

std::string format_duration(double seconds);  // "1:02:03", "2:03"

}  // namespace sf
