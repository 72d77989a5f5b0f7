// slideformer plan: the options of `train` (the same YAML), and what the run would take — the
// engine's plan (window, micro-batch, GPU-resident share, where every byte lives), the predicted
// device and host peaks against their budgets, and the step time predicted from this machine's
// measured constants (engine/machine.h, engine/predict.h). Allocates nothing of the plan.
#include <algorithm>
#include <iostream>

#include "cli/commands.h"
#include "cli/train_args.h"
#include "core/error.h"
#include "core/host_memory.h"
#include "engine/engine.h"
#include "engine/host_check.h"
#include "engine/machine.h"
#include "engine/predict.h"
#include "io/nvme_probe.h"
#include "model/spec.h"
#include "train/data.h"
#include "train/run_setup.h"
#include "train/samples.h"

namespace sf {
namespace fs = std::filesystem;

int cmd_plan(const std::vector<std::string>& argv) {
  // --remeasure is plan's own: measure the machine again even where the cache has it.
  std::vector<std::string> args;
  bool remeasure = false;
  for (const std::string& a : argv) {
    if (a == "--remeasure")
      remeasure = true;
    else
      args.push_back(a);
  }
  for (const std::string& a : args)
    if (a == "--help" || a == "-h")
      std::cout << "slideformer plan [run.yaml] [key=value ...] [--key value ...] [--remeasure]\n"
                   "  the options of train; gpu_memory and host_memory plan for another "
                   "machine's budgets; --remeasure measures this machine's constants again\n\n";
  TrainArgs a = parse_train_args(args, std::cout, /*for_plan=*/true);
  if (a.exit_now) return 0;
  const TrainConfig& c = a.config;

  const ModelSpec spec = load_model_spec(c.model_dir);
  RunSamples data = load_run_samples(c, spec, std::cout);
  Batcher batcher(std::move(data.train), c.batch_size * c.gpus, c.shuffle, c.seed,
                  c.packing ? c.batch_size * c.gpus * c.cutoff_len : 0, c.grad_accum);
  const std::vector<Batch> eval_batches = make_eval_batches(
      data.eval, (c.eval_batch_size > 0 ? c.eval_batch_size : c.batch_size) * c.gpus);
  PlanRequest req = train_plan_request(c, spec, batcher, eval_batches);
  // A disk's bandwidth alone plans the NVMe tier for another machine (no directory needed);
  // the layers it takes are those --host-memory alone leaves no room for.
  if (c.nvme_bandwidth > 0) req.nvme = true;
  if (req.nvme) req.host_limit = host_limit_for_plan(c.host_memory, /*also_available=*/false);
  RunSetup setup = make_run_setup(c.backend, req);
  // What the device holds once the backend exists (the context, its scratch and libraries'
  // handles) and what the libraries take later: what train's engine counts when it plans, taken
  // before the probe below runs.
  const uint64_t device_used = setup.backend->device_memory().planned();
  std::string note;
  const fs::path file = c.machine_file.empty() ? default_machine_file() : c.machine_file;
  MachineConstants m = machine_constants(*setup.backend, spec, setup.plan.micro_tokens,
                                         req.max_sample_tokens, file, remeasure, &note);
  // The NVMe tier's disk, given or measured in its directory: every prediction below needs it.
  std::string disk_line;
  if (setup.plan.nvme_disk > 0) {
    if (c.nvme_bandwidth > 0) {
      NvmeBandwidth given;  // one rate both ways; none for both at once
      given.read_gbps = given.write_gbps = c.nvme_bandwidth;
      m = m.with_disk(given);
      disk_line = str_cat("NVMe disk: ", c.nvme_bandwidth, " GB/s read and write (given)");
    } else {
      const NvmeBandwidth b = measure_nvme(c.nvme_dir, kNvmeProbeBytes, kNvmeProbeDepth);
      m = m.with_disk(b);
      disk_line = "NVMe disk: " + describe(b, c.nvme_dir);
    }
  }
  // The plan's own held share, M and later-written m and v where the prediction says they pay.
  std::vector<std::string> weighed;
  if (c.gpus == 1) weighed = weigh_plan(setup, m, device_used);
  // The plan `train` allocates: its engine plans the device again once the backend exists, with
  // the device's real use in place of the reserve planned before it; the other choices stay
  // this plan's.
  EngineOptions opt = engine_options(c, setup);
  const std::string ckpt_path_line = choose_checkpoint_path(opt, c, setup, spec);
  PlanRequest engine_req =
      engine_plan_request(opt, spec, setup.backend->compute_dtype(), device_used);
  // Planning for another machine: --host-memory alone, and a disk named by its bandwidth alone.
  engine_req.host_limit = setup.request.host_limit;
  engine_req.nvme = setup.request.nvme;
  const EnginePlan plan = make_plan(engine_req);
  std::cout << "model " << spec.arch_name << ": " << spec.layers << " layers, hidden "
            << spec.hidden << ", " << parameter_count(spec) << " parameters; steps of ≤ "
            << req.max_tokens << " tokens (≤ " << req.max_sequences
            << " samples, the longest " << req.max_sample_tokens << "); backend "
            << setup.backend->name() << "\n";
  if (!setup.devices_line.empty()) std::cout << "data parallel: " << setup.devices_line << "\n";
  std::cout << "plan: " << plan.describe() << "\n";
  for (const std::string& line : weighed) std::cout << line << "\n";

  // Device: what the engine, the backend and the context take, against the budget.
  std::cout << "device peak: " << gib(plan.device_total());
  if (plan.gpu_budget) std::cout << " of the " << gib(plan.gpu_budget) << " budget";
  std::cout << "\n";
  // Host: the plan's pinned memory and what the process holds now (data, tokenizer, the
  // backend's libraries), against --host-memory alone (another machine) or what this one has.
  const HostCheck host = check_host(plan, c.host_memory, /*also_available=*/false);
  std::cout << "host peak: " << gib(host.pinned + host.held) << " (the plan's "
            << gib(host.pinned) << " + " << gib(host.held) << " this process holds now); with "
            << "the margin the check asks " << gib(host.need());
  if (host.limit) std::cout << " of " << gib(host.limit) << " (" << host.limit_source << ")";
  std::cout << "\n";

  std::cout << describe(m) << "\n  " << note << "\n";
  if (!disk_line.empty()) std::cout << disk_line << "\n";
  if (!ckpt_path_line.empty()) std::cout << ckpt_path_line << "\n";
  const StepPrediction p = predict_step(plan, spec, m, req.max_tokens, c.max_grad_norm > 0);
  std::cout << p.describe(req.max_tokens) << "\n";
  if (!host.fits()) {
    std::cout << "does not fit: " << host.refusal(plan) << "\n";
    return 1;
  }
  std::cout << "fits\n";
  return 0;
}

}  // namespace sf
