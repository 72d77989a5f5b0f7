// sum_squares: Σ g² in double, deterministic for every thread count and SIMD path.
//
// The order of additions is fixed by the data, not by the machine: the range is cut into blocks
// of kBlock elements; inside a block, lane j (0..15) sums the elements i with i % 16 == j in
// increasing i; the 16 lanes are added 0..15; block sums are added in block order. The AVX-512
// (2 x 8 doubles) and AVX2 (4 x 4 doubles) bodies hold exactly those 16 lanes. Squares of
// fp32/bf16 values are exact in double (24-bit mantissas), so only the additions round.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#elif defined(__clang__)
#pragma clang fp contract(off)
#endif

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "optim/adamw.h"
#include "optim/simd.h"
#include "optim/sum_squares_lanes.h"

namespace sf {

namespace {

constexpr int64_t kBlock = kSumSquaresBlock;
constexpr int kLanes = kSumSquaresLanes;
static_assert(kBlock % kLanes == 0, "a block holds whole groups of lanes");

inline double grad_at(const void* g, bool bf16, int64_t i) {
  return bf16 ? double(bf16_to_f32(static_cast<const uint16_t*>(g)[i]))
              : double(static_cast<const float*>(g)[i]);
}

// Adds elements [i, end) one by one into lane i % kLanes (the tail of a block).
void add_tail(const void* g, bool bf16, int64_t i, int64_t end, double* lane) {
  for (; i < end; ++i) {
    const double x = grad_at(g, bf16, i);
    lane[i % kLanes] += x * x;
  }
}

void add_scalar(double* lane, const void* g, bool bf16, int64_t begin, int64_t end) {
  add_tail(g, bf16, begin, end, lane);
}

#if SF_OPTIM_X86

SF_TARGET_AVX512 void add_avx512(double* lane, const void* g, bool bf16, int64_t begin,
                                 int64_t end) {
  __m512d a0 = _mm512_loadu_pd(lane), a1 = _mm512_loadu_pd(lane + 8);
  int64_t i = begin;
  for (; i + kLanes <= end; i += kLanes) {
    __m512 x = bf16 ? simd::load_bf16_x16(static_cast<const uint16_t*>(g) + i)
                    : _mm512_loadu_ps(static_cast<const float*>(g) + i);
    __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(x));
    __m512d hi =
        _mm512_cvtps_pd(_mm256_castsi256_ps(_mm512_extracti64x4_epi64(_mm512_castps_si512(x), 1)));
    a0 = _mm512_add_pd(a0, _mm512_mul_pd(lo, lo));
    a1 = _mm512_add_pd(a1, _mm512_mul_pd(hi, hi));
  }
  _mm512_storeu_pd(lane, a0);
  _mm512_storeu_pd(lane + 8, a1);
  add_tail(g, bf16, i, end, lane);
}

SF_TARGET_AVX2 void add_avx2(double* lane, const void* g, bool bf16, int64_t begin, int64_t end) {
  __m256d a[4];
  for (int q = 0; q < 4; ++q) a[q] = _mm256_loadu_pd(lane + 4 * q);
  int64_t i = begin;
  for (; i + kLanes <= end; i += kLanes) {
    for (int h = 0; h < 2; ++h) {
      const int64_t j = i + 8 * h;
      __m256 x = bf16 ? simd::load_bf16_x8(static_cast<const uint16_t*>(g) + j)
                      : _mm256_loadu_ps(static_cast<const float*>(g) + j);
      __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(x));
      __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1));
      a[2 * h] = _mm256_add_pd(a[2 * h], _mm256_mul_pd(lo, lo));
      a[2 * h + 1] = _mm256_add_pd(a[2 * h + 1], _mm256_mul_pd(hi, hi));
    }
  }
  for (int q = 0; q < 4; ++q) _mm256_storeu_pd(lane + 4 * q, a[q]);
  add_tail(g, bf16, i, end, lane);
}

#endif  // SF_OPTIM_X86

}  // namespace

SumSquaresAddFn pick_sum_squares_add(OptimIsa isa) {
#if SF_OPTIM_X86
  if (isa == OptimIsa::kAvx512) return &add_avx512;
  if (isa == OptimIsa::kAvx2) return &add_avx2;
#endif
  (void)isa;
  return &add_scalar;
}

double sum_lanes(const double* lane) {
  double s = 0;
  for (int j = 0; j < kLanes; ++j) s += lane[j];
  return s;
}

double sum_squares(OptimIsa isa, ThreadPool& pool, const void* g, DType g_dtype, int64_t n) {
  SF_CHECK(n >= 0, "sum_squares: negative element count ", n);
  SF_CHECK(g_dtype == DType::kF32 || g_dtype == DType::kBF16,
           "sum_squares: gradient dtype must be F32 or BF16, got ", dtype_name(g_dtype));
  SF_CHECK(n == 0 || g, "sum_squares: null gradient pointer for ", n, " elements");
  SF_CHECK(optim_isa_supported(isa), "sum_squares: this CPU lacks the ", optim_isa_name(isa),
           " instructions; use optim_best_isa()");
  const SumSquaresAddFn add = pick_sum_squares_add(isa);
  const bool bf16 = g_dtype == DType::kBF16;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> partial(size_t(blocks), 0.0);
  pool.parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      double lane[kLanes] = {};
      add(lane, g, bf16, b * kBlock, std::min(n, (b + 1) * kBlock));
      partial[size_t(b)] = sum_lanes(lane);
    }
  });
  double total = 0;
  for (double s : partial) total += s;
  return total;
}

double sum_squares(const void* g, DType g_dtype, int64_t n) {
  return sum_squares(optim_best_isa(), ThreadPool::global(), g, g_dtype, n);
}

}  // namespace sf
