// defines: sf::cuda::ce_rows, ce_accumulate — the softmax/cross-entropy step of the fused head
// (linear_cross_entropy in cuda_backend.cu runs the GEMMs around it). One block per logits row:
// pass 1 reads the F32 row once (online max and sum of exp), pass 2 reads it again and writes
// BF16 dlogits in place over the first half of the row's bytes, one strip at a time with a
// barrier between a strip's reads and its writes: the writes of strip s land on floats already
// read (those below the end of strip s), so no thread overwrites a float another still needs.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/kernels.h"

namespace sf::cuda {
namespace {

constexpr int kThreads = 512;
constexpr int kUnroll = 4;

__global__ void __launch_bounds__(kThreads) ce_rows_kernel(float* logits, int64_t V,
                                                           const int32_t* __restrict__ targets,
                                                           float grad_scale,
                                                           float* __restrict__ loss_rows) {
  __shared__ float red[32];
  const int64_t row = blockIdx.x;
  float* x = logits + row * V;
  bf16* d = reinterpret_cast<bf16*>(x);
  const int32_t target = targets[row];
  const bool valid = target >= 0 && target < V;  // -100 (or anything outside) is ignored

  float m = -INFINITY, s = 0.0f;
  for (int64_t i = threadIdx.x; i < V; i += kThreads) {
    const float v = x[i];
    if (v > m) {
      s = s * __expf(m - v) + 1.0f;
      m = v;
    } else {
      s += __expf(v - m);
    }
  }
  const float M = block_max(m, red);
  s = m == -INFINITY ? 0.0f : s * __expf(m - M);
  const float sum = block_sum(s, red);
  const float lse = M + logf(sum);
  const float xt = valid ? x[target] : 0.0f;
  if (threadIdx.x == 0) loss_rows[row] = valid ? lse - xt : 0.0f;
  __syncthreads();  // every read of x[target] is done before pass 2 overwrites the row

  constexpr int64_t kStrip = int64_t(kThreads) * kUnroll;
  for (int64_t base = 0; base < V; base += kStrip) {
    float v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + u * kThreads + threadIdx.x;
      v[u] = i < V ? x[i] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + u * kThreads + threadIdx.x;
      if (i < V) {
        const float p = __expf(v[u] - lse);
        d[i] = __float2bfloat16(valid ? grad_scale * (p - (i == target ? 1.0f : 0.0f)) : 0.0f);
      }
    }
    __syncthreads();
  }
}

__global__ void ce_accumulate_kernel(float* loss_sum, const float* loss_rows, int64_t rows) {
  __shared__ float red[32];
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < rows; i += blockDim.x) s += loss_rows[i];
  s = block_sum(s, red);
  if (threadIdx.x == 0) loss_sum[0] += s;
}

}  // namespace

void ce_rows(float* logits, int64_t rows, int64_t V, const int32_t* targets, float grad_scale,
             float* loss_rows, cudaStream_t stream) {
  if (rows == 0) return;
  ce_rows_kernel<<<unsigned(rows), kThreads, 0, stream>>>(logits, V, targets, grad_scale,
                                                          loss_rows);
  SF_LAUNCH_CHECK("linear_cross_entropy (softmax rows) rows ", rows, " V ", V);
}

void ce_accumulate(float* loss_sum, const float* loss_rows, int64_t rows, cudaStream_t stream) {
  if (rows == 0) return;
  ce_accumulate_kernel<<<1, 256, 0, stream>>>(loss_sum, loss_rows, rows);
  SF_LAUNCH_CHECK("linear_cross_entropy (loss sum) rows ", rows);
}

}  // namespace sf::cuda
