#include "io/scratch_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "core/error.h"
#include "core/host_memory.h"
#include "io/nvme_faults.h"

namespace sf {
namespace fs = std::filesystem;
namespace {

constexpr const char* kPrefix = "slideformer-nvme-";
constexpr const char* kSuffix = ".tmp";

std::string errno_text(int err) {
  const char* name = strerrorname_np(err);
  return str_cat(std::strerror(err), " (", name ? name : "errno", ")");
}

std::string fs_type_name(const fs::path& dir, bool* memory) {
  struct statfs st {};
  *memory = false;
  if (::statfs(dir.c_str(), &st) != 0) return "unknown";
  switch (uint64_t(st.f_type)) {
    case 0xEF53:
      return "ext4";  // ext2/3/4 share the magic
    case 0x58465342:
      return "xfs";
    case 0x9123683E:
      return "btrfs";
    case 0xF2F52010:
      return "f2fs";
    case 0x2FC12FC1:
      return "zfs";
    case 0x6969:
      return "nfs";
    case 0x65735546:
      return "fuse";
    case 0x794C7630:
      return "overlayfs";
    case 0x01021994:
      *memory = true;
      return "tmpfs";
    case 0x858458F6:
      *memory = true;
      return "ramfs";
  }
  return str_cat("filesystem 0x", std::hex, uint64_t(st.f_type));
}

std::string free_space(const fs::path& dir) {
  struct statvfs st {};
  if (::statvfs(dir.c_str(), &st) != 0) return "an unknown amount";
  return gib(uint64_t(st.f_bavail) * st.f_frsize);
}

// "<pid>" of "slideformer-nvme-<pid>-<hex>.tmp", or 0 when `name` is not one of ours.
pid_t scratch_pid(const std::string& name) {
  const std::string pre = kPrefix, suf = kSuffix;
  if (name.size() <= pre.size() + suf.size() || name.compare(0, pre.size(), pre) != 0 ||
      name.compare(name.size() - suf.size(), suf.size(), suf) != 0) {
    return 0;
  }
  const std::string mid = name.substr(pre.size(), name.size() - pre.size() - suf.size());
  const size_t dash = mid.find('-');
  if (dash == 0 || dash == std::string::npos || dash > 9 || dash + 1 == mid.size()) return 0;
  const std::string pid = mid.substr(0, dash), hex = mid.substr(dash + 1);
  if (pid.find_first_not_of("0123456789") != std::string::npos) return 0;
  if (hex.find_first_not_of("0123456789abcdef") != std::string::npos) return 0;
  return pid_t(std::stol(pid));
}

}  // namespace

size_t sweep_stale_scratch_files(const fs::path& dir) {
  std::error_code ec;
  size_t removed = 0;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const pid_t pid = scratch_pid(it->path().filename().string());
    if (pid <= 0 || pid == getpid()) continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to signal)
    std::error_code rm;
    if (it->is_regular_file(rm) && fs::remove(it->path(), rm)) ++removed;
  }
  return removed;
}

ScratchFile::ScratchFile(const fs::path& dir, bool keep_name) : dir_(dir) {
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  SF_CHECK(!ec || ec == std::errc::no_such_file_or_directory, "--nvme-dir ", dir.string(),
           " cannot be examined (", ec.message(),
           "); give the run a directory it can search and write");
  SF_CHECK(fs::exists(st), "--nvme-dir ", dir.string(),
           " does not exist: create it on a local NVMe disk (mkdir -p) or name an existing "
           "directory");
  SF_CHECK(fs::is_directory(st), "--nvme-dir ", dir.string(),
           " is not a directory: name a directory on a local NVMe disk");
  fs_type_ = fs_type_name(dir, &memory_backed_);
  sweep_stale_scratch_files(dir);

  std::random_device rd;
  for (int attempt = 0; fd_ < 0; ++attempt) {
    const uint64_t r = (uint64_t(rd()) << 32) ^ rd();
    path_ = dir / str_cat(kPrefix, getpid(), "-", std::hex, r, kSuffix);
    const int flags = O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC;
    int fd = -1, err = 0;
    if (nvme_faults::direct_io_refused()) {  // as old tmpfs: the file is created, then refused
      fd = ::open(path_.c_str(), flags, 0600);
      err = fd < 0 ? errno : EINVAL;
      if (fd >= 0) ::close(fd), fd = -1;
    } else {
      fd = ::open(path_.c_str(), flags | O_DIRECT, 0600);
      err = fd < 0 ? errno : 0;
    }
    if (fd >= 0) {
      fd_ = fd;
      break;
    }
    if (err == EEXIST && attempt < 8) continue;
    if (err == EINVAL) {
      ::unlink(path_.c_str());  // created before O_DIRECT was refused: ours to remove
      SF_FAIL("--nvme-dir ", dir.string(), ": its filesystem (", fs_type_,
              ") refuses O_DIRECT (open of ", path_.string(), ": ", errno_text(err),
              "); the NVMe tier reads and writes the disk directly, with no page cache in "
              "between: point --nvme-dir at a directory on a local disk (ext4, xfs)",
              memory_backed_ ? "; tmpfs is memory, not a disk: without --nvme-dir the state "
                               "stays in host memory"
                             : "");
    }
    SF_FAIL("--nvme-dir ", dir.string(), ": cannot create a file there (open of ", path_.string(),
            ": ", errno_text(err),
            "); give the run a directory it can write: check its owner and permissions, that "
            "its filesystem is not mounted read-only and has space");
  }
  named_ = true;
  if (keep_name) return;
  try {
    unlink_name();
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

void ScratchFile::unlink_name() {
  if (!named_) return;
  // No name from here on: a crash, kill -9 included, leaves nothing in the directory.
  if (::unlink(path_.c_str()) != 0) {
    SF_FAIL("--nvme-dir ", dir_.string(), ": cannot unlink the scratch file ", path_.string(),
            " after creating it (", errno_text(errno),
            "); remove it by hand and give the run a directory where it may delete its files");
  }
  named_ = false;
}

ScratchFile::~ScratchFile() {
  if (named_) ::unlink(path_.c_str());
  if (fd_ >= 0) ::close(fd_);
}

void ScratchFile::grow_to(uint64_t bytes) {
  if (bytes <= size_) return;
  const uint64_t add = bytes - size_;
  int err = nvme_faults::take_reserve_failure();
  if (err == 0 && reserves_blocks_) {
    err = ::fallocate(fd_, 0, off_t(size_), off_t(add)) == 0 ? 0 : errno;
    if (err == EOPNOTSUPP)
      reserves_blocks_ = false, err = 0;
    else if (err == 0)
      size_ = bytes;
  }
  if (err == 0 && !reserves_blocks_ && size_ < bytes) {
    err = ::ftruncate(fd_, off_t(bytes)) == 0 ? 0 : errno;
    if (err == 0) size_ = bytes;
  }
  if (err == 0) return;
  (void)!::ftruncate(fd_, off_t(size_));  // give back what a partial fallocate took
  if (err == ENOSPC || err == EDQUOT) {
    SF_FAIL(path_.string(), " (the unlinked scratch file of --nvme-dir ", dir_.string(),
            "): reserving ", add, " bytes at offset ", size_, " failed: ", errno_text(err),
            "; its filesystem has ", free_space(dir_),
            " free: free space there, point --nvme-dir at a larger disk, or keep more of the "
            "state in host memory");
  }
  SF_FAIL(path_.string(), " (the unlinked scratch file of --nvme-dir ", dir_.string(),
          "): reserving ", add, " bytes at offset ", size_, " failed: ", errno_text(err),
          "; check the disk (dmesg) or point --nvme-dir at another one");
}

}  // namespace sf
