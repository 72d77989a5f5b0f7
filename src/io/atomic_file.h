// defines: sf::AtomicFile, write_file_atomic — files that appear under their final name only
// when complete: written to "<name>.tmp-<pid>" in the same directory, fsync'd, then renamed.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

namespace sf {

// Removed by the destructor unless committed with finish() + rename_to_final().
class AtomicFile {
 public:
  explicit AtomicFile(const std::filesystem::path& final_path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* p, size_t n);
  // Flushed to disk before the rename, so the final name never points at a partial file.
  void finish();
  void rename_to_final();
  const std::filesystem::path& final_path() const { return final_; }
  const std::filesystem::path& tmp_path() const { return tmp_; }

 private:
  std::filesystem::path final_, tmp_;
  int fd_ = -1;
  bool renamed_ = false;
};

// Removes "<name>.tmp-<pid>" files in `dir` whose process is gone (kill -9 during a save leaves
// them: up to a whole checkpoint). Files of live processes are kept. Returns how many it removed.
size_t remove_stale_temporaries(const std::filesystem::path& dir);

// Test seam: after `bytes` more bytes, AtomicFile::write fails as a full disk does (ENOSPC);
// negative turns it off. For tests of what a failed save leaves behind.
void inject_write_failure_after(int64_t bytes);

// The whole of `text` under `path`, atomically.
void write_file_atomic(const std::filesystem::path& path, const std::string& text);

// fsync of a directory, so renames inside it are durable (best effort).
void fsync_dir(const std::filesystem::path& dir);

}  // namespace sf
