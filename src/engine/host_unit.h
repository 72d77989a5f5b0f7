// defines: sf::HostUnit — one unit's persistent training state in pinned host memory: fp32 master
// weights, Adam m and v, the gradient of the last backward (compute dtype) and, when the compute
// dtype is not fp32, the compute-dtype copy of the weights that the next H2D copy reads.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "model/layout.h"

namespace sf {

struct HostUnit {
  UnitLayout layout;
  float* master = nullptr;
  float* m = nullptr;
  float* v = nullptr;
  void* grad = nullptr;    // compute dtype, layout.numel elements
  void* shadow = nullptr;  // compute dtype copy of master; null when the compute dtype is F32

  // What H2D copies of this unit's weights read.
  const void* upload_source() const { return shadow ? shadow : master; }
  static size_t bytes_needed(int64_t numel, DType compute);
  // Points the members at consecutive ranges of `base` (which must hold bytes_needed).
  void carve(void* base, DType compute);
};

}  // namespace sf
