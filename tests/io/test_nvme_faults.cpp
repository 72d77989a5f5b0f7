// Tests: the NVMe store's faults — a full disk (ENOSPC) at alloc and at a write, an I/O error
// (EIO), short transfers — each an sf::Error naming the file, the operation, the offset and size
// and what to do; a store that failed one request goes on serving the others.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>

#include "core/error.h"
#include "io/nvme_faults.h"
#include "io/nvme_store.h"
#include "nvme_test_util.h"

namespace sf {
namespace {
using namespace nvme_test;

class NvmeFaults : public ::testing::Test {
 protected:
  void SetUp() override {
    SF_SKIP_WITHOUT_IO_URING();
    dir_ = fresh_dir("faults");
    NvmeStoreOptions opt;
    opt.queue_depth = 4;
    opt.max_request_bytes = 64 << 10;
    store_ = std::make_unique<NvmeStore>(dir_, opt);
    region_ = store_->alloc(1 << 20);
    src_ = random_buffer(region_.bytes, rng_);
    dst_ = aligned(region_.bytes);
  }
  void TearDown() override {
    inject_completion_result(-1, 0);
    inject_reserve_failure(0);
    store_.reset();
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  // The message of the sf::Error that waiting for `t` throws ("" when none).
  std::string error_of(NvmeStore::Ticket t) {
    try {
      store_->wait(t);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  void expect_round_trip() {
    store_->wait(store_->write(region_, 0, src_.get(), region_.bytes));
    std::memset(dst_.get(), 0, region_.bytes);
    store_->wait(store_->read(region_, 0, dst_.get(), region_.bytes));
    EXPECT_EQ(std::memcmp(src_.get(), dst_.get(), region_.bytes), 0);
  }

  fs::path dir_;
  std::mt19937_64 rng_{3};
  std::unique_ptr<NvmeStore> store_;
  NvmeRegion region_;
  AlignedBuffer src_, dst_;
};

TEST_F(NvmeFaults, FullDiskAtAWriteNamesFileOperationOffsetAndWhatToDo) {
  inject_completion_result(2, -ENOSPC);  // the third of 16 requests
  const std::string e = error_of(store_->write(region_, 0, src_.get(), region_.bytes));
  EXPECT_NE(e.find(dir_.string() + "/slideformer-nvme-"), std::string::npos) << e;
  EXPECT_NE(e.find("write of 65536 bytes at offset "), std::string::npos) << e;
  EXPECT_NE(e.find("ENOSPC"), std::string::npos) << e;
  EXPECT_NE(e.find("free space"), std::string::npos) << e;
  EXPECT_NE(e.find("resume from the last checkpoint"), std::string::npos) << e;
  expect_round_trip();  // the store still serves
}

TEST_F(NvmeFaults, IoErrorAtAReadNamesTheReadAndTheDisk) {
  store_->wait(store_->write(region_, 0, src_.get(), region_.bytes));
  inject_completion_result(0, -EIO);
  const std::string e = error_of(store_->read(region_, 128 << 10, dst_.get(), 64 << 10));
  EXPECT_NE(e.find("read of 65536 bytes at offset " + std::to_string(region_.offset + (128 << 10))),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("EIO"), std::string::npos) << e;
  EXPECT_NE(e.find("dmesg"), std::string::npos) << e;
  expect_round_trip();
}

TEST_F(NvmeFaults, ShortTransfersGoOnFromWhereTheKernelStopped) {
  inject_completion_result(5, 8192);  // the kernel takes 8 KiB of a 64 KiB write
  store_->wait(store_->write(region_, 0, src_.get(), region_.bytes));
  inject_completion_result(1, 4096);
  std::memset(dst_.get(), 0, region_.bytes);
  store_->wait(store_->read(region_, 0, dst_.get(), region_.bytes));
  EXPECT_EQ(std::memcmp(src_.get(), dst_.get(), region_.bytes), 0);
  EXPECT_EQ(store_->stats().bytes_written, region_.bytes);
}

TEST_F(NvmeFaults, TransfersThatStopOrLeaveTheRestUnalignedAreErrors) {
  store_->wait(store_->write(region_, 0, src_.get(), region_.bytes));
  inject_completion_result(0, 0);
  std::string e = error_of(store_->read(region_, 0, dst_.get(), 64 << 10));
  EXPECT_NE(e.find("short read: 0 of 65536 bytes at offset"), std::string::npos) << e;
  EXPECT_NE(e.find("slideformer-nvme-"), std::string::npos) << e;
  inject_completion_result(0, 100);
  e = error_of(store_->write(region_, 0, src_.get(), 64 << 10));
  EXPECT_NE(e.find("short write: 100 of 65536 bytes"), std::string::npos) << e;
  expect_round_trip();
}

TEST_F(NvmeFaults, FullDiskAtAllocTakesNothing) {
  const uint64_t size = store_->file().size();
  inject_reserve_failure(ENOSPC);
  std::string e;
  try {
    store_->alloc(8 << 20);
  } catch (const Error& err) {
    e = err.what();
  }
  EXPECT_NE(e.find("reserving 8388608 bytes at offset " + std::to_string(size)), std::string::npos)
      << e;
  EXPECT_NE(e.find("ENOSPC"), std::string::npos) << e;
  EXPECT_NE(e.find("free: free space there"), std::string::npos) << e;
  EXPECT_EQ(store_->file().size(), size);
  const NvmeRegion next = store_->alloc(4096);
  EXPECT_EQ(next.offset, size) << "the failed alloc took a range";
}

// A real full filesystem: a 2 MiB tmpfs mounted in a private mount namespace of a child (needs
// CAP_SYS_ADMIN, and tmpfs with O_DIRECT: Linux 6.6 or later).
TEST(NvmeFaultsSmallFilesystem, AllocPastTheFreeSpaceIsRefusedWithTheFreeSpace) {
  SF_SKIP_WITHOUT_IO_URING();
  const fs::path dir = fresh_dir("smallfs");
  const ChildResult r = run_in_child([&](std::string& msg) {
    if (unshare(CLONE_NEWNS) != 0 ||
        mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        mount("sf_nvme_test", dir.c_str(), "tmpfs", 0, "size=2m") != 0) {
      msg = std::string("cannot mount a small tmpfs here: ") + std::strerror(errno);
      return 77;
    }
    std::unique_ptr<NvmeStore> store;
    try {
      store = std::make_unique<NvmeStore>(dir);
    } catch (const Error& e) {
      msg = std::string("a store on tmpfs cannot open here: ") + e.what();
      return 77;
    }
    store->alloc(1 << 20);
    try {
      store->alloc(4 << 20);
    } catch (const Error& e) {
      msg = e.what();
      return 0;
    }
    msg = "4 MiB more on a 2 MiB filesystem was allocated";
    return 1;
  });
  if (r.code == 77) GTEST_SKIP() << r.message;
  ASSERT_EQ(r.code, 0) << r.message;
  EXPECT_NE(r.message.find("reserving 4194304 bytes at offset 1048576"), std::string::npos)
      << r.message;
  EXPECT_NE(r.message.find("ENOSPC"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("--nvme-dir " + dir.string()), std::string::npos) << r.message;
  EXPECT_EQ(entries(dir), 0u);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sf
