// Tests: the NVMe store's scratch file — refused directories (missing, not a directory, not
// writable, a filesystem that refuses O_DIRECT), tmpfs, and that nothing is left in the directory:
// while the store is open, after it is destroyed, after the process _exit()s or is killed with
// SIGKILL; the stale-name sweep.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/statfs.h>

#include <fstream>

#include "core/error.h"
#include "io/nvme_faults.h"
#include "io/nvme_store.h"
#include "io/scratch_file.h"
#include "nvme_test_util.h"

namespace sf {
namespace {
using namespace nvme_test;

std::string open_error(const fs::path& dir) {
  try {
    NvmeStore store(dir);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Descriptors of this process open on a scratch file of ours (their links end " (deleted)").
int open_scratch_files() {
  int n = 0;
  for (const auto& e : fs::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const std::string target = fs::read_symlink(e.path(), ec).string();
    n += target.find("/slideformer-nvme-") != std::string::npos;
  }
  return n;
}

TEST(NvmeScratch, MissingDirectoryOrAFileIsRefusedWithWhatToDo) {
  const fs::path dir = fresh_dir("missing");
  std::string e = open_error(dir / "nope");
  EXPECT_NE(e.find("--nvme-dir " + (dir / "nope").string() + " does not exist"), std::string::npos)
      << e;
  EXPECT_NE(e.find("mkdir -p"), std::string::npos) << e;
  std::ofstream(dir / "file") << "x";
  e = open_error(dir / "file");
  EXPECT_NE(e.find("is not a directory"), std::string::npos) << e;
  fs::remove_all(dir);
}

TEST(NvmeScratch, UnwritableDirectoryIsRefusedBeforeAnythingIsCreated) {
  const fs::path dir = fresh_dir("readonly");
  fs::permissions(dir, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                           fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec);
  // Root writes anywhere: the check then runs as nobody in a child.
  const ChildResult r = run_in_child([&](std::string& msg) {
    if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) {
      msg = std::string("cannot drop root to test permissions: ") + std::strerror(errno);
      return 77;
    }
    msg = open_error(dir);
    return 0;
  });
  fs::permissions(dir, fs::perms::owner_all);
  if (r.code == 77) GTEST_SKIP() << r.message;
  ASSERT_EQ(r.code, 0) << r.message;
  EXPECT_NE(r.message.find("--nvme-dir " + dir.string() + ": cannot create a file there"),
            std::string::npos)
      << r.message;
  EXPECT_NE(r.message.find("EACCES"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("permissions"), std::string::npos) << r.message;
  EXPECT_EQ(entries(dir), 0u);
  fs::remove_all(dir);
}

TEST(NvmeScratch, FilesystemThatRefusesODirectIsAClearErrorAndLeavesNothing) {
  const fs::path dir = fresh_dir("nodirect");
  inject_direct_io_refused(true);  // what tmpfs before Linux 6.6 answers
  const std::string e = open_error(dir);
  inject_direct_io_refused(false);
  EXPECT_NE(e.find("--nvme-dir " + dir.string() + ": its filesystem ("), std::string::npos) << e;
  EXPECT_NE(e.find("refuses O_DIRECT"), std::string::npos) << e;
  EXPECT_NE(e.find("EINVAL"), std::string::npos) << e;
  EXPECT_NE(e.find("point --nvme-dir at a directory on a local disk"), std::string::npos) << e;
  EXPECT_EQ(entries(dir), 0u) << "the file created before O_DIRECT was refused was left behind";
  fs::remove_all(dir);
}

// /dev/shm is tmpfs: before Linux 6.6 it refuses O_DIRECT (a clear error), from 6.6 it takes it
// and the store works, saying that its bytes take host memory.
TEST(NvmeScratch, TmpfsEitherRefusesClearlyOrWorksAndSaysItIsMemory) {
  struct statfs st {};
  if (statfs("/dev/shm", &st) != 0 || st.f_type != 0x01021994) {
    GTEST_SKIP() << "/dev/shm is not a tmpfs on this machine";
  }
  SF_SKIP_WITHOUT_IO_URING();
  const fs::path dir = fs::path("/dev/shm") / ("sf_nvme_tmpfs_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::unique_ptr<NvmeStore> store;
  std::string e;
  try {
    store = std::make_unique<NvmeStore>(dir);
  } catch (const Error& err) {
    e = err.what();
  }
  if (!store) {
    EXPECT_NE(e.find("its filesystem (tmpfs) refuses O_DIRECT"), std::string::npos) << e;
    EXPECT_NE(e.find("tmpfs is memory, not a disk"), std::string::npos) << e;
  } else {
    EXPECT_EQ(store->file().fs_type(), "tmpfs");
    EXPECT_TRUE(store->file().memory_backed());
    EXPECT_NE(store->describe().find("tmpfs is memory: these bytes take host memory"),
              std::string::npos)
        << store->describe();
    std::mt19937_64 rng(5);
    const NvmeRegion r = store->alloc(256 << 10);
    AlignedBuffer src = random_buffer(r.bytes, rng), dst = aligned(r.bytes);
    store->wait(store->write(r, 0, src.get(), r.bytes));
    store->wait(store->read(r, 0, dst.get(), r.bytes));
    EXPECT_EQ(std::memcmp(src.get(), dst.get(), r.bytes), 0);
    store.reset();
  }
  EXPECT_EQ(entries(dir), 0u);
  fs::remove_all(dir);
}

TEST(NvmeScratch, NothingIsInTheDirectoryWhileOpenNorAfterTheStoreIsGone) {
  SF_SKIP_WITHOUT_IO_URING();
  const fs::path dir = fresh_dir("lifetime");
  const int before = open_scratch_files();
  {
    NvmeStore store(dir);
    std::mt19937_64 rng(9);
    const NvmeRegion r = store.alloc(1 << 20);
    AlignedBuffer src = random_buffer(r.bytes, rng);
    store.wait(store.write(r, 0, src.get(), r.bytes));
    EXPECT_EQ(entries(dir), 0u) << "the scratch file still has a name";
    EXPECT_EQ(open_scratch_files(), before + 1) << "the store holds its unlinked file open";
    EXPECT_NE(store.file().path().filename().string().find("slideformer-nvme-" +
                                                           std::to_string(getpid()) + "-"),
              std::string::npos);
  }
  EXPECT_EQ(open_scratch_files(), before) << "the unlinked file is still open: its blocks stay";
  EXPECT_EQ(entries(dir), 0u);
  fs::remove_all(dir);
}

// For cuFile the name stays until it has registered the file: there while kept, gone after
// unlink_name, and gone when a file that kept it is closed.
TEST(NvmeScratch, AKeptNameIsRemovedByUnlinkNameOrAtClose) {
  const fs::path dir = fresh_dir("keep_name");
  {
    ScratchFile f(dir, /*keep_name=*/true);
    EXPECT_TRUE(fs::exists(f.path())) << f.path();
    EXPECT_EQ(entries(dir), 1u);
    f.unlink_name();
    EXPECT_EQ(entries(dir), 0u);
    f.unlink_name();  // once only: nothing to do the second time
    EXPECT_GE(f.fd(), 0);
  }
  {
    ScratchFile f(dir, /*keep_name=*/true);
    EXPECT_EQ(entries(dir), 1u);
  }
  EXPECT_EQ(entries(dir), 0u);
  fs::remove_all(dir);
}

// A child opens a store, writes to it and then dies without its destructors: by _exit() or by
// SIGKILL while it holds the store. The directory holds nothing, at any point.
TEST(NvmeScratch, ACrashedRunLeavesNothing) {
  SF_SKIP_WITHOUT_IO_URING();
  const fs::path dir = fresh_dir("crash");
  for (const bool kill_it : {false, true}) {
    int ready[2];
    ASSERT_EQ(pipe(ready), 0);
    const pid_t pid = fork();
    if (pid == 0) {
      close(ready[0]);
      NvmeStore* store = new NvmeStore(dir);  // never destroyed
      std::mt19937_64 rng(11);
      const NvmeRegion r = store->alloc(4 << 20);
      AlignedBuffer src = random_buffer(r.bytes, rng);
      store->write(r, 0, src.get(), r.bytes);  // in flight when the process dies
      (void)!write(ready[1], "r", 1);
      if (kill_it) pause();
      _exit(0);
    }
    close(ready[1]);
    char c = 0;
    ASSERT_EQ(read(ready[0], &c, 1), 1) << "the child did not open its store";
    close(ready[0]);
    if (kill_it) {
      EXPECT_EQ(entries(dir), 0u) << "a live child's scratch file has a name";
      kill(pid, SIGKILL);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_EQ(entries(dir), 0u) << (kill_it ? "after SIGKILL" : "after _exit");
  }
  fs::remove_all(dir);
}

// A run killed between create and unlink leaves a named file: the next store removes it when its
// process is gone, and keeps live processes' files and other names.
TEST(NvmeScratch, OpeningSweepsFilesOfDeadRunsOnly) {
  SF_SKIP_WITHOUT_IO_URING();
  const fs::path dir = fresh_dir("sweep");
  const pid_t dead = fork();
  if (dead == 0) _exit(0);
  waitpid(dead, nullptr, 0);
  const fs::path stale = dir / ("slideformer-nvme-" + std::to_string(dead) + "-1a2b3c.tmp");
  const fs::path live = dir / ("slideformer-nvme-" + std::to_string(getppid()) + "-1a2b3c.tmp");
  const fs::path other = dir / "slideformer-nvme-notes.tmp";
  for (const fs::path& p : {stale, live, other}) std::ofstream(p) << "x";
  { NvmeStore store(dir); }
  EXPECT_FALSE(fs::exists(stale)) << "a dead run's scratch file was kept";
  EXPECT_TRUE(fs::exists(live)) << "a live run's scratch file was removed";
  EXPECT_TRUE(fs::exists(other)) << "a file that is not a scratch file was removed";
  EXPECT_EQ(sweep_stale_scratch_files(dir), 0u);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sf
