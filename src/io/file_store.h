// defines: sf::FileStore, sf::NvmeRegion — a private scratch store on a disk: regions of one
// unlinked O_DIRECT file, read and written asynchronously with tickets. NvmeStore moves host
// buffers through io_uring (io/nvme_store.h); the GPUDirect Storage store moves device buffers
// through cuFile (make_gds_store, backend/cuda/cuda_backend.h). The activation checkpoints on
// NVMe take either (engine/nvme_checkpoints.h).
#pragma once

#include <cstdint>
#include <string>

#include "io/extent_allocator.h"

namespace sf {

using NvmeRegion = Extent;

class FileStore {
 public:
  // Offsets, sizes and buffers of every request are multiples of this (O_DIRECT).
  static constexpr uint64_t kAlignment = 4096;
  using Ticket = uint64_t;
  struct Stats {
    uint64_t requests = 0, bytes_read = 0, bytes_written = 0;
    int max_in_flight = 0;  // the most requests in flight at once
  };

  virtual ~FileStore() = default;
  // `bytes` rounded up to 4 KiB, its blocks reserved on the disk: a full disk is an error here.
  virtual NvmeRegion alloc(uint64_t bytes) = 0;
  // `bytes` of `src` into `r` at `offset`; src must stay valid and unchanged until wait().
  virtual Ticket write(const NvmeRegion& r, uint64_t offset, const void* src, uint64_t bytes) = 0;
  // `bytes` of `r` at `offset` into `dst`, which must not be touched until wait().
  virtual Ticket read(const NvmeRegion& r, uint64_t offset, void* dst, uint64_t bytes) = 0;
  // Blocks until every request of `t` is complete, throwing an sf::Error that names the file,
  // the operation, the offset and what to do where one failed; each ticket is waited once.
  virtual void wait(Ticket t) = 0;
  virtual bool done(Ticket t) const = 0;
  virtual Stats stats() const = 0;
  virtual std::string describe() const = 0;  // one line for the run's log
};

}  // namespace sf
