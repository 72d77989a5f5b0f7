// Tests: f32_to_bf16_n gives f32_to_bf16's bits on every instruction-set path, for every value
// class (ties to even both ways, denormals, infinities, NaNs with payloads) and every tail length.
#include "optim/convert.h"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"

namespace sf {
namespace {

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(ConvertF32ToBf16, EveryPathIsTheScalarRounding) {
  std::vector<float> x = {0.0f,
                          -0.0f,
                          1.0f,
                          -1.0f,
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::denorm_min(),
                          from_bits(0x3f808000u),   // a tie, the even neighbour below
                          from_bits(0x3f818000u),   // a tie, the even neighbour above
                          from_bits(0x3f80ffffu),   // rounds up
                          from_bits(0x7f7fffffu),   // the largest float: rounds to inf
                          from_bits(0x7f800001u),   // a signalling NaN, low payload
                          from_bits(0xffc00001u),   // a negative quiet NaN
                          from_bits(0x7fbfffffu)};  // a NaN whose payload would round into inf
  std::mt19937 rng(7);
  for (int i = 0; i < 5000; ++i) x.push_back(from_bits(uint32_t(rng())));
  const int64_t total = int64_t(x.size());
  std::vector<uint16_t> want(x.size());
  for (size_t i = 0; i < x.size(); ++i) want[i] = f32_to_bf16(x[i]);
  // Quiet NaNs stay NaNs: the scalar rounding's promise the SIMD paths must keep.
  EXPECT_EQ(want[11] & 0x7fc0u, 0x7fc0u);
  EXPECT_EQ(want[13] & 0x7fc0u, 0x7fc0u);
  EXPECT_EQ(want[10], 0x7f80u);
  for (OptimIsa isa : {OptimIsa::kScalar, OptimIsa::kAvx2, OptimIsa::kAvx512}) {
    if (!optim_isa_supported(isa)) continue;
    // Every start and length up to two vectors past a multiple, so each tail is taken.
    for (int64_t off : std::vector<int64_t>{0, 1, 7}) {
      for (int64_t n : std::vector<int64_t>{0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 1000, total - 7}) {
        std::vector<uint16_t> got(size_t(n), 0xdead);
        f32_to_bf16_n(isa, x.data() + off, got.data(), n);
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(got[size_t(i)], want[size_t(off + i)])
              << optim_isa_name(isa) << " n=" << n << " off=" << off << " i=" << i;
      }
    }
  }
}

TEST(ConvertF32ToBf16, ABadRangeIsAnError) {
  uint16_t d = 0;
  EXPECT_THROW(f32_to_bf16_n(OptimIsa::kScalar, nullptr, &d, 1), Error);
  EXPECT_THROW(f32_to_bf16_n(OptimIsa::kScalar, nullptr, nullptr, -1), Error);
  f32_to_bf16_n(OptimIsa::kScalar, nullptr, nullptr, 0);  // nothing to do
}

}  // namespace
}  // namespace sf
