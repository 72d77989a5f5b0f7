#include "engine/plan.h"

#include <algorithm>
#include <sstream>

#include "backend/backend.h"
#include "core/carver.h"
#include "core/error.h"
#include "core/host_memory.h"
#include "engine/host_check.h"
#include "engine/nvme_checkpoints.h"
#include "engine/nvme_tier.h"
#include "engine/unit_state.h"
#include "model/layer.h"
#include "model/layout.h"

namespace sf {
namespace {

// H2D tiles of 16 Mi fp32 elements (64 MiB): the cast on the device that follows each copy takes
// ~2 % of the copy's time at PCIe rates, and the tile is < 1 % of a 24 GiB budget.
constexpr int64_t kUploadTile = int64_t(16) << 20;
// Gradient pieces of 16 Mi elements (32 MiB in bf16, ~0.6 ms of D2H, ~4 ms of CPU AdamW), four
// in flight: the D2H of one piece overlaps the update of the previous ones.
constexpr int64_t kGradPiece = int64_t(16) << 20;
constexpr int kGradRingSlots = 4;
// State copies (loading, saving, resuming a GPU-resident or NVMe tensor) in pieces of 16 Mi fp32
// elements (64 MiB): a whole 8B embedding part would take 2 GiB of host memory at the run's
// start, on top of the state, where the host peak is decided; a piece's D2H/H2D takes ~1 ms.
constexpr int64_t kStatePiece = int64_t(16) << 20;
// Without clipping, the plan holds the gradients of the head and the top layers (from the head
// down) up to this share of the host-updated parameters. At small batch the CPU AdamW is the
// step and idles through the forward and the head unless updates are left for them: the forward
// is bound by the fp32 uploads (4 B/param at ≈ 55 GB/s, ≈ 0.07 ns/param) against the AdamW's
// ≈ 0.35 ns/param (2.9 G params/s while copies run, GPU machine, docs/perf.md), a fifth; with the
// head, a quarter. Cost: 2 B/param of host memory for the held share (4 GiB for 8B).
constexpr int64_t kHeldShareNum = 1, kHeldShareDen = 4;
// The smallest block of rows the MLP is cut into where a micro-batch of M (bounded from below by
// the longest sample) does not fit: 8B's MLP GEMMs on 1024 rows (1024 × 4096 × 14336) still fill
// an H100/H200, and the six 1024 × intermediate tensors take 168 MiB instead of 1.3 GiB at 8k.
constexpr int64_t kMinMlpTokens = 1024;
// The NVMe tier's update slots: the unit being updated, the next one read ahead, the last one
// being written back (each a layer's 12 B/param: 2.6 GB for the 8B layer).
constexpr int kNvmeUpdateSlots = 3;
// Staging slots of the checkpoints on NVMe: the offload being filled, two writes behind it and a
// read ahead of the restore in the backward.
constexpr int kNvmeCheckpointSlots = 4;

struct Sized {
  DeviceBytes device;
  uint64_t backend = 0;
};

Sized size_device(const PlanRequest& r, int window, int64_t M, int64_t F, int64_t tile,
                  const std::vector<bool>& on_device = {}) {
  Sized s;
  carve_device(r.spec, r.dtype,
               PlanDims{window, r.max_tokens, r.max_sequences, M, tile, on_device, r.clipping,
                        r.devices == 1, F, r.slots_in_outer},
               nullptr, &s.device);
  if (r.backend_scratch) s.backend = r.backend_scratch(M);
  return s;
}

// Which host units hold their gradient (EnginePlan::held): with clipping all of them; without,
// `asked` units from the head down, or (asked < 0) as many as stay within kHeldShare of the host
// parameters.
std::vector<bool> choose_held(const std::vector<UnitLayout>& units,
                              const std::vector<bool>& on_device, const std::vector<bool>& on_nvme,
                              bool clipping, int asked) {
  std::vector<bool> held(units.size(), false);
  int64_t host_params = 0;
  for (size_t k = 0; k < units.size(); ++k)
    if (!on_device[k]) host_params += units[k].numel;
  const int64_t share = host_params * kHeldShareNum / kHeldShareDen;
  int64_t taken = 0;
  int count = 0;
  for (size_t k = units.size(); k-- > 0;) {
    if (on_device[k]) continue;
    if (clipping) {
      held[k] = true;
      continue;
    }
    // An NVMe unit's state is in a staging slot only while it is updated: it takes the ring.
    if (on_nvme[k]) break;
    if (asked >= 0 ? count >= asked : taken + units[k].numel > share) break;
    held[k] = true;
    taken += units[k].numel;
    ++count;
  }
  return held;
}

}  // namespace

int64_t outer_grad_elems(const ModelSpec& spec) {
  const UnitLayout o = outer_layout(spec);
  const int64_t embed = o.entries.size() > 1 ? o.entries[1].offset : o.numel;
  return spec.tie_word_embeddings ? o.numel : std::max(embed, o.numel - embed);
}

int64_t batch_ints(int64_t tokens, int64_t sequences) { return 3 * tokens + 2 * sequences; }

DeviceParts carve_device(const ModelSpec& spec, DType dt, const PlanDims& d, void* base,
                         DeviceBytes* bytes) {
  const size_t dsz = dtype_size(dt);
  const int64_t outer_n = outer_layout(spec).numel;
  const int64_t layer_n = spec.layers > 0 ? layer_layout(spec, 0).numel : 0;
  const int64_t T = d.tokens, C = spec.hidden;
  Carver b(base);
  DeviceParts p;
  DeviceBytes n;
  size_t mark = 0;
  auto section = [&](uint64_t* field) {
    *field = b.used() - mark;
    mark = b.used();
  };
  p.outer_params = b.take_bytes(size_t(outer_n) * dsz);
  // fp32 gradients (and their compute-dtype stage) of the embedding and of the head: untied, the
  // two are never live at once — the head's are sent right after the head, the embedding's are
  // formed at the very end — so they share one buffer; tied, the head adds into the embedding's.
  const int64_t grads_n = outer_grad_elems(spec);
  p.outer_grads = static_cast<float*>(b.take_bytes(size_t(grads_n) * 4));
  // The stage is for the D2H to the host optimizer: none when both outer units are updated on
  // the device.
  const bool all_outer_on_device =
      !d.on_device.empty() && d.on_device.front() && d.on_device.back();
  p.outer_stage =
      dt != DType::kF32 && !all_outer_on_device ? b.take_bytes(size_t(grads_n) * dsz) : nullptr;
  section(&n.outer);
  // The slots' gradient and stages: inside the outer fp32 buffer while they fit (PlanDims::
  // slots_in_outer), else memory of their own.
  const size_t room = d.slots_in_outer && d.shared_slot_grads && !spec.tie_word_embeddings
                          ? size_t(grads_n) * 4
                          : 0;
  size_t inside = 0;
  auto slot_buffer = [&](size_t bytes) -> void* {
    const size_t need = (bytes + 255) / 256 * 256;
    if (inside + need > room) return b.take_bytes(bytes);
    void* q = base ? static_cast<void*>(reinterpret_cast<char*>(p.outer_grads) + inside) : nullptr;
    inside += need;
    p.slots_in_outer = true;
    return q;
  };
  p.slots.resize(size_t(d.window));
  float* grads = nullptr;
  for (size_t k = 0; k < p.slots.size(); ++k) {
    auto& s = p.slots[k];
    s.params = b.take_bytes(size_t(layer_n) * dsz);
    if (k == 0 || !d.shared_slot_grads)
      grads = static_cast<float*>(slot_buffer(size_t(layer_n) * 4));
    s.grads = grads;
  }
  if (dt != DType::kF32)
    for (auto& s : p.slots) s.stage = slot_buffer(size_t(layer_n) * dsz);
  section(&n.slots);
  p.upload = static_cast<float*>(b.take_bytes(size_t(d.upload_tile) * 4));
  section(&n.upload);
  p.batch = b.take_bytes(size_t(batch_ints(T, d.sequences)) * 4);
  p.inv_freq = static_cast<float*>(b.take_bytes(size_t(spec.head_dim / 2) * 4));
  p.loss = static_cast<float*>(b.take_bytes(4));
  p.pad_row = static_cast<float*>(b.take_bytes(size_t(C) * 4));
  const std::vector<UnitLayout> units = unit_layouts(spec);
  p.sumsq = static_cast<double*>(b.take_bytes(units.size() * sizeof(double)));
  for (double** partials : {&p.compute_partials, &p.gradient_partials})
    *partials = static_cast<double*>(b.take_bytes(Backend::kSumSquaresPartials * sizeof(double)));
  if (!d.on_device.empty())
    p.nonfinite = static_cast<int64_t*>(b.take_bytes(units.size() * sizeof(int64_t)));
  section(&n.batch);
  // The backward brings the layer inputs back into the forward's two buffers: by then the head has
  // read x_L and x_{L-1} is read by the last layer's backward before a restore overwrites it.
  for (int k = 0; k < 2; ++k) p.act[k] = p.restore[k] = b.take_bytes(size_t(T * C) * dsz);
  p.grad = b.take_bytes(size_t(T * C) * dsz);
  section(&n.activations);
  p.workspace = b.take_bytes(LayerWorkspace::bytes_needed(spec, d.micro_tokens, dt, d.mlp_tokens));
  p.head_workspace = b.take_bytes(HeadWorkspace::bytes_needed(spec, d.micro_tokens, dt));
  section(&n.workspace);
  p.unit_state.assign(units.size(), nullptr);
  // A GPU-resident unit but the embedding, with clipping, also keeps its gradient until the norm
  // is known (a layer's slot is overwritten by the next layer's backward, the head's share of the
  // outer buffer by the embedding's): UnitState::grad, right after its state.
  for (size_t u = 0; u < d.on_device.size() && u < units.size(); ++u)
    if (d.on_device[u])
      p.unit_state[u] = b.take_bytes(
          UnitState::device_bytes(units[u].numel, UnitState::keeps_device_grad(u, d.clipping), dt));
  section(&n.optimizer);
  if (bytes) *bytes = n;
  return p;
}

EnginePlan make_plan(const PlanRequest& r) {
  const int64_t T = r.max_tokens;
  SF_CHECK(T > 0 && r.max_sequences > 0 && r.max_sequences <= T, "plan: the tokens per step (", T,
           ") and samples per step (", r.max_sequences,
           ") must be positive, with no more samples than tokens");
  SF_CHECK(r.window >= 1, "window must be at least 1 layer (got ", r.window, ")");
  // The longest sample bounds M from below; unknown (0), an M asked for is checked step by step
  // (split_micro_batches) and the budget search does not cut the step.
  const int64_t longest = r.max_sample_tokens > 0 ? std::min(r.max_sample_tokens, T) : T;
  const int L = int(r.spec.layers);
  EnginePlan p;
  p.window = std::min(r.window, std::max(L, 1));
  p.max_tokens = T;
  p.max_sequences = r.max_sequences;
  // Tiles and pieces no larger than the largest unit (tiny models need no 64 MiB tile).
  const std::vector<UnitLayout> units = unit_layouts(r.spec);
  int64_t largest = 0;
  for (const UnitLayout& u : units) largest = std::max(largest, u.numel);
  p.upload_tile = std::min(kUploadTile, largest);
  p.gpu_budget = r.gpu_budget;
  p.device_outside = r.device_outside;
  p.layers = L;
  p.hidden = r.spec.hidden;
  p.devices = r.devices;
  SF_CHECK(r.devices >= 1, "plan: devices must be at least 1 (got ", r.devices, ")");
  // Data parallel keeps every unit's state on the host, in RAM: a GPU-resident unit would need a
  // copy updated on every device, and the NVMe tier's slots serve one engine's loads (planned).
  SF_CHECK(r.devices == 1 || (!r.nvme && std::count(r.on_nvme.begin(), r.on_nvme.end(), true) == 0),
           "--gpus ", r.devices,
           " with --nvme-dir is not supported yet: the NVMe tier serves one "
           "GPU; drop --nvme-dir or train on one GPU");
  SF_CHECK(r.devices == 1 || (r.device_optimizer != DeviceOptimizer::kAll &&
                              std::count(r.on_device.begin(), r.on_device.end(), true) == 0),
           "--gpus ", r.devices,
           " keeps the optimizer on the host: the GPU-resident share "
           "(--device-optimizer all) is for one GPU; use --device-optimizer off or auto");
  p.dtype_bytes = dtype_size(r.dtype);

  // M: as asked; else the largest of T, T/2, T/4, … (at least the longest sample) that fits.
  // Where no M fits, a smaller window (fewer cache slots: less of the loads overlap compute).
  if (r.micro_tokens > 0)
    SF_CHECK(r.max_sample_tokens == 0 || r.micro_tokens >= longest, "a micro-batch of ",
             r.micro_tokens, " tokens cannot hold the longest sample (", longest,
             " tokens): raise --micro-batch-tokens or lower --cutoff-len");
  // Where M is at its floor and still does not fit, the MLP runs in blocks of F = M/2, M/4, … (at
  // least kMinMlpTokens) rows, before the window shrinks.
  const int64_t first_m = r.micro_tokens > 0 ? std::min(r.micro_tokens, T) : T;
  p.micro_tokens = first_m;
  p.mlp_tokens = r.mlp_tokens > 0 ? std::min(r.mlp_tokens, first_m) : first_m;
  auto fits_f = [&](int w, int64_t m, int64_t f, const std::vector<bool>& on_device) {
    Sized z = size_device(r, w, m, f, p.upload_tile, on_device);
    return z.device.engine() + z.backend + r.device_outside <= r.gpu_budget;
  };
  auto fits = [&](int w, int64_t m, const std::vector<bool>& on_device) {
    return fits_f(w, m, std::min(m, p.mlp_tokens), on_device);
  };
  const std::vector<bool> none(units.size(), false);
  if (r.gpu_budget > 0) {
    for (int w = p.window;; --w) {
      int64_t m = first_m, f = p.mlp_tokens;
      for (;;) {
        if (fits_f(w, m, f, none)) break;
        if (r.micro_tokens == 0 && m > longest) {
          m = std::max(longest, (m + 1) / 2);
          f = std::min(f, m);
        } else if (r.mlp_tokens == 0 && f > kMinMlpTokens) {
          f = std::max(kMinMlpTokens, (f + 1) / 2);
        } else {
          break;
        }
      }
      if (fits_f(w, m, f, none) || w == 1) {
        if (fits_f(w, m, f, none)) {
          p.window = w;
          p.micro_tokens = m;
          p.mlp_tokens = f;
        }
        break;
      }
    }
  }

  // The GPU-resident share: the embedding, then the head — the units whose CPU updates end one
  // step and start the next — each where it fits, then decoder layers from the bottom (the first
  // layers' updates are the last of a backward and the first the next forward needs), while the
  // budget holds their 12 B/param (14 with clipping in bf16: the gradient waits for the norm); each
  // takes 36 B/param of host traffic a step off the host.
  // For them M may halve, down to kSaturatingTokens (or the longest sample), where the layers'
  // GEMMs already run at their full rate: fewer, larger micro-batches would buy less than the
  // update they make room for.
  p.on_device = none;
  const size_t head = units.size() - 1;
  if (!r.on_device.empty()) {
    SF_CHECK(r.on_device.size() == units.size(), "plan: on_device names ", r.on_device.size(),
             " units, the model has ", units.size());
    p.on_device = r.on_device;
  } else if (r.device_optimizer == DeviceOptimizer::kAll) {
    p.on_device[0] = p.on_device[head] = true;
  } else if (r.device_optimizer == DeviceOptimizer::kAuto && r.gpu_budget > 0 && r.devices == 1 &&
             fits(p.window, p.micro_tokens, none)) {
    const int64_t floor_m = r.micro_tokens > 0
                                ? p.micro_tokens
                                : std::min(p.micro_tokens, std::max(longest, kSaturatingTokens));
    // Takes unit c where it fits at some M down to floor_m; says whether it did.
    auto take = [&](size_t c) {
      std::vector<bool> trial = p.on_device;
      trial[c] = true;
      for (int64_t m = p.micro_tokens;; m = std::max(floor_m, (m + 1) / 2)) {
        if (fits(p.window, m, trial)) {
          p.on_device = trial;
          p.micro_tokens = m;
          return true;
        }
        if (m <= floor_m) return false;
      }
    };
    // The layers whether or not the outer units fit: with clipping at 24 GiB from 32k tokens the
    // head (14 B/param of 0.5 G params for Llama-3) does not fit beside the embedding, a layer
    // does.
    take(0);
    take(head);
    size_t k = 1;
    while (k < head && take(k)) ++k;
    if (k < head)
      p.next_layer_bytes = UnitState::device_bytes(
          units[k].numel, UnitState::keeps_device_grad(k, r.clipping), r.dtype);
  }
  p.mlp_tokens = std::min(p.mlp_tokens, p.micro_tokens);
  Sized s = size_device(r, p.window, p.micro_tokens, p.mlp_tokens, p.upload_tile, p.on_device);
  p.device = s.device;
  p.backend_scratch = s.backend;
  if (r.gpu_budget > 0 && p.device_total() > r.gpu_budget) {
    const int64_t least_m = r.micro_tokens > 0 ? first_m : longest;
    const int64_t least_f = std::min(least_m, r.mlp_tokens > 0 ? r.mlp_tokens : kMinMlpTokens);
    Sized least = size_device(
        r, 1, least_m, least_f, p.upload_tile,
        r.device_optimizer == DeviceOptimizer::kAll || !r.on_device.empty() ? p.on_device : none);
    const uint64_t smallest = least.device.engine() + least.backend + r.device_outside;
    SF_FAIL("the GPU budget of ", gib(r.gpu_budget), " is too small for this run: it needs ",
            gib(p.device_total()), " with window ", p.window, " and micro-batches of ",
            p.micro_tokens, " tokens (", p.describe(),
            "). The smallest budget that works for these steps is ", gib(smallest),
            " (window 1, micro-batches of ", least_m, " tokens",
            r.micro_tokens > 0 ? "" : ", the longest sample", ", the MLP in blocks of ", least_f,
            "); or lower the tokens per step (--batch-size, "
            "--cutoff-len) or train a smaller model");
  }

  // Host: state of every unit not on the device or on NVMe, gradients, checkpoints, batch
  // staging, the NVMe tier's slots.
  p.grad_piece = r.grad_piece > 0 ? r.grad_piece : std::min(kGradPiece, largest);
  p.state_piece = r.state_piece > 0 ? r.state_piece : kStatePiece;
  p.grad_ring_slots = r.clipping ? 0 : kGradRingSlots;
  for (size_t k = 0; k < units.size(); ++k) {
    p.params += units[k].numel;
    if (p.on_device[k]) p.device_params += units[k].numel;
  }
  const uint64_t ckpt_bytes = uint64_t(T * r.spec.hidden) * dtype_size(r.dtype);
  // Staging: the batch, the loss (256 B), then per unit a sum of squares and a count of the
  // weights a device update left non-finite (the GPU-resident units' values read back).
  p.host.staging = uint64_t(r.devices) *
                   (uint64_t(batch_ints(T, r.max_sequences)) * 4 + 256 + units.size() * 16);
  // The held share asked for (-1: the plan's); dropped (0) where it alone keeps the plan from
  // the host limit — it buys speed with 2 B/param, the fallbacks below cost more.
  int held_units = r.held_units;
  // The state and gradients with the m and v of the units `on_nvme` on NVMe and the master of
  // `masters` (of those) too, the checkpoints there too with `ckpt`.
  auto place = [&](const std::vector<bool>& on_nvme, const std::vector<bool>& masters, bool ckpt) {
    p.on_nvme = on_nvme;
    p.master_on_nvme.assign(units.size(), false);
    p.nvme_params = p.nvme_master_params = 0;
    p.host.state = 0;
    for (size_t k = 0; k < units.size(); ++k) {
      if (p.on_device[k]) continue;
      p.master_on_nvme[k] = on_nvme[k] && masters[k];
      if (on_nvme[k]) p.nvme_params += units[k].numel;
      if (p.master_on_nvme[k]) p.nvme_master_params += units[k].numel;
      p.host.state +=
          UnitState::host_state_bytes(units[k].numel, false, on_nvme[k], p.master_on_nvme[k]);
    }
    // With layers on the disk, host memory is what is short and the disk is the step's floor: the
    // held share (2 B/param, to keep the CPU AdamW busy through the forward) is not taken unless
    // asked for.
    const bool any_nvme = std::count(on_nvme.begin(), on_nvme.end(), true) > 0;
    p.held = choose_held(units, p.on_device, on_nvme, r.clipping,
                         any_nvme && held_units < 0 ? 0 : held_units);
    p.held_params = 0;
    p.host.grads =
        r.clipping ? 0 : uint64_t(p.grad_ring_slots) * UnitState::grad_bytes(p.grad_piece, r.dtype);
    for (size_t k = 0; k < units.size(); ++k)
      if (p.held[k]) {
        p.held_params += units[k].numel;
        p.host.grads += UnitState::grad_bytes(units[k].numel, r.dtype);
      }
    const int nvme_units = int(std::count(on_nvme.begin(), on_nvme.end(), true));
    const int master_units =
        int(std::count(p.master_on_nvme.begin(), p.master_on_nvme.end(), true));
    p.nvme_update_slots = std::min(kNvmeUpdateSlots, nvme_units);
    p.nvme_load_slots = std::min(p.window + 1, master_units);
    p.host.nvme_staging = NvmeTier::staging_bytes(units, on_nvme, p.master_on_nvme,
                                                  p.nvme_update_slots, p.nvme_load_slots);
    p.nvme_disk = NvmeTier::disk_bytes(units, on_nvme, p.master_on_nvme);
    p.ckpt_on_nvme = ckpt && L > 0;
    p.ckpt_slots = p.ckpt_on_nvme ? std::min(kNvmeCheckpointSlots, L) : 0;
    p.ckpt_gds = p.ckpt_on_nvme && r.ckpt_gpu_direct;
    p.device.ckpt_staging =
        p.ckpt_gds ? NvmeCheckpoints::staging_bytes(ckpt_bytes, p.ckpt_slots) : 0;
    p.host.checkpoints = p.ckpt_gds       ? 0
                         : p.ckpt_on_nvme ? NvmeCheckpoints::staging_bytes(ckpt_bytes, p.ckpt_slots)
                                          : uint64_t(r.devices) * uint64_t(L) * ckpt_bytes;
    if (p.ckpt_on_nvme) p.nvme_disk += NvmeCheckpoints::disk_bytes(L, ckpt_bytes);
    // Loading, saving or resuming copies a GPU-resident or NVMe tensor's master, m or v through
    // the host, one piece of one part at a time: counted so the host check covers them.
    p.host.state_copy = 0;
    for (size_t k = 0; k < units.size(); ++k)
      if (p.on_device[k] || on_nvme[k])
        for (const UnitLayout::Entry& e : units[k].entries)
          p.host.state_copy =
              std::max(p.host.state_copy, uint64_t(std::min(e.numel, p.state_piece)) * 4);
    p.nvme_read_bytes = p.nvme_write_bytes = 0;
    for (size_t k = 1; k + 1 < units.size(); ++k) {
      const double n = double(units[k].numel);
      if (p.master_on_nvme[k]) {
        const bool reloaded = int(k) - 1 < L - p.window;  // not still cached for the backward
        p.nvme_read_bytes += (reloaded ? 8.0 : 4.0) * n + 12.0 * n;
        p.nvme_write_bytes += 12.0 * n;
      } else if (on_nvme[k]) {
        p.nvme_read_bytes += 8.0 * n;
        p.nvme_write_bytes += 8.0 * n;
      }
    }
    if (p.ckpt_on_nvme) {  // every layer's input written; read back but for the last slots' worth
      p.nvme_write_bytes += double(L) * double(ckpt_bytes);
      p.nvme_read_bytes += double(std::max(0, L - p.ckpt_slots)) * double(ckpt_bytes);
    }
  };
  // The n lowest layers whose state is on the host (a GPU-resident one has none to move).
  auto bottom = [&](int n) {
    std::vector<bool> v(units.size(), false);
    for (int i = 0, k = 0; i < L && k < n; ++i)
      if (!p.on_device[size_t(1 + i)]) v[size_t(1 + i)] = true, ++k;
    return v;
  };
  SF_CHECK(r.nvme || r.nvme_checkpoints <= 0, "plan: checkpoints on NVMe need an --nvme-dir");
  const auto fits_host = [&] {
    return r.host_limit == 0 || p.host.total() + host_margin(p.host.total()) <= r.host_limit;
  };
  // Places as asked; where that does not fit the host, without the plan's held share first.
  const auto place_fitting = [&](const std::vector<bool>& on_nvme, const std::vector<bool>& masters,
                                 bool ckpt) {
    place(on_nvme, masters, ckpt);
    if (fits_host() || r.held_units >= 0 || r.clipping || p.held_params == 0) return;
    held_units = 0;
    place(on_nvme, masters, ckpt);
  };
  // The masters asked for with `n` layers on disk (none where the plan chooses them).
  const auto masters_of = [&](int n) {
    return bottom(r.nvme_masters >= 0 ? std::min(r.nvme_masters, n) : 0);
  };
  // Where the plan chooses the masters and the host still does not fit with `layers` on disk:
  // the fewest bottom layers' masters there too.
  const auto add_masters = [&](const std::vector<bool>& layers, int n) {
    if (r.nvme_masters >= 0) return;
    for (int m = 1; m <= n && !fits_host(); ++m) place(layers, bottom(m), p.ckpt_on_nvme);
  };
  SF_CHECK(r.nvme_masters <= L, "nvme_masters is ", r.nvme_masters, " but the model has ", L,
           " layers: use at most ", L, ", or -1 for the fewest the host memory needs");
  if (!r.on_nvme.empty()) {
    SF_CHECK(r.on_nvme.size() == units.size() &&
                 (r.master_on_nvme.empty() || r.master_on_nvme.size() == units.size()),
             "plan: on_nvme names ", r.on_nvme.size(), " units and master_on_nvme ",
             r.master_on_nvme.size(), ", the model has ", units.size());
    place(r.on_nvme, r.master_on_nvme.empty() ? none : r.master_on_nvme, r.nvme_checkpoints > 0);
  } else if (r.nvme && r.nvme_layers >= 0) {
    SF_CHECK(r.nvme_layers <= L, "nvme_layers is ", r.nvme_layers, " but the model has ", L,
             " layers: use at most ", L, ", or -1 for the fewest the host memory needs");
    SF_CHECK(r.nvme_masters <= r.nvme_layers, "nvme_masters is ", r.nvme_masters,
             " but nvme_layers is ", r.nvme_layers,
             ": a layer's master goes to the disk only with its m and v; raise nvme_layers or "
             "lower nvme_masters");
    const std::vector<bool> layers = bottom(r.nvme_layers);
    place_fitting(layers, masters_of(r.nvme_layers), r.nvme_checkpoints > 0);
    if (r.nvme_checkpoints < 0 && !fits_host()) place(layers, masters_of(r.nvme_layers), true);
    add_masters(layers, r.nvme_layers);
  } else {
    place_fitting(none, none, r.nvme_checkpoints > 0);
    // Where the host limit needs it: the checkpoints first (if not said), then the m and v of
    // the fewest layers, then their masters; all of them where nothing fits (the host check then
    // refuses, saying what is needed).
    if (r.nvme && r.host_limit > 0 && !fits_host()) {
      const bool ckpt = r.nvme_checkpoints != 0;
      for (int n = 0; n <= L; ++n) {
        place(bottom(n), masters_of(n), ckpt);
        if (fits_host()) break;
      }
      add_masters(bottom(L), L);
    }
  }
  p.set_moments_later(units, std::max(r.moments_later_units, 0), r.clipping);
  // GPUDirect slots where the device budget has room for them; else pinned ones.
  if (p.ckpt_gds && r.gpu_budget > 0 && p.device_total() > r.gpu_budget) {
    p.ckpt_gds = false;
    p.device.ckpt_staging = 0;
    p.host.checkpoints = NvmeCheckpoints::staging_bytes(ckpt_bytes, p.ckpt_slots);
  }
  return p;
}

namespace {

// "layer 3" or "layers 0-11": the first and last decoder layer marked in `units` (unit_layouts
// order: 0 the embedding, 1 + i layer i, the last the head); empty where none is.
std::string layer_range(const std::vector<bool>& units) {
  int first = -1, last = -1;
  for (size_t k = 1; k + 1 < units.size(); ++k)
    if (units[k]) {
      if (first < 0) first = int(k) - 1;
      last = int(k) - 1;
    }
  if (first < 0) return {};
  return first == last ? "layer " + std::to_string(first)
                       : "layers " + std::to_string(first) + "-" + std::to_string(last);
}

// "the head and layers 26-31 (N parameters)", from the top (`top_first`) or the bottom.
std::string unit_names(const std::vector<bool>& units, int64_t params, bool top_first) {
  std::vector<std::string> parts;
  if (!units.empty() && units.front()) parts.push_back("the embedding");
  if (std::string layers = layer_range(units); !layers.empty()) parts.push_back(layers);
  if (!units.empty() && units.back()) parts.push_back("the head");
  if (top_first) std::reverse(parts.begin(), parts.end());
  std::string s;
  for (size_t i = 0; i < parts.size(); ++i)
    s += (i == 0 ? "" : i + 1 == parts.size() ? " and " : ", ") + parts[i];
  return s + " (" + std::to_string(params) + " parameters)";
}

}  // namespace

std::string EnginePlan::held_names() const { return unit_names(held, held_params, true); }

std::string EnginePlan::moments_later_names() const {
  return unit_names(moments_later, moments_later_params, false);
}

void EnginePlan::set_moments_later(const std::vector<UnitLayout>& units, int count,
                                   bool clipping) {
  moments_later.assign(units.size(), false);
  moments_later_params = 0;
  if (!clipping) return;
  for (size_t k = 0; k < units.size() && count > 0; ++k) {
    if (on_device[k] || (!on_nvme.empty() && on_nvme[k])) continue;
    moments_later[k] = true;
    moments_later_params += units[k].numel;
    --count;
  }
}

std::string EnginePlan::describe() const {
  std::ostringstream o;
  o << "window " << window << ", micro-batches of ≤ " << micro_tokens << " tokens (step ≤ "
    << max_tokens << " tokens, ≤ " << max_sequences << " samples";
  if (devices > 1) o << ", on each of " << devices << " GPUs: the device figures are each GPU's";
  o << ")";
  if (mlp_tokens > 0 && mlp_tokens < micro_tokens)
    o << ", the MLP in blocks of " << mlp_tokens << " tokens";
  o << "\n";
  o << "  device: " << gib(device_total());
  if (gpu_budget) o << " of a " << gib(gpu_budget) << " budget";
  o << " — outer unit " << gib(device.outer) << ", " << window << " cache slots "
    << gib(device.slots) << ", upload tile " << gib(device.upload) << ", activations "
    << gib(device.activations) << ", workspaces " << gib(device.workspace) << ", batch "
    << gib(device.batch);
  if (device.optimizer)
    o << ", optimizer state of the GPU-resident units " << gib(device.optimizer);
  if (device.ckpt_staging)
    o << ", " << ckpt_slots << " GPUDirect slots of the NVMe checkpoints "
      << gib(device.ckpt_staging);
  if (backend_scratch) o << ", backend scratch " << gib(backend_scratch);
  if (device_outside) o << ", outside the engine (context, libraries) " << gib(device_outside);
  o << "\n  optimizer: ";
  if (device_params == 0) {
    o << "every unit on the host (CPU AdamW)";
  } else {
    o << device_params << " of " << params << " parameters updated on the device (";
    const char* sep = "";
    if (on_device.front()) {
      o << "embedding";
      sep = ", ";
    }
    if (on_device.back()) {
      o << sep << "head";
      sep = ", ";
    }
    if (std::string layers = layer_range(on_device); !layers.empty()) o << sep << layers;
    o << "), the rest on the host (CPU AdamW)";
    if (next_layer_bytes)
      o << "; one more layer there would take " << gib(next_layer_bytes) << " of the GPU budget";
  }
  o << "\n  host: " << gib(host.total()) << " — master weights and Adam m, v " << gib(host.state)
    << " (" << params - device_params - nvme_params << " parameters × 12 B";
  if (nvme_params > nvme_master_params)
    o << ", the masters of " << nvme_params - nvme_master_params
      << " parameters whose m and v are on NVMe × 4 B";
  o << "), gradients " << gib(host.grads);
  if (!grad_ring_slots) {
    o << " (held for exact clipping";
    if (moments_later_params)
      o << "; the Adam m and v of " << moments_later_names()
        << " written after every master, through the next backward";
    o << ")";
  } else {
    o << " (a ring of " << grad_ring_slots << " pieces";
    if (held_params) o << "; held, updated in forward order behind the ring: " << held_names();
    o << ")";
  }
  o << ", activation checkpoints " << gib(host.checkpoints);
  if (ckpt_gds)
    o << " (on NVMe through device slots)";
  else if (ckpt_on_nvme)
    o << " (" << ckpt_slots << " staging slots of the checkpoints on NVMe)";
  else
    o << " (" << (devices > 1 ? std::to_string(devices) + " devices × " : std::string()) << layers
      << " layers × " << max_tokens << " tokens × " << hidden << " × " << dtype_bytes << " B)";
  o << ", batch staging " << gib(host.staging);
  if (host.state_copy)
    o << ", while loading, saving or resuming " << gib(host.state_copy)
      << " (a piece of a GPU-resident or NVMe tensor)";
  if (host.nvme_staging) o << ", NVMe staging " << gib(host.nvme_staging);
  if (nvme_disk) {
    o << "\n  NVMe: " << gib(nvme_disk) << " on disk —";
    if (nvme_params) {
      // (the units on NVMe are decoder layers from the bottom up)
      o << " the Adam m and v of " << layer_range(on_nvme) << " (" << nvme_params
        << " parameters × 8 B)";
      if (nvme_master_params)
        o << " and the master weights of " << layer_range(master_on_nvme) << " ("
          << nvme_master_params << " × 4 B)";
      o << " through " << nvme_update_slots << " update slots";
      if (nvme_load_slots) o << " and " << nvme_load_slots << " load slots";
      o << " of pinned staging;";
    }
    if (ckpt_on_nvme)
      o << " the activation checkpoints (" << layers << " layers × " << max_tokens << " tokens × "
        << hidden << " × " << dtype_bytes << " B"
        << (ckpt_gds ? ", GPUDirect Storage from device slots" : ", io_uring from pinned slots")
        << ");";
    o << " per step " << nvme_read_bytes * 1e-9 << " GB read, " << nvme_write_bytes * 1e-9
      << " GB written";
  }
  return o.str();
}

}  // namespace sf
