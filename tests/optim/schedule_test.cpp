// Tests: LrSchedule against transformers' schedule lambdas; validation and parsing errors.
#include "optim/schedule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <string>

#include "core/error.h"

namespace sf {
namespace {

using Kind = LrSchedule::Kind;

float want(double base, double factor) { return float(base * factor); }

TEST(Schedule, ConstantWithWarmup) {
  LrSchedule s{Kind::kConstant, 1e-3f, 10, 100};
  EXPECT_EQ(s.lr_at(0), 0.0f);
  EXPECT_EQ(s.lr_at(5), want(1e-3f, 0.5));
  EXPECT_EQ(s.lr_at(10), 1e-3f);
  EXPECT_EQ(s.lr_at(55), 1e-3f);
  EXPECT_EQ(s.lr_at(99), 1e-3f);
  EXPECT_EQ(s.lr_at(100), 1e-3f);
}

TEST(Schedule, LinearWithWarmup) {
  LrSchedule s{Kind::kLinear, 1e-3f, 10, 100};
  EXPECT_EQ(s.lr_at(0), 0.0f);
  EXPECT_EQ(s.lr_at(5), want(1e-3f, 5.0 / 10));
  EXPECT_EQ(s.lr_at(10), want(1e-3f, 90.0 / 90));
  EXPECT_EQ(s.lr_at(55), want(1e-3f, 45.0 / 90));
  EXPECT_EQ(s.lr_at(99), want(1e-3f, 1.0 / 90));
  EXPECT_EQ(s.lr_at(100), 0.0f);
  EXPECT_EQ(s.lr_at(150), 0.0f);
}

TEST(Schedule, CosineWithWarmup) {
  LrSchedule s{Kind::kCosine, 1e-3f, 10, 100};
  auto f = [](double step) {
    double progress = (step - 10) / 90;
    return std::max(0.0, 0.5 * (1 + std::cos(std::numbers::pi * 0.5 * 2 * progress)));
  };
  EXPECT_EQ(s.lr_at(0), 0.0f);
  EXPECT_EQ(s.lr_at(5), want(1e-3f, 0.5));
  EXPECT_EQ(s.lr_at(10), 1e-3f);
  EXPECT_EQ(s.lr_at(55), want(1e-3f, f(55)));
  EXPECT_NEAR(s.lr_at(55), 0.5e-3, 1e-9);
  EXPECT_EQ(s.lr_at(99), want(1e-3f, f(99)));
  EXPECT_NEAR(s.lr_at(100), 0.0f, 1e-15);
}

TEST(Schedule, MinLrRatioFloorsTheDecayOnly) {
  LrSchedule lin{Kind::kLinear, 1e-3f, 10, 100, 0.1f};
  EXPECT_EQ(lin.lr_at(0), 0.0f);  // warmup is not floored
  EXPECT_EQ(lin.lr_at(55), want(1e-3f, 0.5));
  EXPECT_EQ(lin.lr_at(99), want(1e-3f, double(0.1f)));
  EXPECT_EQ(lin.lr_at(100), want(1e-3f, double(0.1f)));
  LrSchedule cos{Kind::kCosine, 1e-3f, 10, 100, 0.1f};
  EXPECT_NEAR(cos.lr_at(55), 0.5e-3, 1e-9);
  EXPECT_EQ(cos.lr_at(100), want(1e-3f, double(0.1f)));
}

TEST(Schedule, NoWarmup) {
  LrSchedule s{Kind::kLinear, 2e-5f, 0, 50};
  EXPECT_EQ(s.lr_at(0), 2e-5f);
  EXPECT_EQ(s.lr_at(25), want(2e-5f, 0.5));
  LrSchedule c{Kind::kCosine, 2e-5f, 0, 0};  // degenerate: total 0, max(1, 0) guards the divide
  EXPECT_EQ(c.lr_at(0), 2e-5f);
}

TEST(Schedule, ValidationErrors) {
  EXPECT_THROW((LrSchedule{Kind::kLinear, 1e-3f, 101, 100}.lr_at(0)), Error);
  EXPECT_THROW((LrSchedule{Kind::kLinear, -1e-3f, 0, 100}.lr_at(0)), Error);
  EXPECT_THROW((LrSchedule{Kind::kLinear, 1e-3f, -1, 100}.lr_at(0)), Error);
  EXPECT_THROW((LrSchedule{Kind::kCosine, 1e-3f, 0, 100, 1.5f}.lr_at(0)), Error);
  EXPECT_THROW((LrSchedule{Kind::kCosine, 1e-3f, 0, 100}.lr_at(-1)), Error);
  try {
    LrSchedule{Kind::kLinear, 1e-3f, 200, 100}.validate();
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("warmup_steps (200) exceeds total_steps (100)"),
              std::string::npos)
        << e.what();
  }
}

TEST(Schedule, ParseKind) {
  EXPECT_EQ(parse_schedule_kind("constant"), Kind::kConstant);
  EXPECT_EQ(parse_schedule_kind("constant_with_warmup"), Kind::kConstant);
  EXPECT_EQ(parse_schedule_kind("linear"), Kind::kLinear);
  EXPECT_EQ(parse_schedule_kind("cosine"), Kind::kCosine);
  try {
    parse_schedule_kind("cosine_with_restarts");
    FAIL();
  } catch (const Error& e) {
    std::string w = e.what();
    EXPECT_NE(w.find("cosine_with_restarts"), std::string::npos) << w;
    for (const char* ok : {"constant", "linear", "cosine"})
      EXPECT_NE(w.find(ok), std::string::npos) << w;
  }
}

}  // namespace
}  // namespace sf
