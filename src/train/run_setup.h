// defines: sf::RunSetup, sf::make_run_setup, sf::weigh_plan — a run's backend and engine plan, made
// in the order a GPU budget needs: the plan first (the backend's scratch grows with the micro-batch
// M it picks), then the backend with workspaces for M tokens.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "engine/engine.h"
#include "engine/machine.h"
#include "engine/plan.h"
#include "train/config.h"
#include "train/data.h"

namespace sf {

struct RunSetup {
  std::unique_ptr<Backend> backend;
  EnginePlan plan;      // what the engine will allocate (it re-checks with the device's real use)
  PlanRequest request;  // what `plan` was made from (with the device's figures where CUDA)
  // Data parallel (request.devices > 1): devices 1 … N-1 and the reduction over all of them.
  std::vector<std::unique_ptr<Backend>> more;
  std::unique_ptr<Collective> collective;
  std::string devices_line;  // the GPUs, their PCI places and the reduction, for the log
};

// `name`: auto (CUDA when a GPU is visible) | cpu | cuda, with workspaces for steps of up to
// max_tokens tokens (no plan: commands that are not training runs).
std::unique_ptr<Backend> make_backend(const std::string& name, const ModelSpec& spec,
                                      int64_t max_tokens);

// A training run's plan request: the largest step of `batcher` and of the eval batches (their
// tokens, samples and longest sample), and the configuration's engine options. With gpus > 1 the
// batcher's steps hold every GPU's samples and the request is each GPU's: its share of them.
PlanRequest train_plan_request(const TrainConfig& c, const ModelSpec& spec, const Batcher& batcher,
                               const std::vector<Batch>& eval_batches);

// `backend`: auto | cpu | cuda. On CUDA without a budget the device's total memory is the budget.
// With request.devices > 1: CUDA devices 0 … N-1 (each planned with its own use) and NCCL where
// it loads (else the peer collective, said in devices_line); on the CPU, simulated devices.
RunSetup make_run_setup(const std::string& backend, PlanRequest request);

// The plan's own choices weighed by the prediction with this machine's constants (one GPU), in
// this order: the held share (weigh_held_share); smaller micro-batches for more of the model on
// the device (weigh_micro_batch), planned against the device as it is now — `device_used`, the
// backend's scratch for the plan's M included, in place of the reserve the plan counted before
// the backend existed — so the engine's plan fits as the weighing's did; with clipping, the m and
// v written later (weigh_moments_later). Returns what each weighed, a line each.
std::vector<std::string> weigh_plan(RunSetup& s, const MachineConstants& m, uint64_t device_used);

// The engine's options for the run `s` plans (after weigh_plan):
// the plan's choices fixed (M, the GPU-resident, held, later-written and NVMe units, the GPUs),
// so the engine plans again only the device, with its real use. `train` adds what is the run's
// own (the trace, the checkpoints' measured path, the initial weights); `plan` makes from these
// the plan `train` will allocate (engine_plan_request).
EngineOptions engine_options(const TrainConfig& c, const RunSetup& s);

// nvme_gds auto, with the checkpoints' GPUDirect slots planned in o: measures both paths in
// c.nvme_dir on s's backend (NvmeCheckpoints::measure_paths) and keeps the faster in
// o.nvme_gds, which sets the slots the engine plans. Returns the measurement and the choice for
// the log; empty where nothing was measured. `train` and `plan` both choose by it, so `plan`
// prints the plan `train` allocates.
std::string choose_checkpoint_path(EngineOptions& o, const TrainConfig& c, const RunSetup& s,
                                   const ModelSpec& spec);

// Device memory the CUDA libraries take when the backend is made (cuBLASLt and cuDNN handles,
// kernels' modules), beyond the scratch the planner counts: reserved in the plan before the
// backend exists; the engine then checks the budget against the device's real use.
constexpr uint64_t kCudaLibraryReserve = uint64_t(768) << 20;

}  // namespace sf
