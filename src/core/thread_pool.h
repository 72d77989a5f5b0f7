// defines: sf::ThreadPool, sf::parallel_for — a fixed pool of workers for data-parallel loops.
#pragma once

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
  // Calls fn(begin, end) over [0, n) split into contiguous chunks of at least `grain`;
  // the calling thread takes a share. Not re-entrant: a nested call runs inline. If a share
  // throws, the others still finish and the first exception is rethrown to the caller.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

  // Restricts every worker to the CPUs `cpus` (each may run on any of them: the shares of
  // parallel_for are static, so a worker tied to one CPU that another thread also wants would
  // hold back the whole loop); the caller restricts itself. Returns the workers pinned.
  int pin(const std::vector<int>& cpus);

  // The process-wide pool, sized by SF_THREADS or the hardware.
  static ThreadPool& global();

 private:
  void worker_loop(int index);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_work_, cv_done_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0, job_chunk_ = 0;
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
