// defines: sf::cpu::fill_zero, convert, add
#include <cstring>

#include "backend/cpu/ops.h"
#include "core/thread_pool.h"

namespace sf::cpu {
namespace {

constexpr int64_t kGrain = 1 << 16;  // elements per task: enough work to be worth a thread

template <typename Fn>
void for_each_index(int64_t n, Fn fn) {
  parallel_for(n, kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) fn(i);
  });
}

}  // namespace

void fill_zero(Tensor x) {
  if (x.numel() == 0) return;
  SF_CHECK(x.data != nullptr, "fill_zero: null tensor ", x.shape_str());
  std::memset(x.data, 0, x.bytes());
}

void convert(Tensor dst, Tensor src) {
  SF_CHECK(dst.numel() == src.numel(), "convert: dst ", dst.shape_str(), " and src ",
           src.shape_str(), " must have the same number of elements");
  const int64_t n = src.numel();
  if (dst.dtype == DType::kF32 && src.dtype == DType::kF32) {
    if (dst.data != src.data && n > 0) std::memcpy(dst.data, src.data, src.bytes());
  } else if (dst.dtype == DType::kBF16 && src.dtype == DType::kF32) {
    const float* s = src.as<float>();
    uint16_t* d = dst.as<uint16_t>();
    for_each_index(n, [&](int64_t i) { d[i] = f32_to_bf16(s[i]); });
  } else if (dst.dtype == DType::kF16 && src.dtype == DType::kF32) {
    const float* s = src.as<float>();
    uint16_t* d = dst.as<uint16_t>();
    for_each_index(n, [&](int64_t i) { d[i] = f32_to_f16(s[i]); });
  } else if (dst.dtype == DType::kF32 && src.dtype == DType::kBF16) {
    const uint16_t* s = src.as<uint16_t>();
    float* d = dst.as<float>();
    for_each_index(n, [&](int64_t i) { d[i] = bf16_to_f32(s[i]); });
  } else if (dst.dtype == DType::kF32 && src.dtype == DType::kF16) {
    const uint16_t* s = src.as<uint16_t>();
    float* d = dst.as<float>();
    for_each_index(n, [&](int64_t i) { d[i] = f16_to_f32(s[i]); });
  } else {
    SF_FAIL("convert: ", dtype_name(src.dtype), " -> ", dtype_name(dst.dtype),
            " is not supported (only F32 <-> BF16/F16 and F32 -> F32)");
  }
}

void add(Tensor out, Tensor a, Tensor b) {
  SF_CHECK(out.dtype == DType::kF32 && a.dtype == DType::kF32 && b.dtype == DType::kF32,
           "add: out, a, b must be F32, got ", dtype_name(out.dtype), ", ", dtype_name(a.dtype),
           ", ", dtype_name(b.dtype));
  SF_CHECK(out.numel() == a.numel() && out.numel() == b.numel(), "add: shapes differ: out ",
           out.shape_str(), ", a ", a.shape_str(), ", b ", b.shape_str());
  const float* pa = a.f32();
  const float* pb = b.f32();
  float* po = out.f32();  // may alias a or b: each element is read before it is written
  for_each_index(out.numel(), [&](int64_t i) { po[i] = pa[i] + pb[i]; });
}

}  // namespace sf::cpu
