#include "core/thread_pool.h"

#include "core/cpu_topology.h"

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <string>

namespace sf {

namespace {
thread_local bool t_inside_pool = false;
}

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_work_.notify_all();
  for (auto& w : workers_) w.join();
}

std::exception_ptr ThreadPool::run_chunks(const std::function<void(int64_t, int64_t)>& fn,
                                          int64_t n, int64_t chunk) {
  for (;;) {
    const int64_t begin = next_.fetch_add(chunk, std::memory_order_relaxed);
    if (begin >= n) return nullptr;
    try {
      fn(begin, std::min(n, begin + chunk));
    } catch (...) {
      next_.store(n, std::memory_order_relaxed);  // hand out nothing more
      return std::current_exception();
    }
  }
}

void ThreadPool::worker_loop() {
  int64_t seen = 0;
  t_inside_pool = true;
  for (;;) {
    std::unique_lock<std::mutex> lk(mu_);
    cv_work_.wait(lk, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    const auto* fn = job_;
    int64_t n = job_n_, chunk = job_chunk_;
    lk.unlock();
    std::exception_ptr err = run_chunks(*fn, n, chunk);
    lk.lock();
    if (err && !error_) error_ = err;
    if (--pending_ == 0) cv_done_.notify_all();
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  int parts = int(std::min<int64_t>(size(), (n + std::max<int64_t>(grain, 1) - 1) /
                                               std::max<int64_t>(grain, 1)));
  if (parts <= 1 || t_inside_pool) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> call(call_mu_);
  const int64_t per = int64_t(size()) * kChunksPerThread;
  const int64_t chunk = std::max<int64_t>(std::max<int64_t>(grain, 1), (n + per - 1) / per);
  {
    std::lock_guard<std::mutex> lk(mu_);
    next_.store(0, std::memory_order_relaxed);
    job_ = &fn;
    job_n_ = n;
    job_chunk_ = chunk;
    pending_ = int(workers_.size());
    ++generation_;
  }
  cv_work_.notify_all();
  // Every chunk running finishes before this returns, even when one throws; the first error is
  // rethrown.
  t_inside_pool = true;
  std::exception_ptr err = run_chunks(fn, n, chunk);
  t_inside_pool = false;
  std::unique_lock<std::mutex> lk(mu_);
  cv_done_.wait(lk, [&] { return pending_ == 0; });
  if (!err) err = error_;
  error_ = nullptr;
  lk.unlock();
  if (err) std::rethrow_exception(err);
}

int ThreadPool::pin(const std::vector<int>& cpus) {
  int pinned = 0;
  for (auto& w : workers_) pinned += pin_thread(w.native_handle(), cpus) ? 1 : 0;
  return pinned;
}

ThreadPool& ThreadPool::global() {
  static ThreadPool pool([] {
    if (const char* s = std::getenv("SF_THREADS")) {
      int n = std::atoi(s);
      if (n > 0) return n;
    }
    return int(std::max(1u, std::thread::hardware_concurrency()));
  }());
  return pool;
}

}  // namespace sf
