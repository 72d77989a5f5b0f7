// defines: the warp-level tensor-core helpers of the attention kernels: mma.sync m16n8k16
// (bf16 in, fp32 accumulate), ldmatrix loads of A/B fragments from padded shared-memory tiles,
// and the tile loader. Fragment layouts are the PTX ISA's: for a thread with g = lane/4,
// t = lane%4, an accumulator tile c[4] holds (row g, cols 2t, 2t+1) and (row g+8, same cols).
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_common.cuh"

namespace sf::cuda::attn {

__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const bf16* p) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

__device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], const bf16* p) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

// A fragment (16×16) of a row-major [m][k] tile: rows m0.., cols k0...
__device__ __forceinline__ const bf16* a_addr(const bf16* base, int S, int m0, int k0, int lane) {
  return base + (m0 + (lane & 15)) * S + k0 + (lane >> 4) * 8;
}
// B fragments of two n-tiles (n0, n0+8) × k16 from a tile stored [n][k] (no transpose):
// registers {0,1} for n-tile n0, {2,3} for n0+8.
__device__ __forceinline__ const bf16* b_addr(const bf16* base, int S, int n0, int k0, int lane) {
  return base + (n0 + (lane & 7) + ((lane >> 4) << 3)) * S + k0 + ((lane >> 3) & 1) * 8;
}
// The same from a tile stored [k][n] (ldmatrix .trans).
__device__ __forceinline__ const bf16* bt_addr(const bf16* base, int S, int n0, int k0, int lane) {
  return base + (k0 + (lane & 7) + (((lane >> 3) & 1) << 3)) * S + n0 + (lane >> 4) * 8;
}

// Accumulators of two adjacent n-tiles (16 columns) as the A fragment of the next product.
__device__ __forceinline__ void acc_to_a(uint32_t (&a)[4], const float (&c0)[4],
                                         const float (&c1)[4]) {
  a[0] = pack_bf16(c0[0], c0[1]);
  a[1] = pack_bf16(c0[2], c0[3]);
  a[2] = pack_bf16(c1[0], c1[1]);
  a[3] = pack_bf16(c1[2], c1[3]);
}

// rows [row0, row0+ROWS) of head `head` of x[T, heads, D] into smem[ROWS][S]; rows >= T are zero.
template <int ROWS, int D, int S, int THREADS>
__device__ __forceinline__ void load_tile(bf16* smem, const bf16* __restrict__ x, int64_t row0,
                                          int64_t T, int heads, int head) {
  constexpr int kVec = D / 8;
  for (int i = threadIdx.x; i < ROWS * kVec; i += THREADS) {
    const int r = i / kVec, c = (i % kVec) * 8;
    const int64_t t = row0 + r;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (t < T) v = *reinterpret_cast<const uint4*>(x + (t * heads + head) * D + c);
    *reinterpret_cast<uint4*>(smem + r * S + c) = v;
  }
}

// The sample of token t (t < T): the largest i with cu[i] <= t; [cu[i], cu[i+1]) holds t.
__device__ __forceinline__ int seq_index(const int32_t* cu, int nseq, int64_t t) {
  int lo = 0, hi = nseq;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (cu[mid] <= t) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

}  // namespace sf::cuda::attn
