// defines: sf::global_grad_norm, sf::clip_factor — gradient clipping by global norm with the
//          numbers of torch.nn.utils.clip_grad_norm_.
#pragma once

#include <span>

namespace sf {

// sqrt(Σ partial sums of squares), added in the order given (one per parameter range, from
// sum_squares). Clipping is exact only when every range of the step is in `sumsq`.
double global_grad_norm(std::span<const double> sumsq);

// The factor every gradient is multiplied by: torch's clip_coef = max_norm / (total_norm + 1e-6),
// clamped to <= 1, in fp32 as torch computes it (reciprocal then multiply, see clip.cpp).
// max_norm <= 0 turns clipping off (returns 1). Throws sf::Error when total_norm is NaN or Inf
// (also with clipping off: a non-finite gradient would corrupt the weights) or negative.
float clip_factor(double total_norm, float max_norm);

}  // namespace sf
