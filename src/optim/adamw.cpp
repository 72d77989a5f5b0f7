// AdamW step: scalar reference, AVX2 and AVX-512 bodies, tiles over the thread pool.
//
// Exactness: every path computes each element with the same IEEE operations in the same order
// (no fast-math; sqrt and division are correctly rounded in SIMD too), so all paths are
// bit-identical with adamw_step_reference. GCC contracts a*b+c into an FMA by default
// (-ffp-contract=fast, even on intrinsics) wherever the target has FMA, which would make the AVX
// paths differ from the scalar one; this file turns contraction off and writes the one FMA it
// wants (torch's lerp) explicitly. The pragma precedes every include so that inline functions
// from headers get the same options and still inline.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#elif defined(__clang__)
#pragma clang fp contract(off)
#endif

#include "optim/adamw.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "optim/simd.h"
#include "optim/sum_squares_lanes.h"

namespace sf {

namespace {

// Elements per tile: 4 fp32 arrays + grad + bf16 copy of 16 Ki elements ≈ 224 KiB, about one
// core's L2. Threads take contiguous runs of tiles; a multiple of 16 so only the range's end
// has a scalar tail.
constexpr int64_t kTile = int64_t(1) << 14;
static_assert(kSumSquaresBlock % kTile == 0, "Σ g² blocks hold whole tiles");

// The double a user meant when they wrote the float: its shortest decimal form, read back as a
// double (0.9f -> 0.9). torch receives hyperparameters as Python floats (doubles), so this is
// what makes 1-beta1, lr*wd, ... the same numbers torch computes.
double decimal_double(float f) {
  if (!std::isfinite(f)) return double(f);
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, f);
  double d = double(f);
  if (ec == std::errc()) std::from_chars(buf, end, d);
  return d;
}

}  // namespace

AdamWConsts adamw_consts(int64_t step, const AdamWParams& hp, float grad_scale) {
  SF_CHECK(step >= 1,
           "adamw_step: step must be >= 1 (1-based, torch's state step after its "
           "increment), got ",
           step);
  SF_CHECK(std::isfinite(hp.lr) && hp.lr >= 0,
           "adamw_step: learning rate must be finite and "
           ">= 0, got ",
           hp.lr);
  SF_CHECK(hp.beta1 >= 0 && hp.beta1 < 1 && hp.beta2 >= 0 && hp.beta2 < 1,
           "adamw_step: betas must be in [0, 1), got beta1=", hp.beta1, " beta2=", hp.beta2);
  SF_CHECK(hp.eps >= 0 && std::isfinite(hp.eps), "adamw_step: eps must be finite and >= 0, got ",
           hp.eps);
  SF_CHECK(hp.weight_decay >= 0 && std::isfinite(hp.weight_decay),
           "adamw_step: weight_decay must be finite and >= 0, got ", hp.weight_decay);
  SF_CHECK(std::isfinite(grad_scale), "adamw_step: grad_scale must be finite, got ", grad_scale);
  const double lr = decimal_double(hp.lr), b1 = decimal_double(hp.beta1),
               b2 = decimal_double(hp.beta2), eps = decimal_double(hp.eps),
               wd = decimal_double(hp.weight_decay);
  const double bc1 = 1.0 - std::pow(b1, double(step));
  const double bc2 = 1.0 - std::pow(b2, double(step));
  AdamWConsts k;
  k.scale = grad_scale;
  k.decay = float(1.0 - lr * wd);
  k.w = float(1.0 - b1);
  k.w_small = std::fabs(k.w) < 0.5f;
  k.beta2 = float(b2);
  k.c2 = float(1.0 - b2);
  k.bc2_sqrt = float(std::sqrt(bc2));
  k.eps = float(eps);
  k.neg_step = float(-(lr / bc1));
  return k;
}

namespace {

inline float load_grad(const void* g, DType dt, int64_t i) {
  return dt == DType::kBF16 ? bf16_to_f32(static_cast<const uint16_t*>(g)[i])
                            : static_cast<const float*>(g)[i];
}

// One element: the specification (see adamw.h). Also the SIMD paths' tail. kWhat says which of
// p and (m, v) are stored; the arithmetic is the same whichever it is.
template <AdamWWrite kWhat>
inline void adamw_element(float& p, float& m, float& v, float g_raw, const AdamWConsts& k) {
  const float g = g_raw * k.scale;
  const float d = g - m;
  const float mm = k.w_small ? simd::fma_f32(k.w, d, m) : simd::fma_f32(k.w - 1.0f, d, g);
  const float vv = v * k.beta2 + (k.c2 * g) * g;
  if constexpr (kWhat != AdamWWrite::kMoments) {
    const float denom = std::sqrt(vv) / k.bc2_sqrt + k.eps;
    p = p * k.decay + (k.neg_step * mm) / denom;
  }
  if constexpr (kWhat != AdamWWrite::kWeights) {
    m = mm;
    v = vv;
  }
}

template <AdamWWrite kWhat>
void adamw_range_scalar(float* p, float* m, float* v, const void* g, DType dt, int64_t begin,
                        int64_t end, const AdamWConsts& k, uint16_t* pb) {
  for (int64_t i = begin; i < end; ++i) {
    adamw_element<kWhat>(p[i], m[i], v[i], load_grad(g, dt, i), k);
    if (pb) pb[i] = f32_to_bf16(p[i]);
  }
}

#if SF_OPTIM_X86

// kWhat as in adamw_element; the bf16 copy of p only with kAll.
template <bool kBf16Grad, bool kWriteBf16, AdamWWrite kWhat>
SF_TARGET_AVX512 void adamw_range_avx512(float* p, float* m, float* v, const void* g, int64_t begin,
                                         int64_t end, const AdamWConsts& k, uint16_t* pb) {
  const __m512 scale = _mm512_set1_ps(k.scale), decay = _mm512_set1_ps(k.decay);
  const __m512 coeff = _mm512_set1_ps(k.w_small ? k.w : k.w - 1.0f);
  const __m512 beta2 = _mm512_set1_ps(k.beta2), c2 = _mm512_set1_ps(k.c2);
  const __m512 bc2s = _mm512_set1_ps(k.bc2_sqrt), eps = _mm512_set1_ps(k.eps);
  const __m512 neg_step = _mm512_set1_ps(k.neg_step);
  int64_t i = begin;
  for (; i + 16 <= end; i += 16) {
    __m512 gv = kBf16Grad ? simd::load_bf16_x16(static_cast<const uint16_t*>(g) + i)
                          : _mm512_loadu_ps(static_cast<const float*>(g) + i);
    gv = _mm512_mul_ps(gv, scale);
    __m512 mv = _mm512_loadu_ps(m + i);
    const __m512 d = _mm512_sub_ps(gv, mv);
    mv = _mm512_fmadd_ps(coeff, d, k.w_small ? mv : gv);
    const __m512 vv = _mm512_add_ps(_mm512_mul_ps(_mm512_loadu_ps(v + i), beta2),
                                    _mm512_mul_ps(_mm512_mul_ps(c2, gv), gv));
    if constexpr (kWhat != AdamWWrite::kMoments) {
      const __m512 pv = _mm512_mul_ps(_mm512_loadu_ps(p + i), decay);
      const __m512 denom = _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(vv), bc2s), eps);
      const __m512 pn = _mm512_add_ps(pv, _mm512_div_ps(_mm512_mul_ps(neg_step, mv), denom));
      _mm512_storeu_ps(p + i, pn);
      if constexpr (kWriteBf16) simd::store_bf16_x16(pb + i, pn);
    }
    if constexpr (kWhat != AdamWWrite::kWeights) {
      _mm512_storeu_ps(m + i, mv);
      _mm512_storeu_ps(v + i, vv);
    }
  }
  adamw_range_scalar<kWhat>(p, m, v, g, kBf16Grad ? DType::kBF16 : DType::kF32, i, end, k, pb);
}

template <bool kBf16Grad, bool kWriteBf16, AdamWWrite kWhat>
SF_TARGET_AVX2 void adamw_range_avx2(float* p, float* m, float* v, const void* g, int64_t begin,
                                     int64_t end, const AdamWConsts& k, uint16_t* pb) {
  const __m256 scale = _mm256_set1_ps(k.scale), decay = _mm256_set1_ps(k.decay);
  const __m256 coeff = _mm256_set1_ps(k.w_small ? k.w : k.w - 1.0f);
  const __m256 beta2 = _mm256_set1_ps(k.beta2), c2 = _mm256_set1_ps(k.c2);
  const __m256 bc2s = _mm256_set1_ps(k.bc2_sqrt), eps = _mm256_set1_ps(k.eps);
  const __m256 neg_step = _mm256_set1_ps(k.neg_step);
  int64_t i = begin;
  for (; i + 8 <= end; i += 8) {
    __m256 gv = kBf16Grad ? simd::load_bf16_x8(static_cast<const uint16_t*>(g) + i)
                          : _mm256_loadu_ps(static_cast<const float*>(g) + i);
    gv = _mm256_mul_ps(gv, scale);
    __m256 mv = _mm256_loadu_ps(m + i);
    const __m256 d = _mm256_sub_ps(gv, mv);
    mv = _mm256_fmadd_ps(coeff, d, k.w_small ? mv : gv);
    const __m256 vv = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(v + i), beta2),
                                    _mm256_mul_ps(_mm256_mul_ps(c2, gv), gv));
    if constexpr (kWhat != AdamWWrite::kMoments) {
      const __m256 pv = _mm256_mul_ps(_mm256_loadu_ps(p + i), decay);
      const __m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(vv), bc2s), eps);
      const __m256 pn = _mm256_add_ps(pv, _mm256_div_ps(_mm256_mul_ps(neg_step, mv), denom));
      _mm256_storeu_ps(p + i, pn);
      if constexpr (kWriteBf16) simd::store_bf16_x8(pb + i, pn);
    }
    if constexpr (kWhat != AdamWWrite::kWeights) {
      _mm256_storeu_ps(m + i, mv);
      _mm256_storeu_ps(v + i, vv);
    }
  }
  adamw_range_scalar<kWhat>(p, m, v, g, kBf16Grad ? DType::kBF16 : DType::kF32, i, end, k, pb);
}

#endif  // SF_OPTIM_X86

using RangeFn = void (*)(float*, float*, float*, const void*, int64_t, int64_t, const AdamWConsts&,
                         uint16_t*);

template <bool kBf16Grad, bool kWriteBf16, AdamWWrite kWhat>
void adamw_range_scalar_t(float* p, float* m, float* v, const void* g, int64_t begin, int64_t end,
                          const AdamWConsts& k, uint16_t* pb) {
  adamw_range_scalar<kWhat>(p, m, v, g, kBf16Grad ? DType::kBF16 : DType::kF32, begin, end, k, pb);
}

template <bool kBf16Grad, bool kWriteBf16, AdamWWrite kWhat>
RangeFn pick_range_fn(OptimIsa isa) {
  switch (isa) {
#if SF_OPTIM_X86
    case OptimIsa::kAvx512:
      return &adamw_range_avx512<kBf16Grad, kWriteBf16, kWhat>;
    case OptimIsa::kAvx2:
      return &adamw_range_avx2<kBf16Grad, kWriteBf16, kWhat>;
#endif
    default:
      return &adamw_range_scalar_t<kBf16Grad, kWriteBf16, kWhat>;
  }
}

template <AdamWWrite kWhat>
RangeFn pick_range_fn(OptimIsa isa, bool bf16_grad, bool write_bf16) {
  if constexpr (kWhat == AdamWWrite::kAll) {
    if (write_bf16)
      return bf16_grad ? pick_range_fn<true, true, kWhat>(isa)
                       : pick_range_fn<false, true, kWhat>(isa);
  }
  return bf16_grad ? pick_range_fn<true, false, kWhat>(isa)
                   : pick_range_fn<false, false, kWhat>(isa);
}

RangeFn pick_range_fn(OptimIsa isa, bool bf16_grad, bool write_bf16, AdamWWrite what) {
  switch (what) {
    case AdamWWrite::kWeights:
      return pick_range_fn<AdamWWrite::kWeights>(isa, bf16_grad, false);
    case AdamWWrite::kMoments:
      return pick_range_fn<AdamWWrite::kMoments>(isa, bf16_grad, false);
    default:
      return pick_range_fn<AdamWWrite::kAll>(isa, bf16_grad, write_bf16);
  }
}

// Elements whose exponent bits are all ones (inf or NaN), per instruction set: run on the tile the
// update just wrote, so it reads from cache.
int64_t count_nonfinite_scalar(const float* p, int64_t n) {
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, p + i, 4);
    bad += (bits & 0x7f800000u) == 0x7f800000u;
  }
  return bad;
}

#if SF_OPTIM_X86
SF_TARGET_AVX512 int64_t count_nonfinite_avx512(const float* p, int64_t n) {
  const __m512i exp = _mm512_set1_epi32(0x7f800000);
  int64_t bad = 0, i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i b = _mm512_and_si512(_mm512_loadu_si512(p + i), exp);
    bad += __builtin_popcount(unsigned(_mm512_cmpeq_epi32_mask(b, exp)));
  }
  return bad + count_nonfinite_scalar(p + i, n - i);
}

SF_TARGET_AVX2 int64_t count_nonfinite_avx2(const float* p, int64_t n) {
  const __m256i exp = _mm256_set1_epi32(0x7f800000);
  int64_t bad = 0, i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i b = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)), exp);
    bad += __builtin_popcount(
        unsigned(_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(b, exp)))));
  }
  return bad + count_nonfinite_scalar(p + i, n - i);
}
#endif

using CountFn = int64_t (*)(const float*, int64_t);
CountFn pick_count_fn(OptimIsa isa) {
  switch (isa) {
#if SF_OPTIM_X86
    case OptimIsa::kAvx512:
      return &count_nonfinite_avx512;
    case OptimIsa::kAvx2:
      return &count_nonfinite_avx2;
#endif
    default:
      return &count_nonfinite_scalar;
  }
}

void check_args(const float* p, const float* m, const float* v, const void* g, DType g_dtype,
                int64_t n) {
  SF_CHECK(n >= 0, "adamw_step: negative parameter count ", n);
  SF_CHECK(g_dtype == DType::kF32 || g_dtype == DType::kBF16,
           "adamw_step: gradient dtype must be F32 or BF16, got ", dtype_name(g_dtype));
  SF_CHECK(n == 0 || (p && m && v && g), "adamw_step: null p/m/v/g pointer for ", n, " parameters");
}

void check_write(AdamWWrite what, const uint16_t* p_bf16) {
  SF_CHECK(what == AdamWWrite::kAll || !p_bf16,
           "adamw_step: a bf16 copy of the weights goes with AdamWWrite::kAll only");
}

}  // namespace

bool optim_isa_supported(OptimIsa isa) {
  switch (isa) {
    case OptimIsa::kScalar:
      return true;
#if SF_OPTIM_X86
    case OptimIsa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case OptimIsa::kAvx512:
      return __builtin_cpu_supports("avx512f");
#endif
    default:
      return false;
  }
}

OptimIsa optim_best_isa() {
  static const OptimIsa best = [] {
    for (OptimIsa isa : {OptimIsa::kAvx512, OptimIsa::kAvx2})
      if (optim_isa_supported(isa)) return isa;
    return OptimIsa::kScalar;
  }();
  return best;
}

std::string_view optim_isa_name(OptimIsa isa) {
  switch (isa) {
    case OptimIsa::kScalar:
      return "scalar";
    case OptimIsa::kAvx2:
      return "avx2";
    case OptimIsa::kAvx512:
      return "avx512";
  }
  return "?";
}

void adamw_step_reference(float* p, float* m, float* v, const void* g, DType g_dtype, int64_t n,
                          int64_t step, const AdamWParams& hp, float grad_scale, uint16_t* p_bf16,
                          AdamWWrite what) {
  check_args(p, m, v, g, g_dtype, n);
  check_write(what, p_bf16);
  const AdamWConsts k = adamw_consts(step, hp, grad_scale);
  pick_range_fn(OptimIsa::kScalar, g_dtype == DType::kBF16, p_bf16 != nullptr, what)(p, m, v, g, 0,
                                                                                     n, k, p_bf16);
}

int64_t adamw_step(OptimIsa isa, ThreadPool& pool, float* p, float* m, float* v, const void* g,
                   DType g_dtype, int64_t n, int64_t step, const AdamWParams& hp, float grad_scale,
                   uint16_t* p_bf16, AdamWWrite what, double* sumsq) {
  check_args(p, m, v, g, g_dtype, n);
  check_write(what, p_bf16);
  SF_CHECK(optim_isa_supported(isa), "adamw_step: this CPU lacks the ", optim_isa_name(isa),
           " instructions; use optim_best_isa()");
  const AdamWConsts k = adamw_consts(step, hp, grad_scale);
  const RangeFn fn = pick_range_fn(isa, g_dtype == DType::kBF16, p_bf16 != nullptr, what);
  // The moments alone leave p as it was: nothing new to count.
  const CountFn count_nonfinite = what == AdamWWrite::kMoments
                                      ? +[](const float*, int64_t) { return int64_t(0); }
                                      : pick_count_fn(isa);
  std::atomic<int64_t> nonfinite{0};
  // Updates [b, e); returns how many of the p it wrote are non-finite (read back from cache).
  auto tile = [&](int64_t b, int64_t e) {
    fn(p, m, v, g, b, e, k, p_bf16);
    return count_nonfinite(p + b, e - b);
  };
  if (sumsq) {
    // By sum_squares's blocks, each tile's Σ g² added into the block's lanes right after the
    // update read it (from cache): the same order of additions, so the same bits.
    const SumSquaresAddFn add = pick_sum_squares_add(isa);
    const bool bf16 = g_dtype == DType::kBF16;
    const int64_t blocks = (n + kSumSquaresBlock - 1) / kSumSquaresBlock;
    std::vector<double> partial(size_t(blocks), 0.0);
    pool.parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
      int64_t bad = 0;
      for (int64_t blk = b0; blk < b1; ++blk) {
        double lane[kSumSquaresLanes] = {};
        const int64_t end = std::min(n, (blk + 1) * kSumSquaresBlock);
        for (int64_t b = blk * kSumSquaresBlock; b < end; b += kTile) {
          const int64_t e = std::min(end, b + kTile);
          bad += tile(b, e);
          add(lane, g, bf16, b, e);
        }
        partial[size_t(blk)] = sum_lanes(lane);
      }
      if (bad) nonfinite += bad;
    });
    double total = 0;
    for (double x : partial) total += x;
    *sumsq = total;
    return nonfinite.load();
  }
  const int64_t tiles = (n + kTile - 1) / kTile;
  pool.parallel_for(tiles, 1, [&](int64_t t0, int64_t t1) {
    int64_t bad = 0;
    for (int64_t t = t0; t < t1; ++t) bad += tile(t * kTile, std::min(n, (t + 1) * kTile));
    if (bad) nonfinite += bad;
  });
  return nonfinite.load();
}

int64_t adamw_step(float* p, float* m, float* v, const void* g, DType g_dtype, int64_t n,
                   int64_t step, const AdamWParams& hp, float grad_scale, uint16_t* p_bf16,
                   AdamWWrite what, double* sumsq) {
  return adamw_step(optim_best_isa(), ThreadPool::global(), p, m, v, g, g_dtype, n, step, hp,
                    grad_scale, p_bf16, what, sumsq);
}

}  // namespace sf
