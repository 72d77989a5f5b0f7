// defines: sf::NvmeBandwidth, sf::measure_nvme — the disk's sequential read and write rates
// through the NVMe store (O_DIRECT, aligned buffers, io_uring at the queue depth the store will
// use), for the planner.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "io/nvme_store.h"

namespace sf {

// Seconds the disk needs at least for `read_bytes` and `write_bytes`: the reads and writes one
// after the other at their own rates, or together at the mixed rate (bytes of both per second)
// where it was measured (> 0) and is faster — a disk often serves more with both in flight.
double disk_seconds(double read_bytes, double write_bytes, double read_gbps, double write_gbps,
                    double mixed_gbps);

struct NvmeBandwidth {
  double write_gbps = 0, read_gbps = 0;  // 1e9 bytes per second
  double mixed_gbps = 0;  // reads and writes in flight together, bytes of both per second
  uint64_t bytes = 0;                    // written, then read back
  int queue_depth = 0;
  uint64_t request_bytes = 0;
  std::string fs_type;
  bool memory_backed = false;  // tmpfs: a figure for memory, not for a disk
  double seconds(double read_bytes, double write_bytes) const {
    return disk_seconds(read_bytes, write_bytes, read_gbps, write_gbps, mixed_gbps);
  }
};

// Writes `bytes` (rounded up to 4 KiB) into a fresh store in `dir`, then reads them back, then
// reads and writes them together (requests alternating), keeping `queue_depth` requests of
// `request_bytes` in flight; each rate is bytes over the wall time from the first submission to
// the last completion. The read-back is checked against what was written.
// Host memory: queue_depth × request_bytes.
// What a run measures its --nvme-dir with: 1 GiB at the store's queue depth (≈ 1 s on a disk of
// 2 GB/s; the file is private and removed at once).
constexpr uint64_t kNvmeProbeBytes = uint64_t(1) << 30;
constexpr int kNvmeProbeDepth = NvmeStoreOptions{}.queue_depth;

// One line: the rates, how they were measured, where.
std::string describe(const NvmeBandwidth& b, const std::filesystem::path& dir);

NvmeBandwidth measure_nvme(const std::filesystem::path& dir, uint64_t bytes, int queue_depth,
                           uint64_t request_bytes = NvmeStoreOptions{}.max_request_bytes);

}  // namespace sf
