#include "optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.h"

namespace sf {

void LrSchedule::validate() const {
  SF_CHECK(std::isfinite(base_lr) && base_lr >= 0,
           "LR schedule: learning rate must be finite "
           "and >= 0, got ",
           base_lr);
  SF_CHECK(warmup_steps >= 0, "LR schedule: warmup_steps must be >= 0, got ", warmup_steps);
  SF_CHECK(total_steps >= 0, "LR schedule: total_steps must be >= 0, got ", total_steps);
  SF_CHECK(warmup_steps <= total_steps, "LR schedule: warmup_steps (", warmup_steps,
           ") exceeds total_steps (", total_steps, "); shorten the warmup or train longer");
  SF_CHECK(min_lr_ratio >= 0 && min_lr_ratio <= 1,
           "LR schedule: min_lr_ratio must be in "
           "[0, 1], got ",
           min_lr_ratio);
}

float LrSchedule::lr_at(int64_t step) const {
  validate();
  SF_CHECK(step >= 0, "LR schedule: step must be >= 0 (0-based optimizer step), got ", step);
  // transformers' lambdas, in Python floats (double).
  double factor;
  if (step < warmup_steps) {
    factor = double(step) / double(std::max<int64_t>(1, warmup_steps));
  } else {
    const double span = double(std::max<int64_t>(1, total_steps - warmup_steps));
    switch (kind) {
      case Kind::kConstant:
        factor = 1.0;
        break;
      case Kind::kLinear:
        factor = std::max(0.0, double(total_steps - step) / span);
        factor = std::max(factor, double(min_lr_ratio));
        break;
      case Kind::kCosine: {
        const double progress = double(step - warmup_steps) / span;
        factor = std::max(0.0, 0.5 * (1.0 + std::cos(std::numbers::pi * 0.5 * 2.0 * progress)));
        factor = std::max(factor, double(min_lr_ratio));
        break;
      }
      default:
        SF_FAIL("LR schedule: unknown kind ", int(kind));
    }
  }
  return float(double(base_lr) * factor);
}

LrSchedule::Kind parse_schedule_kind(const std::string& name) {
  if (name == "constant" || name == "constant_with_warmup") return LrSchedule::Kind::kConstant;
  if (name == "linear") return LrSchedule::Kind::kLinear;
  if (name == "cosine") return LrSchedule::Kind::kCosine;
  SF_FAIL("unknown LR schedule \"", name,
          "\": accepted values are constant (alias "
          "constant_with_warmup), linear, cosine");
}

std::string_view schedule_kind_name(LrSchedule::Kind kind) {
  switch (kind) {
    case LrSchedule::Kind::kConstant:
      return "constant";
    case LrSchedule::Kind::kLinear:
      return "linear";
    case LrSchedule::Kind::kCosine:
      return "cosine";
  }
  return "?";
}

}  // namespace sf
