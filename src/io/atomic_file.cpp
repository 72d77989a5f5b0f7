#include "io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace sf {
namespace {
std::string errno_str() { return std::strerror(errno); }
}  // namespace

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
