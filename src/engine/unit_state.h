// defines: sf::UnitState — one unit's persistent training state: fp32 master weights and Adam m
// and v (12 B/param), in pinned host memory (updated by the CPU optimizer) or, for the plan's
// GPU-resident share, in device memory (updated there by Backend::adamw); and, for host units
// where the plan holds them, the gradient of the last backward (compute dtype). There is no
// compute-dtype copy of the weights on the host: uploads read the fp32 master and the device
// casts it.
#pragma once

#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "model/layout.h"

namespace sf {

struct UnitState {
  UnitLayout layout;
  float* master = nullptr;
  float* m = nullptr;
  float* v = nullptr;
  // The gradient held until the update, in the compute dtype: in host memory for host units with
  // clipping (and the plan's held ones without); in device memory for a GPU-resident unit other
  // than the embedding with clipping (the embedding's stays in the outer unit's fp32 buffer).
  void* grad = nullptr;
  bool on_device = false;  // master, m, v are device memory: the device updates this unit
  // m and v are on NVMe (engine/nvme_tier.h), and the master too where master_on_nvme (else it
  // stays in host memory, `master`); the pointers to what is on the disk point into an update
  // slot only while the update worker holds the unit (NvmeTier::acquire_state), else null.
  bool on_nvme = false;
  bool master_on_nvme = false;
  // With clipping, the update after the norm writes the master alone, and m and v later (the
  // worker's "moments" pass, from the same held gradient) while the next backward runs, before
  // this unit's next gradient overwrites `grad` (EnginePlan::moments_later).
  bool moments_later = false;

  static size_t state_bytes(int64_t numel);                // master, m, v
  static size_t master_bytes(int64_t numel);               // the master alone
  static size_t grad_bytes(int64_t numel, DType compute);  // the gradient
  // What of the state a unit keeps in pinned host memory: nothing on the device or with its
  // master on NVMe, the master alone with m and v on NVMe, else master, m and v.
  static size_t host_state_bytes(int64_t numel, bool on_device, bool on_nvme, bool master_on_nvme);
  // A GPU-resident unit (unit_layouts index `unit`) keeps its own gradient, in the compute dtype
  // as a host unit's, where the run clips and it is not the embedding: a layer's slot, and the
  // outer unit's fp32 buffer the head shares with the embedding, are overwritten before the norm
  // is known. The embedding's gradient is the step's last: it waits in that buffer.
  static bool keeps_device_grad(size_t unit, bool clipping) { return clipping && unit > 0; }
  // What a GPU-resident unit takes on the device: master, m, v, then that gradient (grad_bytes).
  static size_t device_bytes(int64_t numel, bool keeps_grad, DType compute) {
    return state_bytes(numel) + (keeps_grad ? grad_bytes(numel, compute) : 0);
  }
  // Points master, m, v at consecutive ranges of `state` (state_bytes) and grad at `grad`; with
  // `master_only` (an NVMe unit whose master stays here: master_bytes), m and v stay null.
  void carve(void* state, void* grad, bool master_only = false);
};

// Entries [first, end) of `whole` as a layout of their own, offsets counted from the first's:
// the outer unit (embedding, final norm, head) is updated as two units, the embedding and the
// head, whose gradients are complete at different times of the backward.
UnitLayout slice_layout(const UnitLayout& whole, size_t first, size_t end);

// The units the optimizer updates, in order: the embedding, the layers, the final norm and head
// (with tied embeddings, the norm alone).
std::vector<UnitLayout> unit_layouts(const ModelSpec& spec);

}  // namespace sf
