// defines: helpers of the NVMe store tests — a fresh directory, aligned random buffers, the
// io_uring skip, and running a function in a forked child that reports a message back.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <random>
#include <string>

#include "io/nvme_store.h"

namespace sf::nvme_test {

namespace fs = std::filesystem;

// Skips the test where this machine cannot set up io_uring, saying why.
#define SF_SKIP_WITHOUT_IO_URING()                                                  \
  do {                                                                              \
    std::string why_;                                                               \
    if (!::sf::NvmeStore::io_uring_available(&why_))                                \
      GTEST_SKIP() << "io_uring cannot be set up on this machine (" << why_ << ")"; \
  } while (0)

inline fs::path fresh_dir(const std::string& name) {
  const fs::path d =
      fs::temp_directory_path() / ("sf_nvme_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

inline size_t entries(const fs::path& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

struct FreeAligned {
  void operator()(char* p) const { std::free(p); }
};
using AlignedBuffer = std::unique_ptr<char, FreeAligned>;

inline AlignedBuffer aligned(size_t bytes) {
  return AlignedBuffer(static_cast<char*>(std::aligned_alloc(NvmeStore::kAlignment, bytes)));
}

inline AlignedBuffer random_buffer(size_t bytes, std::mt19937_64& rng) {
  AlignedBuffer b = aligned(bytes);
  for (size_t i = 0; i + 8 <= bytes; i += 8) {
    const uint64_t x = rng();
    std::memcpy(b.get() + i, &x, 8);
  }
  return b;
}

// Runs `fn` in a forked child; its return value is the child's exit code and what it writes to
// `msg` comes back as the message.
struct ChildResult {
  int code = -1;
  std::string message;
};
inline ChildResult run_in_child(const std::function<int(std::string& msg)>& fn) {
  int fds[2];
  if (pipe(fds) != 0) return {-1, "pipe failed"};
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    std::string msg;
    int code = 1;
    try {
      code = fn(msg);
    } catch (const std::exception& e) {
      msg = std::string("unexpected exception: ") + e.what();
    }
    (void)!write(fds[1], msg.data(), msg.size());
    _exit(code);
  }
  close(fds[1]);
  ChildResult r;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) r.message.append(buf, size_t(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

}  // namespace sf::nvme_test
