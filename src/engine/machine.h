// defines: sf::MachineConstants, sf::measure_machine, sf::machine_constants — the rates a step's
// time is predicted from (engine/predict.h), measured on this machine through the backend the run
// will use: pinned H2D and D2H bandwidth, host memory bandwidth, CPU AdamW alone and while the
// copies run, and the model's own decoder layer (forward; recompute + backward) at the plan's
// micro-batch. Measured once per machine and shape, then read from a cache file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "backend/backend.h"
#include "model/spec.h"

namespace sf {

struct NvmeBandwidth;  // io/nvme_probe.h

struct MachineConstants {
  std::string key;     // what was measured: device, layer shape, micro-batch, sample length
  std::string device;  // the backend and its device
  std::string measured_at;  // UTC, ISO 8601
  double h2d_gbps = 0, d2h_gbps = 0;  // pinned ↔ device, 64 MiB copies (GB = 10^9 B)
  double host_gbps = 0;               // host memcpy (read + write bytes), the optimizer's threads
  double adam_params_per_s = 0;       // CPU AdamW (fp32 master, m, v; compute-dtype gradient)
  double adam_copy_params_per_s = 0;  // the same while an H2D and a D2H copy stream run
  // What those copies moved meanwhile, H2D + D2H bytes a second: with the AdamW's own bytes, what
  // the host's memory carried at once. Printed; the prediction's host-memory floor takes a pass
  // alone's rate instead, and only where this was measured (engine/predict.cpp, host_ceiling).
  double copy_beside_adam_gbps = 0;
  // The clipped update's two passes alone (AdamWWrite): the master alone, m and v alone (no Σ g²:
  // the device formed it before the gradient's D2H).
  double adam_master_params_per_s = 0, adam_moments_params_per_s = 0;
  // The model's decoder layer on `micro_tokens` tokens in samples of `sample_tokens`, seconds
  // per token: the forward, and the backward as the engine runs it (recompute, then backward).
  double layer_forward_s = 0, layer_backward_s = 0;
  double layer_tflops = 0;  // the layer's matmul FLOPs / its time (forward + recompute + backward)
  // The M those layer times were measured at (the key's; 0: not known, as in a replay): a plan
  // with smaller micro-batches runs the layer slower (engine/predict.h, micro_batch_cost).
  int64_t micro_tokens = 0;
  // The NVMe tier's disk (io/nvme_probe.h), where the run has one: measured in its directory or
  // given (plan --nvme-bandwidth); not part of the cached measurement.
  double nvme_read_gbps = 0, nvme_write_gbps = 0;
  double nvme_mixed_gbps = 0;  // both at once (NvmeBandwidth::mixed_gbps); 0: not measured
  MachineConstants with_disk(const NvmeBandwidth& disk) const;  // its rates set from `disk`
};

// The key of a measurement: the backend's device, the layer's shape, M and the sample length.
std::string machine_key(Backend& be, const ModelSpec& spec, int64_t micro_tokens,
                        int64_t sample_tokens);

// Measures every constant (a few seconds on the GPU machine; a tiny model's layer on the CPU
// backend in well under a second).
// How much the probe measures (tests take less).
struct ProbeSize {
  int64_t adam_params = 0;  // the AdamW probe's parameters (0: the default, 96 Mi)
  // Seconds the layer runs back to back before it is timed: a step keeps the GPU busy for
  // seconds, and under that load its clocks settle lower than a cold GPU's (time_layer).
  double layer_hot_s = 2.0;
};
MachineConstants measure_machine(Backend& be, const ModelSpec& spec, int64_t micro_tokens,
                                 int64_t sample_tokens, const ProbeSize& size = {});

// The model's layer 0 on M tokens in samples of S, as the engine runs it: the forward, and the
// recompute + backward (seconds each, the median of three), after the layer (forward, recompute,
// backward) has run back to back for `hot_s` seconds; `flops`: the matmul FLOPs of the three.
struct LayerTimes {
  double forward = 0, backward = 0, flops = 0;
};
LayerTimes time_layer(Backend& be, const ModelSpec& spec, int64_t M, int64_t S, double hot_s);

// The cache file's default place: $SLIDEFORMER_MACHINE_FILE, else
// $XDG_CACHE_HOME/slideformer/machine.json, else ~/.cache/slideformer/machine.json.
std::filesystem::path default_machine_file();

// The constants for this key from `file` when it holds them (and `remeasure` is false), else
// measured and added to the file (written atomically; a file that cannot be written is said in
// `note`, not an error). `note` says which of the two happened.
MachineConstants machine_constants(Backend& be, const ModelSpec& spec, int64_t micro_tokens,
                                   int64_t sample_tokens, const std::filesystem::path& file,
                                   bool remeasure, std::string* note, const ProbeSize& size = {});

// The cached constants for this key, or nullopt (no file, no entry, or an unreadable file).
std::optional<MachineConstants> cached_machine_constants(Backend& be, const ModelSpec& spec,
                                                         int64_t micro_tokens,
                                                         int64_t sample_tokens,
                                                         const std::filesystem::path& file);

// Several lines for `plan`.
std::string describe(const MachineConstants& m);

}  // namespace sf
