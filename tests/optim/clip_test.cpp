// Tests: clip_factor against torch.nn.utils.clip_grad_norm_'s coefficient; global norm.
#include "optim/clip.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"

namespace sf {
namespace {

// torch, in fp32: clamp(reciprocal(total_norm + 1e-6) * max_norm, max=1).
float torch_coef(float total_norm, float max_norm) {
  return std::min((1.0f / (total_norm + float(1e-6))) * max_norm, 1.0f);
}

TEST(Clip, BelowThresholdIsOne) {
  EXPECT_EQ(clip_factor(0.5, 1.0f), 1.0f);
  EXPECT_EQ(clip_factor(0.0, 1.0f), 1.0f);
  EXPECT_EQ(clip_factor(0.999, 1.0f), 1.0f);
}

TEST(Clip, AboveThresholdScalesToMaxNorm) {
  for (double norm : {1.0, 2.0, 3.7, 123.456, 1e6}) {
    const float c = clip_factor(norm, 1.0f);
    EXPECT_EQ(c, torch_coef(float(norm), 1.0f)) << norm;
    EXPECT_NEAR(c, 1.0 / (norm + 1e-6), 1e-6 / norm) << norm;
  }
  EXPECT_LT(clip_factor(1.0, 1.0f), 1.0f);  // torch: 1/(1+1e-6), not exactly 1
  EXPECT_EQ(clip_factor(10.0, 0.5f), torch_coef(10.0f, 0.5f));
  EXPECT_NEAR(clip_factor(10.0, 0.5f), 0.05, 1e-8);
}

TEST(Clip, OffWhenMaxNormNotPositive) {
  EXPECT_EQ(clip_factor(1e9, 0.0f), 1.0f);
  EXPECT_EQ(clip_factor(1e9, -1.0f), 1.0f);
}

TEST(Clip, NonFiniteNormIsAnError) {
  for (double bad : {double(NAN), double(INFINITY), -double(INFINITY)}) {
    for (float max_norm : {1.0f, 0.0f}) {
      try {
        clip_factor(bad, max_norm);
        FAIL() << "no error for norm " << bad;
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("NaN/Inf"), std::string::npos) << e.what();
      }
    }
  }
  EXPECT_THROW(clip_factor(-1.0, 1.0f), Error);
}

TEST(Clip, GlobalNormOverRanges) {
  std::vector<double> sumsq = {9.0, 16.0};
  EXPECT_EQ(global_grad_norm(sumsq), 5.0);
  EXPECT_EQ(global_grad_norm({}), 0.0);
}

}  // namespace
}  // namespace sf
