// defines: sf::ScratchFile, sf::sweep_stale_scratch_files — the one
// private file of an NVMe store: created in --nvme-dir with a unique name (O_CREAT|O_EXCL, 0600,
// O_DIRECT) and unlinked at once (or, for cuFile, once it has registered the file: see
// keep_name), so only the open descriptor keeps it; when the process ends, in any way, the kernel
// frees its blocks and nothing is left for a later run to mistake for state.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace sf {

class ScratchFile {
 public:
  // Refuses, with an sf::Error saying what to do, a `dir` that does not exist, is not a directory,
  // cannot be written, or whose filesystem refuses O_DIRECT (tmpfs before Linux 6.6, some FUSE and
  // network filesystems): no buffered fallback (docs/decisions.md). Removes the files that killed
  // runs left in the instant between create and unlink (sweep_stale_scratch_files) first.
  // With `keep_name` the file keeps its name until unlink_name (or destruction): cuFile's
  // compatibility mode opens the registered file again by its name. A crash meanwhile leaves a
  // file the next run's sweep removes, as for the instant above.
  explicit ScratchFile(const std::filesystem::path& dir, bool keep_name = false);
  ~ScratchFile();
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  int fd() const { return fd_; }
  // Removes the name kept by keep_name (nothing if it is gone already); an sf::Error if it cannot.
  void unlink_name();
  // The name the file had before it was unlinked, for messages.
  const std::filesystem::path& path() const { return path_; }
  const std::string& fs_type() const { return fs_type_; }  // "ext4", "xfs", "tmpfs", ...
  // tmpfs or ramfs: the bytes placed there take host memory, not disk.
  bool memory_backed() const { return memory_backed_; }
  // False where the filesystem cannot reserve blocks (fallocate unsupported): grow_to then
  // extends the file sparse and a full disk shows up at a write, not at alloc.
  bool reserves_blocks() const { return reserves_blocks_; }
  uint64_t size() const { return size_; }

  // Makes the file at least `bytes` long with its blocks reserved, so that writes within it
  // cannot fail for space. A disk without room is an sf::Error naming the directory, the bytes
  // asked for and the bytes free.
  void grow_to(uint64_t bytes);

 private:
  std::filesystem::path dir_, path_;
  std::string fs_type_;
  int fd_ = -1;
  bool named_ = false;  // the name is still in the directory (keep_name, before unlink_name)
  bool memory_backed_ = false, reserves_blocks_ = true;
  uint64_t size_ = 0;
};

// Removes "slideformer-nvme-<pid>-<hex>.tmp" files in `dir` whose process is gone; files of live
// processes and other names are kept. Returns how many it removed.
size_t sweep_stale_scratch_files(const std::filesystem::path& dir);

}  // namespace sf
