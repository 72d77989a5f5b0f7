#include "model/rope.h"

#include <cmath>

namespace sf {

std::vector<float> rope_inv_freq(const ModelSpec& spec) {
  const int64_t D = spec.head_dim;
  std::vector<float> inv(size_t(D / 2));
  // torch: base ** (arange(0, D, 2).float() / D): the exponent is fp32, the power fp32.
  for (int64_t i = 0; i < D / 2; ++i) {
    float expo = float(2 * i) / float(D);
    inv[size_t(i)] = 1.0f / std::pow(float(spec.rope_theta), expo);
  }
  if (spec.rope_scaling.type == RopeScaling::Type::kLlama3) {
    const auto& s = spec.rope_scaling;
    const double old_ctx = double(s.original_max_position_embeddings);
    const double low_wavelen = old_ctx / s.low_freq_factor;
    const double high_wavelen = old_ctx / s.high_freq_factor;
    const double pi = 3.14159265358979323846;
    for (float& f : inv) {
      // transformers computes these with fp32 tensors and python-float scalars.
      float wavelen = float(2 * pi) / f;
      float scaled = f;
      if (wavelen > float(low_wavelen)) scaled = f / float(s.factor);
      if (wavelen >= float(high_wavelen) && wavelen <= float(low_wavelen)) {
        // medium band: smooth interpolation between scaled and unscaled
        float smooth = (float(old_ctx) / wavelen - float(s.low_freq_factor)) /
                       float(s.high_freq_factor - s.low_freq_factor);
        scaled = (1.0f - smooth) * (f / float(s.factor)) + smooth * f;
      }
      f = scaled;
    }
  }
  return inv;
}

}  // namespace sf
