// defines: sf::NvmeCheckpoints — the layers' activation checkpoints (each layer's input, T × C in
// the compute dtype) on NVMe instead of host memory (EnginePlan::ckpt_on_nvme): a region per layer
// in a private NvmeStore, and a few pinned staging slots (layer l uses slot l mod K). Forward: the
// D2H offload of x_i lands in its slot (the slot's last occupant written out first), and the
// stream's callback submits the disk write. Backward: the read of x_j goes into its slot ahead of
// the restore (a slot that still holds x_j from the forward is not read again); the H2D restore
// copies from the slot, and a stream callback frees it. The bytes come back unchanged: the run is
// bit-identical with checkpoints in host memory (EngineNvme tests). With GPUDirect Storage the
// slots are device memory and cuFile moves them to and from the disk (make_gds_store): the
// offload and the restore are then device-to-device copies, and no host buffer is involved.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "io/nvme_store.h"

namespace sf {

// One checkpoint's trip from device memory to the disk and back through each path: pinned slot
// and io_uring (the D2H or H2D copy and the disk I/O one after the other, as one slot sees them)
// and GPUDirect Storage; GB/s of the checkpoint's bytes. gds_error says why GPUDirect did not run.
struct CheckpointPathRates {
  uint64_t bytes = 0;
  double uring_write_gbps = 0, uring_read_gbps = 0, gds_write_gbps = 0, gds_read_gbps = 0;
  std::string gds_store, gds_error;
  bool gds_faster() const;  // by the time of a write and a read
  std::string describe() const;
};

class NvmeCheckpoints {
 public:
  // `bytes`: one layer's checkpoint at most (the largest step's T × C × the dtype's size).
  // `gpu_direct`: the slots on the device, the store cuFile's (on the calling thread's device).
  NvmeCheckpoints(Backend& be, const std::filesystem::path& dir, int layers, uint64_t bytes,
                  int slots, bool gpu_direct = false);
  ~NvmeCheckpoints();
  NvmeCheckpoints(const NvmeCheckpoints&) = delete;
  NvmeCheckpoints& operator=(const NvmeCheckpoints&) = delete;

  static uint64_t staging_bytes(uint64_t bytes, int slots);
  // Measures both paths in `dir` for checkpoints of `bytes` (`rounds` of each, the backend's
  // device and a pinned buffer of that size): what nvme_gds auto chooses by.
  static CheckpointPathRates measure_paths(Backend& be, const std::filesystem::path& dir,
                                           uint64_t bytes, int rounds = 3);
  static uint64_t disk_bytes(int layers, uint64_t bytes);

  // Forward (the engine's thread): the slot the D2H of layer l's `bytes` goes into, once the
  // slot's last occupant is on the disk and no restore reads it.
  void* slot_for_offload(int layer);
  // From the D2H stream once the copy is done: submits the disk write. Never throws (an error is
  // kept and thrown by the next call on the engine's thread).
  void offloaded(int layer, uint64_t bytes);
  // Backward (the engine's thread): issues the read of layer l into its slot if the slot is free
  // (never blocks); restore_source waits for it (issuing it if needed) and pins the slot for the
  // H2D copy until restored(l), called from the H2D stream once the copy is done.
  void prefetch(int layer, uint64_t bytes);
  const void* restore_source(int layer, uint64_t bytes);
  void restored(int layer);

  FileStore::Stats stats() const { return store_->stats(); }
  std::string describe() const { return store_->describe(); }

 private:
  struct Slot;
  void settle(std::unique_lock<std::mutex>& lk, Slot& s);
  // Waits until slot s may be refilled: no I/O in flight, no restore pinning it, no pending write.
  void make_free(std::unique_lock<std::mutex>& lk, Slot& s);
  void issue_read(Slot& s, int layer, uint64_t bytes);
  void throw_if_broken() const;

  Buffer staging_;  // before the store: destroyed after it, which waits for its I/O
  std::unique_ptr<FileStore> store_;
  std::vector<NvmeRegion> regions_;  // per layer
  std::vector<Slot> slots_;
  uint64_t slot_bytes_ = 0;
  std::string error_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
};

}  // namespace sf
