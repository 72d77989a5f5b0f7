#include "train/run_setup.h"

#include <algorithm>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "core/pci_topology.h"
#include "engine/host_check.h"
#include "engine/nvme_checkpoints.h"
#include "engine/weigh.h"

namespace sf {
namespace {

// "auto" → CUDA when a GPU is visible; errors name the option.
bool wants_cuda(const std::string& name) {
  SF_CHECK(name == "auto" || name == "cpu" || name == "cuda", "--backend must be auto, cpu or ",
           "cuda, not '", name, "'");
  const bool cuda = name == "cuda" || (name == "auto" && cuda_device_count() > 0);
  SF_CHECK(!cuda || cuda_device_count() > 0, "--backend cuda: no CUDA device is visible (",
           "check nvidia-smi), or use --backend cpu");
  return cuda;
}

CudaBackendOptions cuda_options(const ModelSpec& spec, int64_t max_tokens) {
  CudaBackendOptions o;
  o.max_tokens = max_tokens;
  o.hidden = spec.hidden;
  o.vocab = spec.vocab;
  o.max_heads = spec.heads;
  return o;
}

// "H100 (0000:1b:00.0), …" and their PCIe links.
std::string describe_gpus(const std::vector<Backend*>& all) {
  std::vector<PciPlace> places;
  std::string s;
  for (size_t d = 0; d < all.size(); ++d) {
    const std::string bus = all[d]->pci_bus_id();
    s += str_cat(d ? ", " : "", "GPU ", d, " ", all[d]->name(), " (", bus.empty() ? "?" : bus, ")");
    places.push_back(pci_place(bus));
  }
  const std::string links = describe_pci_links(places);
  return links.empty() ? s : s + "; " + links;
}

}  // namespace

std::unique_ptr<Backend> make_backend(const std::string& name, const ModelSpec& spec,
                                      int64_t max_tokens) {
  if (!wants_cuda(name)) return make_cpu_backend();
  return make_cuda_backend(cuda_options(spec, max_tokens));
}

PlanRequest train_plan_request(const TrainConfig& c, const ModelSpec& spec,
                               const Batcher& batcher, const std::vector<Batch>& eval_batches) {
  PlanRequest req;
  req.spec = spec;
  req.window = c.window;
  req.max_tokens = batcher.max_tokens();
  req.max_sequences = batcher.max_sequences();
  req.max_sample_tokens = batcher.max_sample_tokens();
  for (const Batch& b : eval_batches) {
    req.max_tokens = std::max(req.max_tokens, b.tokens());
    req.max_sequences = std::max(req.max_sequences, int64_t(b.cu_seqlens.size()) - 1);
    for (size_t i = 1; i < b.cu_seqlens.size(); ++i)
      req.max_sample_tokens =
          std::max<int64_t>(req.max_sample_tokens, b.cu_seqlens[i] - b.cu_seqlens[i - 1]);
  }
  req.micro_tokens = c.micro_batch_tokens;
  req.gpu_budget = c.gpu_memory;
  req.clipping = c.max_grad_norm > 0;
  req.held_units = int(c.held_gradients);
  req.moments_later_units = int(c.moments_later);
  req.nvme = !c.nvme_dir.empty();
  req.nvme_layers = int(c.nvme_layers);
  req.nvme_masters = int(c.nvme_masters);
  req.nvme_checkpoints = c.nvme_checkpoints == "on" ? 1 : c.nvme_checkpoints == "off" ? 0 : -1;
  // GPUDirect slots where asked for and cuFile opens (auto: the run measures both paths).
  if (req.nvme && c.nvme_gds != "off") {
    std::string why;
    const bool gds = wants_cuda(c.backend) && gds_available(&why);
    SF_CHECK(gds || c.nvme_gds != "on", "nvme_gds: on, but GPUDirect Storage is not available: ",
             wants_cuda(c.backend) ? why : std::string("the backend is the CPU's"),
             "; use nvme_gds: auto or off");
    req.ckpt_gpu_direct = gds;
  }
  req.host_limit = host_limit_for_plan(c.host_memory, /*also_available=*/true);
  req.device_optimizer = c.device_optimizer == "off"   ? DeviceOptimizer::kOff
                         : c.device_optimizer == "all" ? DeviceOptimizer::kAll
                                                       : DeviceOptimizer::kAuto;
  if (c.gpus > 1 && c.packing) {
    // Equal tokens (Engine: balance_tokens): a share holds at most T/gpus + the longest sample,
    // and every other GPU takes a sample at least.
    req.devices = c.gpus;
    req.max_tokens =
        std::min(req.max_tokens, (req.max_tokens + c.gpus - 1) / c.gpus + req.max_sample_tokens);
    req.max_sequences = std::max<int64_t>(1, req.max_sequences - (c.gpus - 1));
  } else if (c.gpus > 1) {
    // Equal counts of the step's samples (±1, more to the later ones): at most
    // ceil(samples / gpus) of them, each at most the longest.
    req.devices = c.gpus;
    req.max_sequences = (req.max_sequences + c.gpus - 1) / c.gpus;
    req.max_tokens = std::min(req.max_tokens, req.max_sequences * req.max_sample_tokens);
  }
  return req;
}

std::vector<std::string> weigh_plan(RunSetup& s, const MachineConstants& m, uint64_t device_used) {
  std::vector<std::string> notes;
  std::string note;
  auto keep = [&] {
    if (!note.empty()) notes.push_back(note);
  };
  s.plan = weigh_held_share(s.request, s.plan, m, &note);
  keep();
  PlanRequest now = s.request;
  if (now.backend_scratch) {
    now.device_outside = device_used;
    now.backend_scratch = nullptr;
  }
  s.plan = weigh_micro_batch(now, s.plan, m, &note);
  keep();
  s.plan = weigh_moments_later(s.request, s.plan, m, &note);
  keep();
  return notes;
}

EngineOptions engine_options(const TrainConfig& c, const RunSetup& s) {
  const EnginePlan& p = s.plan;
  const PlanRequest& r = s.request;
  EngineOptions o;
  o.window = c.window;
  o.max_tokens = r.max_tokens;
  o.max_sequences = r.max_sequences;
  o.max_sample_tokens = r.max_sample_tokens;
  o.micro_tokens = p.micro_tokens;
  o.gpu_budget = p.gpu_budget;
  o.host_budget = c.host_memory;
  o.on_device = p.on_device;
  // Without clipping the plan's held share as it stands (weighed, or none where it was dropped to
  // fit the host); with clipping every host unit is held whatever this says.
  o.held_units = c.max_grad_norm == 0 ? int(std::count(p.held.begin(), p.held.end(), true))
                                      : int(c.held_gradients);
  o.moments_later_units = int(std::count(p.moments_later.begin(), p.moments_later.end(), true));
  o.nvme_dir = c.nvme_dir.string();
  o.on_nvme = p.on_nvme;
  o.master_on_nvme = p.master_on_nvme;
  o.nvme_checkpoints = p.ckpt_on_nvme ? 1 : 0;
  o.nvme_gds = p.ckpt_gds;
  o.adamw = AdamWParams{c.lr, c.beta1, c.beta2, c.eps, c.weight_decay};
  o.max_grad_norm = c.max_grad_norm;
  for (const auto& b : s.more) o.data_parallel.push_back(b.get());
  o.collective = s.collective.get();
  o.balance_tokens = c.packing;
  return o;
}

std::string choose_checkpoint_path(EngineOptions& o, const TrainConfig& c, const RunSetup& s,
                                   const ModelSpec& spec) {
  if (!o.nvme_gds || c.nvme_gds != "auto" || c.nvme_dir.empty()) return "";
  const CheckpointPathRates rates = NvmeCheckpoints::measure_paths(
      *s.backend, c.nvme_dir,
      uint64_t(s.request.max_tokens * spec.hidden) * dtype_size(DType::kBF16));
  o.nvme_gds = rates.gds_faster();
  return rates.describe() +
         "; taken: " + (o.nvme_gds ? "GPUDirect Storage" : "pinned slots + io_uring");
}

RunSetup make_run_setup(const std::string& name, PlanRequest r) {
  RunSetup s;
  const int n = r.devices;
  if (!wants_cuda(name)) {
    r.dtype = DType::kF32;
    s.plan = make_plan(r);
    s.request = r;
    s.backend = make_cpu_backend();
    if (n > 1) {
      std::vector<Backend*> all{s.backend.get()};
      for (int d = 1; d < n; ++d) {
        s.more.push_back(make_cpu_backend());
        all.push_back(s.more.back().get());
      }
      s.collective = make_peer_collective(all);
      s.devices_line = str_cat(n, " simulated devices on the CPU; ", s.collective->describe());
    }
    return s;
  }
  SF_CHECK(n <= cuda_device_count(), "--gpus ", n, ": only ", cuda_device_count(),
           " CUDA devices are visible (nvidia-smi; CUDA_VISIBLE_DEVICES)");
  CudaBackendOptions o = cuda_options(r.spec, 0);
  const DeviceMemoryInfo dev = cuda_device_memory(o.device);  // the context exists from here on
  r.dtype = DType::kBF16;
  if (r.gpu_budget == 0) r.gpu_budget = dev.total;
  SF_CHECK(r.gpu_budget <= dev.total, "--gpu-memory ", r.gpu_budget >> 20,
           " MiB is more than the device has (", dev.total >> 20, " MiB)");
  r.device_outside = dev.used + kCudaLibraryReserve;
  r.backend_scratch = [o](int64_t M) {
    CudaBackendOptions m = o;
    m.max_tokens = M;
    return uint64_t(cuda_backend_scratch_bytes(m));
  };
  s.plan = make_plan(r);
  s.request = r;
  o.max_tokens = s.plan.micro_tokens;
  s.backend = make_cuda_backend(o);
  if (n == 1) return s;
  // The other GPUs: each backend with the same workspaces (the engine plans each device again
  // with its own use); the reduction through NCCL, else peer copies.
  std::vector<Backend*> all{s.backend.get()};
  std::vector<int> ids{o.device};
  for (int d = 1; d < n; ++d) {
    CudaBackendOptions od = o;
    od.device = d;
    s.more.push_back(make_cuda_backend(od));
    all.push_back(s.more.back().get());
    ids.push_back(d);
  }
  std::string why;
  s.collective = make_nccl_collective(all, ids, &why);
  if (!s.collective) {
    s.collective = make_peer_collective(all);
    why = "NCCL not used (" + why + "; set SF_NCCL_LIB to a libnccl.so.2): ";
  } else {
    why.clear();
  }
  all[0]->bind_thread();
  s.devices_line = str_cat(n, " GPUs: ", describe_gpus(all), "; ", why, s.collective->describe());
  return s;
}

}  // namespace sf
