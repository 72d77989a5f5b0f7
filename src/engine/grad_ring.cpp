#include "engine/grad_ring.h"

#include "core/error.h"

namespace sf {

GradRing::GradRing(void* base, int slots, size_t slot_bytes)
    : base_(static_cast<char*>(base)), slot_bytes_(slot_bytes), busy_(size_t(slots), false) {
  SF_CHECK(slots >= 1 && base, "internal: a gradient ring needs at least one slot");
}

void GradRing::acquire(int r) {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return !busy_[size_t(r)]; });
  busy_[size_t(r)] = true;
}

void GradRing::release(int r) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    busy_[size_t(r)] = false;
  }
  cv_.notify_all();
}

}  // namespace sf
