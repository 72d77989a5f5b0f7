// Tests: the NVMe store's reads and writes — random data through many regions of random sizes at
// random offsets comes back bit-identical; requests run concurrently up to the queue depth, from
// several threads; bad requests are refused with messages; the bandwidth probe gives rates.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "core/error.h"
#include "io/nvme_probe.h"
#include "io/nvme_store.h"
#include "nvme_test_util.h"

namespace sf {
namespace {
using namespace nvme_test;

constexpr uint64_t kPage = NvmeStore::kAlignment;

// 4 KiB-aligned cut points of [0, bytes): pieces of random length.
std::vector<uint64_t> random_cuts(uint64_t bytes, std::mt19937_64& rng) {
  std::vector<uint64_t> cuts{0};
  while (cuts.back() < bytes)
    cuts.push_back(std::min(bytes, cuts.back() + kPage * (1 + rng() % 48)));
  return cuts;
}

TEST(NvmeStore, RandomDataThroughManyRegionsComesBackBitIdentical) {
  SF_SKIP_WITHOUT_IO_URING();
  const fs::path dir = fresh_dir("roundtrip");
  std::mt19937_64 rng(15);
  {
    NvmeStoreOptions opt;
    opt.queue_depth = 8;
    opt.max_request_bytes = 64 << 10;  // so that one piece is several requests
    NvmeStore store(dir, opt);
    std::vector<NvmeRegion> regions;
    for (int i = 0; i < 40; ++i) regions.push_back(store.alloc(1 + rng() % (3 << 20)));
    for (int i = 0; i < 40; i += 3) store.free(regions[size_t(i)]);  // then reuse the holes
    for (int i = 0; i < 40; i += 3) regions[size_t(i)] = store.alloc(1 + rng() % (1 << 20));
    EXPECT_GE(store.file().size(), regions.back().offset + regions.back().bytes);

    std::vector<AlignedBuffer> data, back;
    std::vector<NvmeStore::Ticket> tickets;
    for (const NvmeRegion& r : regions) {  // every write in flight before any wait
      data.push_back(random_buffer(r.bytes, rng));
      const std::vector<uint64_t> cuts = random_cuts(r.bytes, rng);
      for (size_t c = 0; c + 1 < cuts.size(); ++c) {
        tickets.push_back(
            store.write(r, cuts[c], data.back().get() + cuts[c], cuts[c + 1] - cuts[c]));
      }
    }
    std::shuffle(tickets.begin(), tickets.end(), rng);
    for (NvmeStore::Ticket t : tickets) store.wait(t);
    tickets.clear();
    for (const NvmeRegion& r : regions) {  // read back in other pieces
      back.push_back(aligned(r.bytes));
      std::memset(back.back().get(), 0xA5, r.bytes);
      const std::vector<uint64_t> cuts = random_cuts(r.bytes, rng);
      for (size_t c = 0; c + 1 < cuts.size(); ++c) {
        tickets.push_back(
            store.read(r, cuts[c], back.back().get() + cuts[c], cuts[c + 1] - cuts[c]));
      }
    }
    std::shuffle(tickets.begin(), tickets.end(), rng);
    for (NvmeStore::Ticket t : tickets) store.wait(t);
    for (size_t i = 0; i < regions.size(); ++i) {
      ASSERT_EQ(std::memcmp(data[i].get(), back[i].get(), regions[i].bytes), 0)
          << "region " << i << " at " << regions[i].offset << " came back different";
    }
    const NvmeStore::Stats s = store.stats();
    uint64_t total = 0;
    for (const NvmeRegion& r : regions) total += r.bytes;
    EXPECT_EQ(s.bytes_written, total);
    EXPECT_EQ(s.bytes_read, total);
    EXPECT_LE(s.max_in_flight, opt.queue_depth);
  }
  EXPECT_EQ(entries(dir), 0u);
  fs::remove_all(dir);
}

TEST(NvmeStore, RequestsRunConcurrentlyUpToTheQueueDepth) {
  SF_SKIP_WITHOUT_IO_URING();
  const fs::path dir = fresh_dir("depth");
  NvmeStoreOptions opt;
  opt.queue_depth = 6;
  opt.max_request_bytes = 16 << 10;
  NvmeStore store(dir, opt);
  std::mt19937_64 rng(1);
  const NvmeRegion r = store.alloc(4 << 20);
  AlignedBuffer src = random_buffer(r.bytes, rng);
  const NvmeStore::Ticket t = store.write(r, 0, src.get(), r.bytes);  // 256 requests at once
  store.wait(t);
  EXPECT_EQ(store.stats().max_in_flight, opt.queue_depth)
      << "the kernel never held a full queue of requests";
  EXPECT_EQ(store.stats().requests, r.bytes / opt.max_request_bytes);
  AlignedBuffer dst = aligned(r.bytes);
  const NvmeStore::Ticket u = store.read(r, 0, dst.get(), r.bytes);
  while (!store.done(u)) std::this_thread::yield();
  store.wait(u);
  EXPECT_EQ(std::memcmp(src.get(), dst.get(), r.bytes), 0);
  EXPECT_THROW(store.wait(u), Error) << "a ticket is waited once";
  fs::remove_all(dir);
}

TEST(NvmeStore, ThreadsSubmitAndWaitAtTheSameTime) {
  SF_SKIP_WITHOUT_IO_URING();
  const fs::path dir = fresh_dir("threads");
  NvmeStoreOptions opt;
  opt.queue_depth = 4;
  opt.max_request_bytes = 32 << 10;
  NvmeStore store(dir, opt);
  constexpr int kThreads = 4;
  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      std::mt19937_64 rng(uint64_t(100 + i));
      const NvmeRegion r = store.alloc(256 << 10);
      for (int round = 0; round < 20; ++round) {
        AlignedBuffer src = random_buffer(r.bytes, rng), dst = aligned(r.bytes);
        store.wait(store.write(r, 0, src.get(), r.bytes));
        store.wait(store.read(r, 0, dst.get(), r.bytes));
        mismatches[size_t(i)] += std::memcmp(src.get(), dst.get(), r.bytes) != 0;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kThreads; ++i) EXPECT_EQ(mismatches[size_t(i)], 0) << "thread " << i;
  fs::remove_all(dir);
}

TEST(NvmeStore, RefusesRequestsThatODirectCannotServeOrThatLeaveTheRegion) {
  SF_SKIP_WITHOUT_IO_URING();
  const fs::path dir = fresh_dir("refuse");
  NvmeStore store(dir);
  const NvmeRegion r = store.alloc(64 << 10);
  AlignedBuffer buf = aligned(128 << 10);
  auto message = [](auto&& fn) {
    try {
      fn();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([&] { store.write(r, 0, buf.get() + 512, kPage); }).find("not aligned"),
            std::string::npos);
  EXPECT_NE(message([&] { store.read(r, 100, buf.get(), kPage); }).find("multiples of 4096"),
            std::string::npos);
  EXPECT_NE(message([&] { store.read(r, 0, buf.get(), 1000); }).find("multiples of 4096"),
            std::string::npos);
  EXPECT_NE(message([&] { store.write(r, 60 << 10, buf.get(), 8192); }).find("do not fit"),
            std::string::npos);
  EXPECT_NE(message([&] {
              store.write({1ull << 40, kPage}, 0, buf.get(), kPage);
            }).find("not one of this store's"),
            std::string::npos);
  EXPECT_NE(message([] {
              NvmeStoreOptions o;
              o.queue_depth = 0;
              NvmeStore s("/", o);
            }).find("queue depth 0"),
            std::string::npos);
  EXPECT_NE(message([] {
              NvmeStoreOptions o;
              o.max_request_bytes = 5000;
              NvmeStore s("/", o);
            }).find("request size 5000"),
            std::string::npos);
  fs::remove_all(dir);
}

TEST(NvmeProbe, MeasuresPositiveReadAndWriteRatesAndLeavesNothing) {
  SF_SKIP_WITHOUT_IO_URING();
  const fs::path dir = fresh_dir("probe");
  const NvmeBandwidth b = measure_nvme(dir, 32 << 20, 4, 1 << 20);
  EXPECT_GT(b.write_gbps, 0.0);
  EXPECT_GT(b.read_gbps, 0.0);
  EXPECT_GT(b.mixed_gbps, 0.0);
  EXPECT_EQ(b.bytes, uint64_t(32) << 20);
  EXPECT_EQ(b.queue_depth, 4);
  EXPECT_EQ(b.request_bytes, uint64_t(1) << 20);
  EXPECT_FALSE(b.fs_type.empty());
  EXPECT_EQ(entries(dir), 0u);
  EXPECT_THROW(measure_nvme(dir, 0, 4), Error);
  fs::remove_all(dir);
}

// The disk floor: reads and writes one after the other at their rates, or together at the mixed
// rate where that is faster; without a mixed rate, apart.
TEST(NvmeProbe, TheDiskFloorTakesTheFasterOfApartAndTogether) {
  EXPECT_DOUBLE_EQ(disk_seconds(4e9, 2e9, 2, 1, 0), 4.0);    // 2 s + 2 s
  EXPECT_DOUBLE_EQ(disk_seconds(4e9, 2e9, 2, 1, 3), 2.0);    // 6 GB at 3 GB/s
  EXPECT_DOUBLE_EQ(disk_seconds(4e9, 2e9, 2, 1, 1), 4.0);    // together slower: apart
  NvmeBandwidth b;
  b.read_gbps = 2;
  b.write_gbps = 1;
  b.mixed_gbps = 3;
  EXPECT_DOUBLE_EQ(b.seconds(4e9, 2e9), 2.0);
}

}  // namespace
}  // namespace sf
