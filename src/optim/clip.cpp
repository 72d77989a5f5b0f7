#include "optim/clip.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace sf {

double global_grad_norm(std::span<const double> sumsq) {
  double total = 0;
  for (double s : sumsq) total += s;
  return std::sqrt(total);
}

float clip_factor(double total_norm, float max_norm) {
  SF_CHECK(std::isfinite(total_norm), "gradient norm is ", total_norm,
           " (NaN/Inf in the gradient): the loss or a layer's "
           "backward produced non-finite values; lower the learning rate, check the data, or "
           "resume from the last checkpoint");
  SF_CHECK(total_norm >= 0, "clip_factor: gradient norm must be >= 0, got ", total_norm);
  if (!(max_norm > 0)) return 1.0f;
  // torch: clip_coef = max_norm / (total_norm + 1e-6) on an fp32 tensor. The add rounds 1e-6 to
  // fp32, and `scalar / tensor` is Tensor.__rtruediv__ = reciprocal(tensor) * scalar.
  const float denom = float(total_norm) + float(1e-6);
  const float coef = (1.0f / denom) * max_norm;
  return std::min(coef, 1.0f);
}

}  // namespace sf
