// defines: sf::NvmeTier — the optimizer state of the units the plan puts on NVMe
// (EnginePlan::on_nvme), in a private NvmeStore (io/nvme_store.h): one region per unit, each part
// 4 KiB-aligned: [m | v] where the unit's fp32 master weights stay in host memory (the plan moves
// the Adam moments first: 16 B of disk traffic a step per parameter for 8 B of host freed), or
// [master | m | v] where they went too (EnginePlan::master_on_nvme: 32-36 B for 12 B). Two pools
// of pinned staging buffers stand between the disk and the rest of the engine:
//   update slots (a unit's state on disk): the UpdateWorker acquires a unit before its first update
//     of a step and releases it after the last; release writes the state back behind it, and
//     acquire reads the next units of the update order ahead into free slots, so the disk streams
//     while the CPU AdamW runs. A unit still resident in a slot is not read again;
//   load slots (a unit's master alone): the engine's uploads read from them; the engine reads the
//     next unit it will load ahead (prefetch_master) while the current one goes H2D.
// A unit's reads wait for its pending write-back, and a master read before the unit's last update
// was written is never used (each unit's version counts its write-backs). The bytes go to the disk
// and come back unchanged: a run with units here is bit-identical with the same run held in host
// memory (EngineNvme tests).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "engine/unit_state.h"
#include "io/nvme_store.h"

namespace sf {

class NvmeTier {
 public:
  // `on_nvme`: per unit (unit_layouts order). `host_master`: per unit, where an NVMe unit's
  // master weights stay in host memory (its m and v alone on the disk), else null.
  // `update_order`: the NVMe units in the order the optimizer updates them in a step (without
  // clipping the backward's, L-1 … 0; with clipping the forward's), for the reads ahead.
  // `load_slots` may be 0 where every master stays on the host.
  NvmeTier(Backend& be, const std::filesystem::path& dir, const std::vector<UnitLayout>& layouts,
           const std::vector<bool>& on_nvme, const std::vector<float*>& host_master,
           int update_slots, int load_slots, std::vector<int> update_order);
  ~NvmeTier();
  NvmeTier(const NvmeTier&) = delete;
  NvmeTier& operator=(const NvmeTier&) = delete;

  // Bytes of pinned staging the tier takes, and of disk, for these units (the plan's figures);
  // `master_on_nvme`: per unit, its master weights on the disk too.
  static uint64_t staging_bytes(const std::vector<UnitLayout>& layouts,
                                const std::vector<bool>& on_nvme,
                                const std::vector<bool>& master_on_nvme, int update_slots,
                                int load_slots);
  static uint64_t disk_bytes(const std::vector<UnitLayout>& layouts,
                             const std::vector<bool>& on_nvme,
                             const std::vector<bool>& master_on_nvme);

  // The whole state of unit u, synchronously (initialising, saving, resuming): `fn` reads it and,
  // with `write_back`, may change it (a master on the host is changed in place). Every pending
  // read and write is settled first.
  void with_state(int u, bool write_back, const std::function<void(float*, float*, float*)>& fn);

  // Elements [offset, offset + count) of unit u's master (which 0), m (1) or v (2) into `dst`,
  // synchronously (a checkpoint writer fetching one tensor).
  void read_part(int u, int which, int64_t offset, int64_t count, float* dst);

  // The update worker's side (one thread). Points h.m, h.v (and h.master where it is on the disk)
  // at unit u's state in an update slot (reading it if it is not resident) and reads the next
  // units ahead.
  void acquire_state(UnitState& h, int u);
  // Writes unit u's state back (asynchronously) and clears h's pointers into the slot.
  void release_state(UnitState& h, int u);

  // The engine's side, for units whose master is on the disk (UnitState::master_on_nvme). Unit
  // u's current master weights in a load slot, pinned until
  // release_master (which any thread may call, e.g. a stream callback once the H2D copy is done).
  const float* acquire_master(int u);
  void release_master(int u);
  // Issues the read of u's master into a free load slot, if there is one; never blocks.
  void prefetch_master(int u);

  // Every read and write settled, every cached copy dropped (before the state is visited).
  void drain();

  NvmeStore::Stats stats() const;

 private:
  struct Slot;
  struct Part;  // where a unit's region lies and its byte sizes
  void settle(std::unique_lock<std::mutex>& lk, Slot& s);
  void settle_writes_of(std::unique_lock<std::mutex>& lk, int u);
  Slot* find(std::vector<Slot>& pool, int u);
  // A slot of `pool` to reuse: unpinned, I/O settled (waits for the oldest if `block`), not
  // holding one of `keep`; null when none is free and !block.
  Slot* take(std::unique_lock<std::mutex>& lk, std::vector<Slot>& pool, bool block,
             const std::vector<int>& keep);
  void read_state_into(Slot& s, int u);
  void read_master_into(Slot& s, int u);
  void throw_if_broken() const;

  Buffer staging_;  // before the store: destroyed after it, which waits for its I/O
  std::unique_ptr<NvmeStore> store_;
  std::vector<Part> parts_;  // per unit; bytes == 0 where not on NVMe
  std::vector<Slot> update_, load_;
  std::vector<int> order_;          // update order of the NVMe units
  std::vector<int64_t> version_;    // per unit: write-backs so far
  uint64_t clock_ = 0;              // for least-recently-used reuse
  std::string error_;               // the first I/O failure: the tier is broken from then on
  mutable std::mutex mu_;
  std::condition_variable cv_;
};

}  // namespace sf
