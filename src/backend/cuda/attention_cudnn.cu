// defines: sf::cuda::cudnn_ragged_metadata, sf::cuda::cudnn_stats_layout — the small device
// helpers of the cuDNN attention path (attention_cudnn.cpp builds and runs the graphs): per-sample
// lengths and ragged offsets from cu_seqlens, and the stats layout change of the dense graphs.
#include <algorithm>

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

// lse [B, S, NH] (ours, token-major) <-> [B, NH, S] (the dense graphs' stats): a transpose of
// each sample's [S, NH] matrix through a shared-memory tile, so both the reads and the writes are
// coalesced (the element-wise version strided one side by S or NH floats).
constexpr int kStatsTile = 32, kStatsRows = 8;

__global__ void stats_layout_kernel(const float* __restrict__ src, float* __restrict__ dst,
                                    int64_t B, int64_t NH, int64_t S, bool to_bhs) {
  __shared__ float tile[kStatsTile][kStatsTile + 1];  // [s][h]; +1: no bank conflicts by column
  const int64_t s0 = int64_t(blockIdx.x) * kStatsTile, h0 = int64_t(blockIdx.y) * kStatsTile;
  const int tx = threadIdx.x;
  for (int64_t b = blockIdx.z; b < B; b += gridDim.z) {
    const int64_t base = b * NH * S;
    for (int r = threadIdx.y; r < kStatsTile; r += kStatsRows) {
      if (to_bhs) {  // read [S, NH] along h
        const int64_t s = s0 + r, h = h0 + tx;
        if (s < S && h < NH) tile[r][tx] = src[base + s * NH + h];
      } else {  // read [NH, S] along s
        const int64_t h = h0 + r, s = s0 + tx;
        if (s < S && h < NH) tile[tx][r] = src[base + h * S + s];
      }
    }
    __syncthreads();
    for (int r = threadIdx.y; r < kStatsTile; r += kStatsRows) {
      if (to_bhs) {  // write [NH, S] along s
        const int64_t h = h0 + r, s = s0 + tx;
        if (s < S && h < NH) dst[base + h * S + s] = tile[tx][r];
      } else {  // write [S, NH] along h
        const int64_t s = s0 + r, h = h0 + tx;
        if (s < S && h < NH) dst[base + s * NH + h] = tile[r][tx];
      }
    }
    __syncthreads();  // the tile is reused by the next sample
  }
}

}  // namespace

void cudnn_stats_layout(const float* src, float* dst, int64_t B, int64_t NH, int64_t S, bool to_bhs,
                        cudaStream_t stream) {
  const dim3 block(kStatsTile, kStatsRows);
  const dim3 grid(unsigned((S + kStatsTile - 1) / kStatsTile),
                  unsigned((NH + kStatsTile - 1) / kStatsTile),
                  unsigned(std::min<int64_t>(B, 65535)));
  stats_layout_kernel<<<grid, block, 0, stream>>>(src, dst, B, NH, S, to_bhs);
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
