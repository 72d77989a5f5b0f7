// defines: sf::cuda::cudnn_ragged_metadata, sf::cuda::cudnn_stats_layout — the small device
// helpers of the cuDNN attention path (attention_cudnn.cpp builds and runs the graphs): per-sample
// lengths and ragged offsets from cu_seqlens, and the stats layout change of the dense graphs.
#include "backend/cuda/attention_cudnn.h"
#include "backend/cuda/cuda_common.cuh"

namespace sf::cuda {
namespace {

__global__ void ragged_metadata_kernel(const int32_t* __restrict__ cu, int nseq, int B,
                                       int64_t q_unit, int64_t kv_unit, int64_t st_unit,
                                       int32_t* seq, int32_t* off_q, int32_t* off_kv,
                                       int32_t* off_st) {
  const int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b > B) return;
  const int64_t start = cu[b < nseq ? b : nseq];
  off_q[b] = int32_t(start * q_unit);
  off_kv[b] = int32_t(start * kv_unit);
  off_st[b] = int32_t(start * st_unit);
  if (b < B) seq[b] = b < nseq ? cu[b + 1] - cu[b] : 0;
}

__global__ void stats_layout_kernel(const float* __restrict__ src, float* __restrict__ dst,
                                    int64_t B, int64_t NH, int64_t S, bool to_bhs) {
  const int64_t n = B * NH * S;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    // i indexes lse [B·S, NH] (row-major): coalesced on that side
    const int64_t h = i % NH, t = i / NH, b = t / S, s = t % S;
    const int64_t j = (b * NH + h) * S + s;
    if (to_bhs) {
      dst[j] = src[i];
    } else {
      dst[i] = src[j];
    }
  }
}

}  // namespace

void cudnn_stats_layout(const float* src, float* dst, int64_t B, int64_t NH, int64_t S, bool to_bhs,
                        cudaStream_t stream) {
  const int threads = 256;
  stats_layout_kernel<<<grid_for(B * NH * S, threads, 4096), threads, 0, stream>>>(src, dst, B, NH,
                                                                                   S, to_bhs);
  SF_LAUNCH_CHECK("cudnn_stats_layout B ", B, " NH ", NH, " S ", S);
}

void cudnn_ragged_metadata(const int32_t* cu, int nseq, int B, int64_t q_unit, int64_t kv_unit,
                           int64_t st_unit, int32_t* seq, int32_t* off_q, int32_t* off_kv,
                           int32_t* off_st, cudaStream_t stream) {
  const int threads = 128;
  ragged_metadata_kernel<<<(B + 1 + threads - 1) / threads, threads, 0, stream>>>(
      cu, nseq, B, q_unit, kv_unit, st_unit, seq, off_q, off_kv, off_st);
  SF_LAUNCH_CHECK("cudnn_ragged_metadata nseq ", nseq, " B ", B);
}

}  // namespace sf::cuda
