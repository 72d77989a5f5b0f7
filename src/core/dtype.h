// defines: sf::DType, dtype_size, dtype_name, bf16/f16 <-> f32 conversions
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace sf {

enum class DType : uint8_t { kF32, kBF16, kF16, kI32, kI64 };

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kBF16: return 2;
    case DType::kF16: return 2;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kBF16: return "BF16";
    case DType::kF16: return "F16";
    case DType::kI32: return "I32";
    case DType::kI64: return "I64";
  }
  return "?";
}

inline float bf16_to_f32(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Round to nearest even, as torch does; NaN stays NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

inline float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  uint32_t u;
  if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else {  // subnormal: renormalise
      int e = -1;
      do {
        ++e;
        man <<= 1;
      } while ((man & 0x400u) == 0);
      u = sign | (uint32_t(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | (man << 13);
  } else {
    u = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// fp32 -> IEEE half, round to nearest even (as torch's .half()); overflow -> inf, NaN stays NaN.
inline uint16_t f32_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  u &= 0x7fffffffu;
  if (u > 0x7f800000u) return sign | 0x7e00u;   // NaN (quiet)
  if (u >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds to inf
  uint32_t mant, h, rem, half;
  if (u >= 0x38800000u) {  // normal half: >= 2^-14
    mant = u & 0x7fffffu;
    h = (((u >> 23) - 127 + 15) << 10) | (mant >> 13);
    rem = mant & 0x1fffu;
    half = 0x1000u;
  } else {  // subnormal half (or zero): units of 2^-24
    const uint32_t e = u >> 23;
    const uint32_t shift = 126 - e;  // value / 2^-24 = m · 2^-(126-e), m the 24-bit significand
    if (shift > 24) return sign;     // below 2^-25: rounds to zero
    mant = (u & 0x7fffffu) | 0x800000u;
    h = mant >> shift;
    rem = mant & ((1u << shift) - 1);
    half = 1u << (shift - 1);
  }
  if (rem > half || (rem == half && (h & 1u))) ++h;  // a carry into the exponent is correct
  return sign | uint16_t(h);
}

}  // namespace sf
