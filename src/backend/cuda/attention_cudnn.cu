// defines: sf::cuda::cudnn_ragged_metadata, sf::cuda::cudnn_stats_layout — the small device
// helpers of the cuDNN attention path (attention_cudnn.cpp builds and runs the graphs): per-sample
// lengths and ragged offsets from cu_seqlens, and the stats layout change of the dense graphs.
#include <algorithm>
#include <climits>

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

// lse [B, S, NH] (ours, token-major) <-> [B, NH, S] (the dense graphs' stats) is a transpose of
// each sample's matrix, one way or the other: src [B, R, K] -> dst [B, K, R] through a 32×32
// shared-memory tile, so that both the reads and the writes are coalesced. Block x = one tile of
// one sample's matrix (row tiles × column tiles, flattened: no grid-dimension limit on R or K),
// block y = samples.
constexpr int kTile = 32, kTileRows = 8;

__global__ void transpose_kernel(const float* __restrict__ src, float* __restrict__ dst, int64_t B,
                                 int64_t R, int64_t K, int64_t tiles_k) {
  __shared__ float tile[kTile][kTile + 1];  // +1: no bank conflicts when read by column
  const int64_t r0 = int64_t(blockIdx.x) / tiles_k * kTile,
                k0 = int64_t(blockIdx.x) % tiles_k * kTile;
  const int tx = threadIdx.x;
  for (int64_t b = blockIdx.y; b < B; b += gridDim.y) {
    const int64_t base = b * R * K;
    for (int i = threadIdx.y; i < kTile; i += kTileRows)  // read rows r0 + i along k
      if (r0 + i < R && k0 + tx < K) tile[i][tx] = src[base + (r0 + i) * K + k0 + tx];
    __syncthreads();
    for (int i = threadIdx.y; i < kTile; i += kTileRows)  // write rows k0 + i along r
      if (k0 + i < K && r0 + tx < R) dst[base + (k0 + i) * R + r0 + tx] = tile[tx][i];
    __syncthreads();  // the tile is reused by the next sample
  }
}

}  // namespace

void cudnn_stats_layout(const float* src, float* dst, int64_t B, int64_t NH, int64_t S, bool to_bhs,
                        cudaStream_t stream) {
  const int64_t R = to_bhs ? S : NH, K = to_bhs ? NH : S;  // src [B, R, K]
  const int64_t tiles_k = (K + kTile - 1) / kTile, tiles = (R + kTile - 1) / kTile * tiles_k;
  SF_CHECK(tiles <= INT32_MAX, "cudnn_stats_layout: NH ", NH, " S ", S, " exceeds the launch grid");
  const dim3 grid(unsigned(tiles), unsigned(std::min<int64_t>(B, 65535)));
  transpose_kernel<<<grid, dim3(kTile, kTileRows), 0, stream>>>(src, dst, B, R, K, tiles_k);
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
