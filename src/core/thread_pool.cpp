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
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_work_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::worker_loop(int index) {
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
    int64_t begin = int64_t(index) * chunk;
    std::exception_ptr err;
    try {
      if (begin < n) (*fn)(begin, std::min(n, begin + chunk));
    } catch (...) {
      err = std::current_exception();
    }
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
  int64_t chunk = (n + size() - 1) / size();
  {
    std::lock_guard<std::mutex> lk(mu_);
    job_ = &fn;
    job_n_ = n;
    job_chunk_ = chunk;
    pending_ = int(workers_.size());
    ++generation_;
  }
  cv_work_.notify_all();
  // Every share finishes before this returns, even when one throws; the first error is rethrown.
  std::exception_ptr err;
  t_inside_pool = true;
  try {
    fn(0, std::min(n, chunk));
  } catch (...) {
    err = std::current_exception();
  }
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
