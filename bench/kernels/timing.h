// defines: BENCH_CK, sf::bench::median_ms — what the kernel benchmarks (bench_kernels,
// bench_attention) share: a checked CUDA call that names itself, and the median time of a
// launch sequence measured with CUDA events on one stream.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "core/error.h"

#define BENCH_CK(x)                                                          \
  do {                                                                       \
    cudaError_t e_ = (x);                                                    \
    if (e_ != cudaSuccess) SF_FAIL(#x, " failed: ", cudaGetErrorString(e_)); \
  } while (0)

namespace sf::bench {

// Median milliseconds of fn over `iters` timed runs on stream s after `warm` warm-ups; `pre`
// (untimed) runs before each of them.
inline double median_ms(cudaStream_t s, const std::function<void()>& fn, int warm = 3,
                        int iters = 20, const std::function<void()>& pre = nullptr) {
  for (int i = 0; i < warm; ++i) {
    if (pre) pre();
    fn();
  }
  BENCH_CK(cudaStreamSynchronize(s));
  cudaEvent_t a, b;
  BENCH_CK(cudaEventCreate(&a));
  BENCH_CK(cudaEventCreate(&b));
  std::vector<float> ms;
  for (int i = 0; i < iters; ++i) {
    if (pre) pre();
    BENCH_CK(cudaEventRecord(a, s));
    fn();
    BENCH_CK(cudaEventRecord(b, s));
    BENCH_CK(cudaEventSynchronize(b));
    float t = 0;
    BENCH_CK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace sf::bench
