// defines: the thin SIMD layer of the optimizer — bf16 <-> fp32 loads/stores for AVX-512 and
//          AVX2 (sf::simd), bit-identical to sf::bf16_to_f32 / sf::f32_to_bf16.
// Internal to src/optim. Each function carries its own target attribute, so the build needs no
// -march flag; callers pick a path at run time (optim_best_isa).
// Include only after `#pragma GCC optimize("fp-contract=off")` (see adamw.cpp for why).
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SF_OPTIM_X86 1
// GCC 12 reports a false -Wmaybe-uninitialized inside the AVX-512 intrinsic headers
// (`__m512 __Y = __Y;`, GCC bug 105593); the location-based pragma silences only those lines.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#define SF_TARGET_AVX512 __attribute__((target("avx512f")))
#define SF_TARGET_AVX2 __attribute__((target("avx2,fma")))
#else
#define SF_OPTIM_X86 0
#endif

namespace sf::simd {

// fp32 fused multiply-add, correctly rounded, without libm: glibc's fmaf is ~50x slower than the
// rest of the AdamW element when the build has no FMA target. a*b is exact in double; the sum
// is rounded to odd (TwoSum error, then the last bit forced to 1 if inexact), which makes the
// final rounding to fp32 correct — a plain double sum would round twice.
inline float fma_f32(float a, float b, float c) {
#if defined(__FMA__) || defined(__aarch64__)
  return __builtin_fmaf(a, b, c);
#else
  const double p = double(a) * double(b);
  const double cd = double(c);
  double s = p + cd;
  const double bv = s - p;
  const double err = (p - (s - bv)) + (cd - bv);
  if (err > 0 || err < 0) {  // inexact (false for NaN/Inf)
    uint64_t u;
    std::memcpy(&u, &s, 8);
    if ((u & 1) == 0) {
      u += ((err > 0) == (s > 0)) ? 1 : uint64_t(-1);  // one ulp towards the exact sum
      std::memcpy(&s, &u, 8);
    }
  }
  return float(s);
#endif
}

#if SF_OPTIM_X86

// 16 bf16 -> 16 fp32: widen and shift into the high half (exact).
SF_TARGET_AVX512 inline __m512 load_bf16_x16(const uint16_t* src) {
  __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// 16 fp32 -> 16 bf16, round to nearest even; NaN stays a (quiet) NaN — same bits as f32_to_bf16.
SF_TARGET_AVX512 inline void store_bf16_x16(uint16_t* dst, __m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb);
  r = _mm512_srli_epi32(r, 16);
  const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                _mm512_set1_epi32(0x7f800000));
  const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  r = _mm512_mask_mov_epi32(r, nan, quiet);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), _mm512_cvtepi32_epi16(r));
}

SF_TARGET_AVX2 inline __m256 load_bf16_x8(const uint16_t* src) {
  __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

SF_TARGET_AVX2 inline void store_bf16_x8(uint16_t* dst, __m256 x) {
  const __m256i u = _mm256_castps_si256(x);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  __m256i r = _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb);
  r = _mm256_srli_epi32(r, 16);
  const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                         _mm256_set1_epi32(0x7f800000));
  const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
  r = _mm256_blendv_epi8(r, quiet, nan);
  // Every lane is <= 0xffff, so the unsigned-saturating pack is exact.
  __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), packed);
}

#endif  // SF_OPTIM_X86

}  // namespace sf::simd
