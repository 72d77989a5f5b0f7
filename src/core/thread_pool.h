// defines: sf::ThreadPool, sf::parallel_for — a fixed pool of workers for data-parallel loops.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace sf {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return int(workers_.size()) + 1; }
  // Calls fn(begin, end) over [0, n) split into contiguous chunks of at least `grain`, about
  // kChunksPerThread per thread, which the workers and the calling thread take from a shared
  // counter: a thread whose CPU another thread also wants does fewer chunks instead of holding
  // back the loop. Not re-entrant: a nested call runs inline. If a chunk throws, no further
  // chunks are handed out, the ones running finish, and the first exception is rethrown.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

  // Restricts every worker to the CPUs `cpus` (each may run on any of them, so the scheduler
  // can still move a worker off a CPU another thread wants); the caller restricts itself.
  // Returns the workers pinned.
  int pin(const std::vector<int>& cpus);

  // The process-wide pool, sized by SF_THREADS or the hardware.
  static ThreadPool& global();

  static constexpr int64_t kChunksPerThread = 8;

 private:
  void worker_loop();
  // Takes chunks of the current job until none is left or one has thrown.
  std::exception_ptr run_chunks(const std::function<void(int64_t, int64_t)>& fn, int64_t n,
                                int64_t chunk);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_work_, cv_done_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0, job_chunk_ = 0;
  std::atomic<int64_t> next_{0};  // the first element not yet handed out
  int64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  std::mutex call_mu_;  // one parallel_for at a time
};

inline void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  ThreadPool::global().parallel_for(n, grain, fn);
}

}  // namespace sf
