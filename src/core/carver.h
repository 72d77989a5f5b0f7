// defines: sf::Carver — consecutive 256-byte aligned pieces of one buffer, or only their total
// size (base == null): the one routine that both measures a layout and carves it.
#pragma once

#include <cstddef>
#include <initializer_list>

#include "core/tensor.h"

namespace sf {

class Carver {
 public:
  explicit Carver(void* base) : base_(static_cast<char*>(base)) {}
  void* take_bytes(size_t bytes) {
    void* p = base_ ? base_ + used_ : nullptr;
    used_ += (bytes + 255) / 256 * 256;
    return p;
  }
  Tensor take(DType dt, std::initializer_list<int64_t> dims) {
    Tensor t(nullptr, dt, dims);
    t.data = take_bytes(t.bytes());
    return t;
  }
  size_t used() const { return used_; }

 private:
  char* base_;
  size_t used_ = 0;
};

}  // namespace sf
