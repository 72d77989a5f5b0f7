#include "engine/pinned_alloc.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>

namespace sf {

std::vector<Buffer> alloc_pinned(Backend& be, const std::vector<size_t>& sizes, const char* what,
                                 const std::function<void(size_t, void*)>& ready, int threads) {
  std::vector<Buffer> out(sizes.size());
  std::atomic<size_t> next{0};
  std::mutex mu;
  std::exception_ptr error;
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < sizes.size();) {
      {
        std::lock_guard<std::mutex> lk(mu);
        if (error) return;
      }
      try {
        if (sizes[i]) {
          out[i] = be.alloc(MemoryKind::kPinnedHost, sizes[i], what);
          if (ready) ready(i, out[i].data());
        }
      } catch (...) {
        std::lock_guard<std::mutex> lk(mu);
        if (!error) error = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  const int n = std::max(1, std::min<int>(threads, int(sizes.size())));
  for (int t = 0; t < n; ++t) pool.emplace_back(work);
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
  return out;
}

}  // namespace sf
