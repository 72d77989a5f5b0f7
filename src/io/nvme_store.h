// defines: sf::NvmeStore, sf::NvmeStoreOptions — a private scratch store (io/file_store.h) in
// --nvme-dir: regions of one unlinked O_DIRECT file (io/scratch_file.h), read and written
// asynchronously through io_uring at a fixed queue depth, in requests of at most
// max_request_bytes. Submitting returns a ticket; wait(ticket) returns when its bytes are on the
// disk (write) or in the buffer (read), or throws an sf::Error naming the file, the operation,
// the offset and size, and what to do.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "io/extent_allocator.h"
#include "io/file_store.h"
#include "io/scratch_file.h"

namespace sf {

struct NvmeStoreOptions {
  int queue_depth = 32;                     // requests in flight at once
  uint64_t max_request_bytes = 1ull << 20;  // longer reads and writes are split
};

class NvmeStore final : public FileStore {
 public:
  // Refuses a bad `dir` before anything else (io/scratch_file.h) and a kernel without io_uring.
  explicit NvmeStore(const std::filesystem::path& dir, NvmeStoreOptions opt = {});
  // Waits for every request in flight (errors are dropped: wait for tickets to see them).
  ~NvmeStore();
  NvmeStore(const NvmeStore&) = delete;
  NvmeStore& operator=(const NvmeStore&) = delete;

  // `bytes` rounded up to 4 KiB, its blocks reserved on the disk: a full disk is an error here,
  // not at a later write (where the filesystem can reserve: ScratchFile::reserves_blocks).
  NvmeRegion alloc(uint64_t bytes) override;
  // No request may be in flight on `r`.
  void free(const NvmeRegion& r);

  // Host buffers (FileStore's interface).
  Ticket write(const NvmeRegion& r, uint64_t offset, const void* src, uint64_t bytes) override;
  Ticket read(const NvmeRegion& r, uint64_t offset, void* dst, uint64_t bytes) override;
  void wait(Ticket t) override;
  bool done(Ticket t) const override;
  Stats stats() const override;  // max_in_flight: the most requests the kernel held at once
  const ScratchFile& file() const;
  const NvmeStoreOptions& options() const;
  std::string describe() const override;

  // False, with the reason, where io_uring cannot be set up (kernel, sysctl, seccomp).
  static bool io_uring_available(std::string* why);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sf
