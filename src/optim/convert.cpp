// fp32 -> bf16 over an array: scalar, AVX2 and AVX-512 bodies, each the bits of f32_to_bf16.
#include "optim/convert.h"

#include "core/dtype.h"
#include "core/error.h"
#include "optim/simd.h"

namespace sf {
namespace {

void convert_scalar(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
}

#if SF_OPTIM_X86
SF_TARGET_AVX512 void convert_avx512(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) simd::store_bf16_x16(dst + i, _mm512_loadu_ps(src + i));
  convert_scalar(src + i, dst + i, n - i);
}

SF_TARGET_AVX2 void convert_avx2(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) simd::store_bf16_x8(dst + i, _mm256_loadu_ps(src + i));
  convert_scalar(src + i, dst + i, n - i);
}
#endif

}  // namespace

void f32_to_bf16_n(OptimIsa isa, const float* src, uint16_t* dst, int64_t n) {
  SF_CHECK(n >= 0 && (n == 0 || (src && dst)), "f32_to_bf16_n: bad range of ", n, " elements");
  SF_CHECK(optim_isa_supported(isa), "f32_to_bf16_n: this CPU lacks ", optim_isa_name(isa));
  switch (isa) {
#if SF_OPTIM_X86
    case OptimIsa::kAvx512:
      return convert_avx512(src, dst, n);
    case OptimIsa::kAvx2:
      return convert_avx2(src, dst, n);
#endif
    default:
      return convert_scalar(src, dst, n);
  }
}

}  // namespace sf
