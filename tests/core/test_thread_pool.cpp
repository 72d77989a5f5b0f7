#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>
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

TEST(ThreadPool, AChunkThatThrowsIsRethrownAfterTheRunningOnesFinish) {
  ThreadPool pool(4);
  std::atomic<int> inside{0}, ran{0};
  EXPECT_THROW(pool.parallel_for(400, 1,
                                 [&](int64_t b, int64_t) {
                                   inside++;
                                   ran++;
                                   std::this_thread::sleep_for(std::chrono::milliseconds(2));
                                   inside--;
                                   if (b == 0) throw std::runtime_error("boom");
                                 }),
               std::runtime_error);
  EXPECT_EQ(inside.load(), 0);  // nothing of the loop runs after it returned
  // 400 elements in chunks of 13 (4 threads, 8 chunks each): 31 chunks. The chunk at 0 is the
  // first one handed out; once it throws, at most the three other threads' current chunks run.
  EXPECT_LT(ran.load(), 31);
  // The pool is usable afterwards.
  std::atomic<int64_t> sum{0};
  pool.parallel_for(100, 1, [&](int64_t b, int64_t e) { sum += e - b; });
  EXPECT_EQ(sum.load(), 100);
}

// A thread held up (here: its first chunk waits for the rest of the loop) does not hold back the
// loop: the other threads take the chunks it would have had under static shares.
TEST(ThreadPool, TheOtherThreadsTakeTheChunksOfOneHeldUp) {
  ThreadPool pool(4);
  constexpr int64_t n = 4000;
  std::atomic<int64_t> done{0};
  std::atomic<bool> held_done{false}, timed_out{false};
  std::mutex mu;
  std::map<std::thread::id, int> chunks_of;
  std::thread::id held;
  pool.parallel_for(n, 1, [&](int64_t b, int64_t e) {
    {
      std::lock_guard<std::mutex> lk(mu);
      chunks_of[std::this_thread::get_id()]++;
      if (b == 0) held = std::this_thread::get_id();
    }
    if (b == 0) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (done.load() < n - e && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      timed_out = done.load() < n - e;
      held_done = true;
    } else {
      done += e - b;
    }
  });
  EXPECT_TRUE(held_done.load());
  EXPECT_FALSE(timed_out.load()) << "the rest of the loop waited for the held thread";
  const int64_t chunk = n / (4 * ThreadPool::kChunksPerThread);
  EXPECT_EQ(done.load(), n - chunk);
  EXPECT_EQ(chunks_of[held], 1);  // the held thread did its one chunk; the others did the rest
}

}  // namespace
}  // namespace sf
