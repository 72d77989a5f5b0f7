// defines: SF_CUDA_CHECK, SF_LAUNCH_CHECK, sf::cuda::check_dtype and small device helpers shared
// by the kernel files (bf16 <-> f32, warp/block sums).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>
#include <utility>

#include "core/error.h"
#include "core/tensor.h"

// Any CUDA runtime failure becomes an sf::Error naming the op (a string built by the caller with
// the shapes) and CUDA's error string.
#define SF_CUDA_CHECK(call, ...)                                                              \
  do {                                                                                        \
    cudaError_t sf_err_ = (call);                                                             \
    if (sf_err_ != cudaSuccess)                                                               \
      throw ::sf::Error(                                                                      \
          ::sf::str_cat(__VA_ARGS__, ": ", #call, " failed: ", cudaGetErrorString(sf_err_))); \
  } while (0)

// After a kernel launch: a bad configuration (or an earlier asynchronous fault) is reported here.
#define SF_LAUNCH_CHECK(...) SF_CUDA_CHECK(cudaGetLastError(), __VA_ARGS__)

namespace sf::cuda {

using bf16 = __nv_bfloat16;

inline void check_dtype(const char* op, const char* name, const Tensor& t, DType want) {
  SF_CHECK(t.dtype == want, op, ": ", name, " ", t.shape_str(), " must be ", dtype_name(want),
           " on the CUDA backend, got ", dtype_name(t.dtype));
}

// Every pointer 16-byte aligned (the vectorised kernels' 16-byte loads and stores).
inline bool aligned16(std::initializer_list<const void*> ps) {
  for (const void* p : ps)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  return true;
}

inline unsigned grid_for(int64_t n, int threads, int64_t cap = int64_t(1) << 20) {
  int64_t b = (n + threads - 1) / threads;
  if (b < 1) b = 1;
  return unsigned(b < cap ? b : cap);
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, <= 1024); every thread gets the result.
// `red` is 32 floats of shared memory; safe to call repeatedly.
__device__ __forceinline__ float block_sum(float v, float* red) {
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // red may still be read by a previous call
  if (lane == 0) red[wid] = v;
  __syncthreads();
  float s = lane < nw ? red[lane] : 0.0f;
  return warp_sum(s);
}

__device__ __forceinline__ float block_max(float v, float* red) {
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) red[wid] = v;
  __syncthreads();
  float s = lane < nw ? red[lane] : -INFINITY;
  return warp_max(s);
}

__device__ __forceinline__ float round_bf16(float x) {
  return __bfloat162float(__float2bfloat16(x));
}

}  // namespace sf::cuda
