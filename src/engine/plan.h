// defines: sf::PlanRequest, sf::EnginePlan, sf::make_plan, sf::DeviceParts, sf::carve_device,
// sf::HostParts — every byte the engine takes, computed once: `plan` prints it, the engine
// allocates exactly it (carve_device is the one routine that both measures and carves), and the
// host and device checks read it.
//
// Device: the outer unit (embedding, final norm, head: compute-dtype weights, fp32 gradients and
// their compute-dtype copy for the D2H — none when both are GPU-resident), W cache slots of the
// largest layer (weights and the compute-dtype copy of the gradients; on one device the slots share
// one fp32 gradient buffer — a layer's gradient is cast to its stage on the compute stream before
// the next layer's backward zeroes the buffer — and, untied, that buffer and the stages lie inside
// the outer unit's fp32 gradients where they fit (PlanDims::slots_in_outer); with several devices,
// each slot has its own, read by the reduction while the next layer computes), one fp32 upload tile
// (weights go H2D as fp32 and are cast on the device: no compute-dtype copy of the model on the
// host), the step's batch, three T×C activation buffers (x/y of the forward, where the backward
// restores its checkpoints; ∂L/∂x) and the workspaces of ONE micro-batch of M tokens (layer, head
// and the backend's own), and the optimizer state (fp32 master, m, v) of the GPU-resident share:
// the units the plan chooses to update on the device, where the budget leaves room (embedding
// first, then the head). Host: master weights and Adam m, v of the other units (12 B/param),
// gradients, the activation checkpoints (L × T × C) and the batch staging.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "model/layout.h"
#include "model/spec.h"

namespace sf {

// Micro-batches of 8k tokens run the 8B layer's GEMMs (8192 × 4096 × 14336) at their full rate:
// `plan` measured the layer (forward, recompute + backward) at 709–724 TFLOP/s at M = 8192 and
// 693–735 at 16384 on the H200 machine (bench/e2e/h200_2026-12-04_*), 660 at 2048. So the plan
// trades larger M for optimizer state on the device only down to here; below it only where the
// prediction says the trade pays (weigh_micro_batch, engine/weigh.h).
constexpr int64_t kSaturatingTokens = 8192;
// Which units' optimizer state lives on the device. kAuto: what fits the budget after the
// window and micro-batch (none without a budget) — the embedding, the head, then decoder layers
// from the bottom up (with clipping each also keeps its fp32 gradient for the update after the
// norm); kOff: none; kAll: the embedding and the head, whatever the budget says (a budget too
// small is then an error).
enum class DeviceOptimizer { kAuto, kOff, kAll };

struct PlanRequest {
  ModelSpec spec;
  DType dtype = DType::kF32;  // the backend's compute dtype
  int window = 2;
  int64_t max_tokens = 0;         // T of the largest step
  int64_t max_sequences = 0;      // samples in a step, at most
  int64_t max_sample_tokens = 0;  // the longest sample (a micro-batch holds it whole); 0 = T
  int64_t micro_tokens = 0;       // M asked for; 0: the largest that fits the budget (T if none)
  int64_t mlp_tokens = 0;         // F asked for (tests); 0: M, or less where the budget needs it
  uint64_t gpu_budget = 0;        // everything the process holds on the device; 0: no limit
  // Device memory held outside the engine's buffer, counted against the budget: the CUDA
  // context, library handles and, once it exists, the backend's scratch (device-wide in use).
  uint64_t device_outside = 0;
  // The backend's scratch for micro-batches of M tokens when it is not allocated yet (planning
  // before the backend exists); null when it is already in device_outside.
  std::function<uint64_t(int64_t micro_tokens)> backend_scratch;
  bool clipping = false;  // exact global-norm clipping: every gradient held until the norm is known
  int64_t grad_piece = 0;   // elements per gradient D2H piece (ring slot); 0: the default
  int64_t state_piece = 0;  // elements per piece of a state copy through the host; 0: the default
  DeviceOptimizer device_optimizer = DeviceOptimizer::kAuto;
  // Without clipping: how many host units keep a gradient buffer of their own on the host, from
  // the head down (the head, layer L-1, L-2, …); -1: the plan's choice (kHeldShare of the host
  // parameters), 0: none (every gradient goes through the ring). See EnginePlan::held.
  int held_units = -1;
  // With clipping: how many host units, from the bottom up (the embedding, layer 0, 1, …; not
  // on NVMe), have their update split in two (EnginePlan::moments_later); -1: none here, the
  // trainer's choice from the machine's constants (weigh_moments_later); 0: none.
  int moments_later_units = -1;
  // Non-empty: exactly these units on the device (per unit, unit_layouts order) — the choice of
  // a plan made before the backend existed, so the engine's plan keeps it.
  std::vector<bool> on_device;
  // The NVMe tier (--nvme-dir; engine/nvme_tier.h): the Adam m and v of decoder layers from the
  // bottom up on disk (of those whose state is on the host: a GPU-resident layer is skipped), and
  // of those, from the bottom up, the master weights too. nvme_layers:
  // that many layers; nvme_masters: that many masters (at most the layers on disk). -1: the
  // fewest that bring the host total and its margin (host_margin) within host_limit (none where
  // host_limit is 0) — every layer's m and v before any master: m and v free 8 B/param of host
  // for 16 B of disk traffic a step, a master 4 B for 12-16 B.
  bool nvme = false;
  int nvme_layers = -1;
  int nvme_masters = -1;
  uint64_t host_limit = 0;  // host bytes the plan may take (the budget less what is held)
  // Non-empty: exactly these units (a plan made earlier); master_on_nvme empty: no master.
  std::vector<bool> on_nvme, master_on_nvme;
  // The activation checkpoints on NVMe too: 1 yes, 0 no, -1 where the host limit needs it (tried
  // before any layer's state: 2 B of disk traffic per byte of host freed, as m and v's).
  int nvme_checkpoints = -1;
  // The checkpoints' staging slots on the device, moved by GPUDirect Storage (cuFile) instead of
  // through pinned host slots and io_uring, where they go to NVMe and the budget has room.
  bool ckpt_gpu_direct = false;
  // The cache slots' fp32 gradient and their stages inside the outer unit's fp32 gradient buffer,
  // where they fit (one device, untied: PlanDims::slots_in_outer). Off: each in memory of its own
  // (tests compare the two).
  bool slots_in_outer = true;
  // Data parallel (--gpus): engines, one per device, each planned for its own share of a step
  // (max_tokens and max_sequences are per device); the host holds one copy of the state and
  // each engine's checkpoints and batch staging. The GPU-resident share and NVMe are planned for
  // one device only (refused with more).
  int devices = 1;
};

struct DeviceBytes {
  uint64_t outer = 0, slots = 0, upload = 0, batch = 0, activations = 0, workspace = 0;
  uint64_t optimizer = 0;  // fp32 master, m, v of the GPU-resident units
  // The NVMe checkpoints' slots with GPUDirect Storage (NvmeCheckpoints allocates them: not in
  // the engine's buffer, in device_total).
  uint64_t ckpt_staging = 0;
  uint64_t engine() const {
    return outer + slots + upload + batch + activations + workspace + optimizer;
  }
};

struct HostBytes {
  uint64_t state = 0;         // fp32 master, Adam m, v of the host units; the masters kept here
  uint64_t grads = 0;         // gradients (compute dtype): the ring and the held units'
  uint64_t checkpoints = 0;   // layer inputs, L × T × C
  uint64_t staging = 0;       // batch staging
  uint64_t state_copy = 0;    // loading, saving, resuming: a piece of a GPU-resident tensor
  uint64_t nvme_staging = 0;  // the NVMe tier's pinned update and load slots
  uint64_t total() const {
    return state + grads + checkpoints + staging + state_copy + nvme_staging;
  }
};

struct EnginePlan {
  int window = 0;
  int64_t micro_tokens = 0;  // M
  // F: the MLP of a micro-batch runs in blocks of this many rows (= M unless the budget needed
  // less: a long sample bounds M from below, not F).
  int64_t mlp_tokens = 0;
  int64_t max_tokens = 0, max_sequences = 0;
  int64_t upload_tile = 0;  // fp32 elements per H2D tile
  // Gradients go D2H in pieces of grad_piece elements; without clipping through a ring of
  // grad_ring_slots pinned buffers (0 when clipping: each unit then has a host gradient).
  int64_t grad_piece = 0;
  // Loading, saving and resuming copy a GPU-resident or NVMe tensor through the host in pieces
  // of at most this many fp32 elements (host.state_copy).
  int64_t state_piece = 0;
  int grad_ring_slots = 0;
  int64_t params = 0;
  // Per unit (unit_layouts order): its optimizer state lives on the device and is updated there.
  std::vector<bool> on_device;
  // Per unit: its gradient is held whole in a host buffer of its own. With clipping, every host
  // unit (the updates wait for the norm). Without, the units whose gradients the backward makes
  // first and the forward needs last — the head and the top layers: their updates wait until no
  // ring piece is pending and then run in forward order, so the CPU AdamW keeps working through
  // the next step's forward instead of idling there (at small batch, where the CPU AdamW is the
  // step, that idle time is the forward and the head: docs/decisions.md).
  std::vector<bool> held;
  int64_t held_params = 0;
  // Per unit, with clipping: the update after the norm writes the master alone and the Adam m
  // and v later, from the same held gradient, while the next step's forward and backward run —
  // before the unit's next gradient arrives (its D2H waits for them). The pass after the norm,
  // which the next forward waits for, then moves 18 B/param instead of 26 (bf16 gradients) and
  // the moments' pass fills the CPU's idle time in the backward. Units from the bottom up: their
  // gradients arrive last, so their moments have the most time. Nothing more is held.
  std::vector<bool> moments_later;
  int64_t moments_later_params = 0;
  int64_t device_params = 0;  // parameters of those units
  // Where the budget alone stopped the plan's share short of the layers: the device memory one
  // more layer's state would need, to say what a larger budget buys; else 0.
  uint64_t next_layer_bytes = 0;
  // Per unit: its Adam m and v live on NVMe (layers from the bottom up; never held without
  // clipping), and where master_on_nvme its master weights too. Per step the tier reads m and v
  // (and the master) for the update and writes them back (16 B/param; 24 B with the master),
  // and a master on disk is read for each load (forward, and backward where the layer is not
  // still cached: 4-8 B more).
  std::vector<bool> on_nvme, master_on_nvme;
  int64_t nvme_params = 0, nvme_master_params = 0;
  int nvme_update_slots = 0, nvme_load_slots = 0;
  uint64_t nvme_disk = 0;  // bytes of the scratch files
  // The activation checkpoints on NVMe (engine/nvme_checkpoints.h): host.checkpoints is then
  // ckpt_slots staging buffers of one layer's checkpoint.
  bool ckpt_on_nvme = false;
  bool ckpt_gds = false;  // their slots on the device, through GPUDirect Storage
  int ckpt_slots = 0;
  double nvme_read_bytes = 0, nvme_write_bytes = 0;  // per step
  int64_t layers = 0, hidden = 0;
  int devices = 1;  // data parallel: the device figures are each device's, the host's all of them
  size_t dtype_bytes = 0;  // the compute dtype's size
  DeviceBytes device;
  uint64_t backend_scratch = 0;  // planned, when the backend did not exist yet
  uint64_t device_outside = 0;
  uint64_t gpu_budget = 0;
  HostBytes host;
  uint64_t device_total() const {
    return device.engine() + device.ckpt_staging + backend_scratch + device_outside;
  }
  std::string describe() const;    // several lines, for `plan` and the start of `train`
  std::string held_names() const;  // "the head and layers 26-31 (N parameters)"
  // "the embedding and layers 0-11 (N parameters)"
  std::string moments_later_names() const;
  // Marks the first `count` host units of `units` (unit_layouts) from the bottom up, not on the
  // device or NVMe, as moments_later; with clipping only (else none).
  void set_moments_later(const std::vector<UnitLayout>& units, int count, bool clipping);
};

// Chooses M (and checks W) so the device total fits the budget; refuses, naming the smallest
// budget that would work and what to change, when nothing fits.
EnginePlan make_plan(const PlanRequest& request);

// The engine's device buffer, carved in one place. With base == null only measures.
struct DeviceParts {
  struct Slot {
    void* params = nullptr;
    float* grads = nullptr;
    void* stage = nullptr;  // compute-dtype copy of the grads for the D2H (null for F32)
  };
  void* outer_params = nullptr;
  float* outer_grads = nullptr;
  void* outer_stage = nullptr;
  std::vector<Slot> slots;
  bool slots_in_outer = false;  // some of the slots' buffers are inside outer_grads
  float* upload = nullptr;  // fp32 H2D tile
  void* batch = nullptr;    // ids, targets, positions, micro-batch cu_seqlens (I32)
  float* inv_freq = nullptr;
  void* act[2] = {};
  void* restore[2] = {};
  void* grad = nullptr;
  float* loss = nullptr;
  float* pad_row = nullptr;
  void* workspace = nullptr;
  void* head_workspace = nullptr;
  // Per unit: its fp32 master, m, v (UnitState::state_bytes) when on the device, else null; the
  // sum of squares of its gradient (one double each: a device unit's formed on the compute
  // stream, a held unit's on the gradient stream before its D2H), with each stream's scratch
  // (Backend::kSumSquaresPartials doubles); and the weights each device update left non-finite
  // (Backend::adamw's count, one int64 each; null without device units).
  std::vector<void*> unit_state;
  double* sumsq = nullptr;
  double* compute_partials = nullptr;
  double* gradient_partials = nullptr;
  int64_t* nonfinite = nullptr;
};
struct PlanDims {
  int window;
  int64_t tokens, sequences, micro_tokens, upload_tile;
  std::vector<bool> on_device;  // per unit; empty: none
  bool clipping = false;
  // One fp32 gradient buffer for every slot (one device); false: one each (data parallel, where
  // the reduce stream reads a layer's gradient while the next layer's backward runs).
  bool shared_slot_grads = true;
  int64_t mlp_tokens = 0;  // F; 0: micro_tokens
  // With one shared slot gradient and untied embeddings: the slots' fp32 gradient, then their
  // stages, inside the outer unit's fp32 gradient buffer while they fit there. The layers'
  // backward runs after the head's gradient has left that buffer and before the embedding's
  // arrives (the engine waits for the head's D2H from it and for the slots' last D2Hs), so the two
  // never live at once: for 8B, 1.7 GB of the buffer's 2.1 GB that would otherwise be taken again.
  bool slots_in_outer = true;
};
DeviceParts carve_device(const ModelSpec& spec, DType dt, const PlanDims& d, void* base,
                         DeviceBytes* bytes);

// Elements of the outer unit's fp32 gradient buffer: embedding + head when tied (the head adds
// into the embedding's); else the larger of the two: they take turns (a gradient waiting for a
// clipped update leaves it first: UnitState::keeps_device_grad, or the host's held copy).
int64_t outer_grad_elems(const ModelSpec& spec);

// I32 entries of the batch area: ids, targets, positions (T each) and every micro-batch's own
// cu_seqlens (samples + 1 each: at most 2·nseq in all).
int64_t batch_ints(int64_t tokens, int64_t sequences);

}  // namespace sf
