// defines: sf::cpu::rope_forward, rope_backward — rotary embedding with Hugging Face's
// rotate_half pairing: element i rotates with element i + D/2 (i < D/2).
#include <cmath>
#include <vector>

#include "backend/cpu/ops.h"
#include "core/thread_pool.h"

namespace sf::cpu {
namespace {

// sign = +1 rotates by +angle (forward), -1 by -angle (the backward is the transpose: Rᵀ = R(-θ)).
void rope_apply(const char* op, Tensor x, Tensor positions, Tensor inv_freq, float sign) {
  SF_CHECK(
      x.dtype == DType::kF32 && inv_freq.dtype == DType::kF32 && positions.dtype == DType::kI32, op,
      ": expected F32 x/inv_freq and I32 positions, got ", dtype_name(x.dtype), ", ",
      dtype_name(inv_freq.dtype), ", ", dtype_name(positions.dtype));
  SF_CHECK(x.ndim == 3 && x.dim(2) % 2 == 0 && positions.numel() == x.dim(0) &&
               inv_freq.numel() == x.dim(2) / 2,
           op, ": shapes do not match x[T,heads,D] (D even), positions[T], inv_freq[D/2]: x ",
           x.shape_str(), ", positions ", positions.shape_str(), ", inv_freq ",
           inv_freq.shape_str());
  const int64_t T = x.dim(0), H = x.dim(1), D = x.dim(2), half = D / 2;
  const int32_t* pos = positions.i32();
  const float* freq = inv_freq.f32();
  float* px = x.f32();
  parallel_for(T, 8, [&](int64_t t0, int64_t t1) {
    std::vector<float> cs(static_cast<size_t>(half)), sn(static_cast<size_t>(half));
    for (int64_t t = t0; t < t1; ++t) {
      // HF: freqs = inv_freq(fp32) ⊗ position(fp32) in fp32, then cos/sin in fp32. The product
      // is formed in float exactly like that; cos/sin in double rounded to float.
      for (int64_t i = 0; i < half; ++i) {
        const float angle = float(pos[t]) * freq[i];
        cs[size_t(i)] = float(std::cos(double(angle)));
        sn[size_t(i)] = sign * float(std::sin(double(angle)));
      }
      for (int64_t h = 0; h < H; ++h) {
        float* v = px + (t * H + h) * D;
        for (int64_t i = 0; i < half; ++i) {
          const float x1 = v[i], x2 = v[i + half];
          // q·cos + rotate_half(q)·sin with rotate_half(q) = cat(-x2, x1)
          v[i] = x1 * cs[size_t(i)] - x2 * sn[size_t(i)];
          v[i + half] = x2 * cs[size_t(i)] + x1 * sn[size_t(i)];
        }
      }
    }
  });
}

}  // namespace

void rope_forward(Tensor x, Tensor positions, Tensor inv_freq) {
  rope_apply("rope_forward", x, positions, inv_freq, 1.0f);
}

void rope_backward(Tensor dx, Tensor positions, Tensor inv_freq) {
  rope_apply("rope_backward", dx, positions, inv_freq, -1.0f);
}

}  // namespace sf::cpu
