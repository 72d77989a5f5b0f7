#include "engine/host_unit.h"

namespace sf {

namespace {
size_t round_up(size_t n) { return (n + 255) / 256 * 256; }
}  // namespace

size_t HostUnit::bytes_needed(int64_t numel, DType compute) {
  size_t n = 3 * round_up(size_t(numel) * 4) + round_up(size_t(numel) * dtype_size(compute));
  if (compute != DType::kF32) n += round_up(size_t(numel) * dtype_size(compute));
  return n;
}

void HostUnit::carve(void* base, DType compute) {
  char* p = static_cast<char*>(base);
  const size_t n = size_t(layout.numel);
  master = reinterpret_cast<float*>(p);
  p += round_up(n * 4);
  m = reinterpret_cast<float*>(p);
  p += round_up(n * 4);
  v = reinterpret_cast<float*>(p);
  p += round_up(n * 4);
  grad = p;
  p += round_up(n * dtype_size(compute));
  shadow = compute != DType::kF32 ? p : nullptr;
}

}  // namespace sf
