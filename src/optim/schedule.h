// defines: sf::LrSchedule, sf::parse_schedule_kind — learning rate per optimizer step, matching
//          transformers' get_{constant,linear,cosine}_schedule_with_warmup.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace sf {

struct LrSchedule {
  enum class Kind { kConstant, kLinear, kCosine };
  Kind kind;
  float base_lr;
  int64_t warmup_steps;
  int64_t total_steps;
  // Lower bound of the decay part (linear, cosine) as a fraction of base_lr; 0 = transformers.
  // The warmup ramp is not floored. Note: transformers' cosine_with_min_lr *rescales* the cosine
  // (f*(1-r)+r) instead of flooring it.
  float min_lr_ratio = 0;

  // Learning rate of 0-based optimizer step `step` (LambdaLR: base_lr * lambda(step)), computed
  // in double and rounded once. Steps past total_steps follow the formulas (linear: 0 or the
  // floor; cosine: the formula's cos keeps going, as in transformers). Throws on invalid config.
  float lr_at(int64_t step) const;
  // Throws sf::Error naming the bad field: base_lr >= 0 and finite, 0 <= warmup <= total,
  // 0 <= min_lr_ratio <= 1.
  void validate() const;
};

// "constant" (also "constant_with_warmup"), "linear", "cosine"; anything else throws an error
// listing these.
LrSchedule::Kind parse_schedule_kind(const std::string& name);
std::string_view schedule_kind_name(LrSchedule::Kind kind);

}  // namespace sf
