// defines: sf::GradRing — a ring of pinned host buffers that gradients pass through on their way
// from the device to the optimizer when nothing needs them afterwards (no clipping): host memory
// for gradients is the ring, not a copy of the model. Slots are taken in order by the D2H side
// (acquire blocks until the optimizer has released the slot) and released in the same order.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

namespace sf {

class GradRing {
 public:
  // `base` holds slots × slot_bytes bytes (pinned: it is a D2H target).
  GradRing(void* base, int slots, size_t slot_bytes);
  int slots() const { return int(busy_.size()); }
  int next() { return next_++ % slots(); }  // the slot the next piece goes to (engine thread)
  void* slot(int r) const { return base_ + size_t(r) * slot_bytes_; }
  void acquire(int r);  // blocks until slot r is free, then marks it busy
  void release(int r);

 private:
  char* base_;
  size_t slot_bytes_;
  int64_t next_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<bool> busy_;
};

}  // namespace sf
