// defines: sf::f32_to_bf16_n — fp32 to bf16 over an array on the CPU, SIMD where the CPU has it.
// Round to nearest even, NaN kept a quiet NaN: the same bits as sf::f32_to_bf16 per element on
// every path. One thread: callers split the range (bench/e2e/bench_upload.cpp converts an upload
// tile over a pool with it, the form issue 12 item 2 measures against the device-side cast).
#pragma once

#include <cstdint>

#include "optim/adamw.h"

namespace sf {

void f32_to_bf16_n(OptimIsa isa, const float* src, uint16_t* dst, int64_t n);
inline void f32_to_bf16_n(const float* src, uint16_t* dst, int64_t n) {
  f32_to_bf16_n(optim_best_isa(), src, dst, n);
}

}  // namespace sf
