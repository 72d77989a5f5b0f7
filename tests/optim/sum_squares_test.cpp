// Tests: sum_squares is the same bits for every thread count and SIMD path, and agrees with a
// plain double loop.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "optim/adamw.h"

namespace sf {
namespace {

TEST(SumSquares, DeterministicAcrossThreadsAndPaths) {
  const int64_t sizes[] = {0, 1, 15, 17, 65536 - 3, 65536, 3 * 65536 + 77};
  std::mt19937 rng(42);
  std::normal_distribution<float> gd(0.0f, 1e-2f);
  ThreadPool pools[] = {ThreadPool(1), ThreadPool(2), ThreadPool(3), ThreadPool(5)};
  for (int64_t n : sizes) {
    std::vector<float> g32(static_cast<size_t>(n));
    std::vector<uint16_t> g16(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      g32[size_t(i)] = gd(rng) * float(1 + i % 1000);
      g16[size_t(i)] = f32_to_bf16(g32[size_t(i)]);
    }
    for (DType dt : {DType::kF32, DType::kBF16}) {
      const void* g = dt == DType::kF32 ? (const void*)g32.data() : (const void*)g16.data();
      double naive = 0;
      for (int64_t i = 0; i < n; ++i) {
        double x = dt == DType::kF32 ? g32[size_t(i)] : bf16_to_f32(g16[size_t(i)]);
        naive += x * x;
      }
      const double first = sum_squares(OptimIsa::kScalar, pools[0], g, dt, n);
      EXPECT_NEAR(first, naive, 1e-12 * naive) << "n=" << n;
      for (OptimIsa isa : {OptimIsa::kScalar, OptimIsa::kAvx2, OptimIsa::kAvx512}) {
        if (!optim_isa_supported(isa)) continue;
        for (ThreadPool& pool : pools) {
          double s = sum_squares(isa, pool, g, dt, n);
          EXPECT_EQ(std::memcmp(&s, &first, sizeof s), 0)
              << "n=" << n << " " << dtype_name(dt) << " " << optim_isa_name(isa) << " threads "
              << pool.size() << ": " << s << " vs " << first;
        }
      }
      EXPECT_EQ(sum_squares(g, dt, n), first);
    }
  }
}

TEST(SumSquares, ExactOnSmallIntegersAndNonFinitePropagates) {
  std::vector<float> g(1000);
  double want = 0;
  for (int i = 0; i < 1000; ++i) {
    g[size_t(i)] = float(i % 7 - 3);
    want += double(i % 7 - 3) * double(i % 7 - 3);
  }
  EXPECT_EQ(sum_squares(g.data(), DType::kF32, 1000), want);
  g[500] = NAN;
  EXPECT_TRUE(std::isnan(sum_squares(g.data(), DType::kF32, 1000)));
  g[500] = INFINITY;
  EXPECT_TRUE(std::isinf(sum_squares(g.data(), DType::kF32, 1000)));
  EXPECT_THROW(sum_squares(g.data(), DType::kI32, 1000), Error);
}

}  // namespace
}  // namespace sf
