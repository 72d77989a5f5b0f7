#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>

#include "core/thread_pool.h"

namespace sf {
namespace {

TEST(ThreadPool, CoversTheRangeOnce) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> hits(1000);
  pool.parallel_for(1000, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[size_t(i)]++;
  });
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
}

TEST(ThreadPool, AShareThatThrowsIsRethrownAfterAllFinish) {
  ThreadPool pool(4);
  std::atomic<int> finished{0};
  EXPECT_THROW(pool.parallel_for(400, 1,
                                 [&](int64_t b, int64_t) {
                                   if (b == 0) throw std::runtime_error("boom");
                                   finished++;
                                 }),
               std::runtime_error);
  EXPECT_EQ(finished.load(), 3);
  // The pool is usable afterwards.
  std::atomic<int64_t> sum{0};
  pool.parallel_for(100, 1, [&](int64_t b, int64_t e) { sum += e - b; });
  EXPECT_EQ(sum.load(), 100);
}

}  // namespace
}  // namespace sf
