#include "io/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace sf {
namespace {
std::string errno_str() { return std::strerror(errno); }
std::atomic<int64_t> g_fail_after{-1};  // inject_write_failure_after
}  // namespace

void inject_write_failure_after(int64_t bytes) { g_fail_after = bytes; }

size_t remove_stale_temporaries(const std::filesystem::path& dir) {
  std::error_code ec;
  size_t removed = 0;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const size_t at = name.rfind(".tmp-");
    if (at == std::string::npos || at == 0 || at + 5 == name.size()) continue;
    const std::string digits = name.substr(at + 5);
    if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) continue;
    const pid_t pid = pid_t(std::stol(digits));
    if (pid <= 0 || pid == getpid()) continue;  // ours: an AtomicFile of this process owns it
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to signal)
    std::error_code rm;
    if (it->is_regular_file(rm) && std::filesystem::remove(it->path(), rm)) ++removed;
  }
  return removed;
}

AtomicFile::AtomicFile(const std::filesystem::path& final_path)
    : final_(final_path), tmp_(str_cat(final_path.string(), ".tmp-", getpid())) {
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  SF_CHECK(fd_ >= 0, tmp_.string(), ": cannot create (", errno_str(),
           "); check that the directory is writable and has space");
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!renamed_) ::unlink(tmp_.c_str());
}

void AtomicFile::write(const void* p, size_t n) {
  const auto* c = static_cast<const char*>(p);
  if (int64_t left = g_fail_after.load(); left >= 0) {
    if (int64_t(n) > left) {
      g_fail_after = 0;
      errno = ENOSPC;
      SF_FAIL(tmp_.string(), ": write failed (", errno_str(), "); check free space");
    }
    g_fail_after = left - int64_t(n);
  }
  while (n > 0) {
    ssize_t w = ::write(fd_, c, n);
    if (w < 0 && errno == EINTR) continue;
    SF_CHECK(w > 0, tmp_.string(), ": write failed (", errno_str(), "); check free space");
    c += w;
    n -= size_t(w);
  }
}

void AtomicFile::finish() {
  SF_CHECK(::fsync(fd_) == 0, tmp_.string(), ": fsync failed (", errno_str(), ")");
  SF_CHECK(::close(fd_) == 0, tmp_.string(), ": close failed (", errno_str(), ")");
  fd_ = -1;
}

void AtomicFile::rename_to_final() {
  SF_CHECK(::rename(tmp_.c_str(), final_.c_str()) == 0, tmp_.string(), ": rename to ",
           final_.string(), " failed (", errno_str(), ")");
  renamed_ = true;
}

void write_file_atomic(const std::filesystem::path& path, const std::string& text) {
  AtomicFile f(path);
  f.write(text.data(), text.size());
  f.finish();
  f.rename_to_final();
}

void fsync_dir(const std::filesystem::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

}  // namespace sf
