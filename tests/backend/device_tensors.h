// defines: test support for device backends — sf::test::Dev (a device tensor that owns its
// memory), upload / download between host fp32 vectors and device tensors, and host views of the
// same shape for the CPU reference. Header-only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "backend/backend.h"
#include "core/dtype.h"

namespace sf::test {

struct Dev {
  Buffer buf;
  Tensor t;
};

// A device tensor holding `src` as dtype `dt` (BF16 values must already be bf16-exact).
inline Dev upload_raw(Backend& be, Stream& s, const void* src, DType dt,
                      std::initializer_list<int64_t> shape) {
  Dev d;
  d.t = Tensor(nullptr, dt, shape);
  d.buf = be.alloc(MemoryKind::kDevice, std::max<size_t>(d.t.bytes(), 16), "test tensor");
  d.t.data = d.buf.data();
  if (d.t.bytes()) be.copy(d.t.data, src, d.t.bytes(), s);
  be.synchronize(s);
  return d;
}

// fp32 host values as an F32 or BF16 (rounded to nearest even) device tensor.
inline Dev upload(Backend& be, Stream& s, const std::vector<float>& v, DType dt,
                  std::initializer_list<int64_t> shape) {
  if (dt == DType::kF32) return upload_raw(be, s, v.data(), dt, shape);
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = f32_to_bf16(v[i]);
  return upload_raw(be, s, h.data(), dt, shape);
}

// An F32 or BF16 device tensor as fp32 host values.
inline std::vector<float> download(Backend& be, Stream& s, const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  if (t.dtype == DType::kF32) {
    be.copy(out.data(), t.data, t.bytes(), s);
    be.synchronize(s);
    return out;
  }
  std::vector<uint16_t> h(out.size());
  be.copy(h.data(), t.data, t.bytes(), s);
  be.synchronize(s);
  for (size_t i = 0; i < h.size(); ++i) out[i] = bf16_to_f32(h[i]);
  return out;
}

// The same shape over host fp32 data, for the reference.
inline Tensor host(std::vector<float>& v, const Tensor& like) {
  Tensor r = like;
  r.data = v.data();
  r.dtype = DType::kF32;
  return r;
}

}  // namespace sf::test
