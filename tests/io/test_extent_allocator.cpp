// Tests: the NVMe store's extent allocator — alignment, first fit, merging of freed neighbours,
// and no overlap under a random sequence of allocations and frees.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <vector>

#include "core/error.h"
#include "io/extent_allocator.h"

namespace sf {
namespace {

TEST(ExtentAllocator, RoundsToTheAlignmentAndGrowsAtTheEnd) {
  ExtentAllocator a(4096);
  const Extent x = a.alloc(1), y = a.alloc(4096), z = a.alloc(4097);
  EXPECT_EQ(x.offset, 0u);
  EXPECT_EQ(x.bytes, 4096u);
  EXPECT_EQ(y.offset, 4096u);
  EXPECT_EQ(y.bytes, 4096u);
  EXPECT_EQ(z.offset, 8192u);
  EXPECT_EQ(z.bytes, 8192u);
  EXPECT_EQ(a.end(), 16384u);
  EXPECT_EQ(a.bytes_in_use(), 16384u);
  EXPECT_THROW(a.alloc(0), Error);
  EXPECT_THROW(ExtentAllocator(3000), Error);
}

TEST(ExtentAllocator, ReusesFreedRangesFirstFitAndMergesNeighbours) {
  ExtentAllocator a(4096);
  std::vector<Extent> e;
  for (int i = 0; i < 4; ++i) e.push_back(a.alloc(4 * 4096));
  a.free(e[1]);
  a.free(e[2]);  // merges with e[1]'s range: one free range of 8 pages at 4 pages
  EXPECT_EQ(a.free_ranges(), 1u);
  const Extent big = a.alloc(8 * 4096);  // fits the merged range exactly
  EXPECT_EQ(big.offset, 4u * 4096);
  EXPECT_EQ(a.end(), 16u * 4096);
  EXPECT_EQ(a.free_ranges(), 0u);
  a.free(big);
  const Extent small = a.alloc(4096);  // the first fit splits the free range
  EXPECT_EQ(small.offset, 4u * 4096);
  EXPECT_EQ(a.free_ranges(), 1u);
  EXPECT_THROW(a.free(Extent{small.offset, 8192}), Error) << "a size other than alloc's";
  a.free(small);
  EXPECT_THROW(a.free(small), Error) << "a double free must be refused";
}

TEST(ExtentAllocator, RandomAllocationsNeverOverlapAndAllMergeBack) {
  ExtentAllocator a(4096);
  std::mt19937_64 rng(7);
  std::map<uint64_t, uint64_t> live;  // offset -> bytes
  for (int step = 0; step < 4000; ++step) {
    if (live.empty() || rng() % 3 != 0) {
      const Extent e = a.alloc(1 + rng() % (64 * 4096));
      ASSERT_EQ(e.offset % 4096, 0u);
      ASSERT_EQ(e.bytes % 4096, 0u);
      ASSERT_LE(e.offset + e.bytes, a.end());
      auto next = live.lower_bound(e.offset);
      if (next != live.end()) {
        ASSERT_LE(e.offset + e.bytes, next->first) << "overlap";
      }
      if (next != live.begin()) {
        auto prev = std::prev(next);
        ASSERT_LE(prev->first + prev->second, e.offset) << "overlap";
      }
      live.emplace(e.offset, e.bytes);
    } else {
      auto it = live.begin();
      std::advance(it, long(rng() % live.size()));
      a.free({it->first, it->second});
      live.erase(it);
    }
  }
  for (const auto& [off, len] : live) a.free({off, len});
  EXPECT_EQ(a.bytes_in_use(), 0u);
  EXPECT_EQ(a.free_ranges(), 1u) << "freed neighbours were not merged";
  EXPECT_EQ(a.peek(a.end()).offset, 0u) << "the whole file is one free range again";
}

}  // namespace
}  // namespace sf
