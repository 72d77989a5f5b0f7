#include "io/nvme_faults.h"

#include <atomic>

namespace sf {
namespace {
std::atomic<bool> g_direct_refused{false};
std::atomic<int> g_reserve_errno{0};
std::atomic<int64_t> g_completion_nth{-1};
std::atomic<int> g_completion_result{0};
}  // namespace

void inject_direct_io_refused(bool on) { g_direct_refused = on; }
void inject_reserve_failure(int err) { g_reserve_errno = err; }
void inject_completion_result(int64_t nth, int result) {
  g_completion_result = result;
  g_completion_nth = nth;
}

namespace nvme_faults {
bool direct_io_refused() { return g_direct_refused.load(); }
int take_reserve_failure() { return g_reserve_errno.exchange(0); }
int completion_result(int result) {
  int64_t n = g_completion_nth.load();
  while (n >= 0) {
    if (g_completion_nth.compare_exchange_weak(n, n - 1)) {
      return n == 0 ? g_completion_result.load() : result;
    }
  }
  return result;
}
}  // namespace nvme_faults

}  // namespace sf
