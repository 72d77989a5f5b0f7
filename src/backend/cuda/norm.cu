// defines: sf::cuda::rmsnorm_forward (plain and fused with the residual add), rmsnorm_backward.
// Math of transformers' LlamaRMSNorm in bf16: h = bf16(x · rstd) with rstd = rsqrt(mean(x²) + eps)
// in fp32, out = bf16(w · h).
//
// Layout of the work: a row is split into packs (8 bf16 = one 16-byte access when the row length
// and the pointers allow, else 2 bf16), a "slot" of S threads owns one row at a time and each
// thread owns kV packs of it (strided by S, so a warp's access is contiguous). S <= 32 (a power of
// two): several slots per warp, the row sum is a shuffle inside the slot, no barrier. S > 32: one
// slot per block, the row sum crosses warps through shared memory.
// Forward: one row per slot, kV up to 4 (C = 4096: 128 threads a row, 4 loads in flight a
// thread, full occupancy: faster than a warp per row with 16 loads, which holds 104 registers).
// Backward: persistent blocks; each slot takes kRows rows per step (their loads all in
// flight before one reduction of kRows sums) and keeps its columns' dw partials in registers;
// at the end the slots of a block are added in slot order into one partial row per block, then a
// second kernel adds the block partials in block order: dw is deterministic.
#include <algorithm>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/kernels.h"

namespace sf::cuda {
namespace {

constexpr int kBlock = 256;       // threads of a block when slots are <= 32 threads
constexpr int kFwdMaxSlot = 256;  // threads of one forward slot at most (up to 255 registers)
constexpr int kBwdMaxSlot = 512;  // threads of one backward slot at most (up to 128 registers)
constexpr int kMaxC = 16384;      // widest row (Llama-3.1-405B; Mistral-Large-2's 12288)
constexpr int kMaxC2 = 8192;      // widest row of the 2-bf16 path (C % 8 != 0)
// Forward packs a thread at most. Measured on the H200, 2026-12-02, 16384 × 4096 (bench_kernels'
// variants): 16 (a warp per row, 104 registers) 0.118 ms plain / 0.173 fused; 8: 0.082 / 0.141;
// 4 (a row per 128 threads, full occupancy): 0.081 / 0.137; 2: 0.081 / 0.136.
constexpr int kFwdPacks = 4;
constexpr int kBwdPerSm = 4;  // backward blocks per multiprocessor at most (dw partial rows)
constexpr int kBwdRows = 4;   // rows a backward slot loads before one reduction (at most)
constexpr int kMaxSms = 160;  // for sizing the partial scratch before a device is asked

// One pack of N bf16 (N = 8: uint4, N = 2: one __nv_bfloat162).
template <int N>
struct Pack {
  __nv_bfloat162 h[N / 2];
};
template <int N>
__device__ __forceinline__ Pack<N> ld(const bf16* p) {
  if constexpr (N == 8) {
    const uint4 u = *reinterpret_cast<const uint4*>(p);
    return *reinterpret_cast<const Pack<8>*>(&u);
  } else {
    Pack<N> r;
    r.h[0] = *reinterpret_cast<const __nv_bfloat162*>(p);
    return r;
  }
}
template <int N>
__device__ __forceinline__ void st(bf16* p, const Pack<N>& v) {
  if constexpr (N == 8) {
    *reinterpret_cast<uint4*>(p) = *reinterpret_cast<const uint4*>(&v);
  } else {
    *reinterpret_cast<__nv_bfloat162*>(p) = v.h[0];
  }
}

// Sum over the S threads of a slot; every thread of the slot gets it. For S > 32 (one slot per
// block) `red` holds 2 × 32 × kR floats, used alternately so that one barrier per call suffices.
template <int kR>
__device__ __forceinline__ void slot_sum(float (&v)[kR], int S, float* red, int& parity) {
  const int width = S < 32 ? S : 32;
#pragma unroll
  for (int r = 0; r < kR; ++r)
    for (int o = width / 2; o > 0; o >>= 1) v[r] += __shfl_xor_sync(0xffffffffu, v[r], o);
  if (S <= 32) return;
  float* buf = red + parity * 32 * kR;
  parity ^= 1;
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = S >> 5;
  if (lane == 0) {
#pragma unroll
    for (int r = 0; r < kR; ++r) buf[r * 32 + wid] = v[r];
  }
  __syncthreads();  // the buffer of the previous call was read before this barrier by everyone
#pragma unroll
  for (int r = 0; r < kR; ++r) {
    float s = 0.0f;
    for (int k = 0; k < nw; ++k) s += buf[r * 32 + k];  // fixed order: deterministic
    v[r] = s;
  }
}

struct Geometry {
  int S, Y, kV;  // slot threads, slots per block, packs per thread
};

// ---------------------------------------------------------------- forward

template <int N, int kV>
__global__ void __launch_bounds__(kFwdMaxSlot)
    rmsnorm_fwd_kernel(bf16* __restrict__ sum, bf16* __restrict__ out, float* __restrict__ rstd,
                       const bf16* a, const bf16* b, const bf16* __restrict__ w, int64_t R, int C,
                       int S, float eps) {
  __shared__ float red[2 * 32];
  const int Y = blockDim.x / S, slot = threadIdx.x / S, t = threadIdx.x % S;
  const int64_t row = int64_t(blockIdx.x) * Y + slot;
  const int nvec = C / N;
  // S > 32 has one slot per block: every thread of it reaches the barrier in slot_sum.
  const bool live = row < R;
  const int64_t base = (live ? row : 0) * C;
  Pack<N> x[kV];
  float ss = 0.0f;
#pragma unroll
  for (int k = 0; k < kV; ++k) {
    const int p = t + k * S;
    if (live && p < nvec) {
      x[k] = ld<N>(a + base + int64_t(p) * N);
      if (b) {  // the residual sum is rounded to bf16 (it is stored so), then normalised
        const Pack<N> y = ld<N>(b + base + int64_t(p) * N);
#pragma unroll
        for (int j = 0; j < N / 2; ++j) {  // fp32 add, one rounding (as the CPU reference)
          const float2 fa = __bfloat1622float2(x[k].h[j]), fb = __bfloat1622float2(y.h[j]);
          x[k].h[j] = __floats2bfloat162_rn(fa.x + fb.x, fa.y + fb.y);
        }
        st<N>(sum + base + int64_t(p) * N, x[k]);
      }
#pragma unroll
      for (int j = 0; j < N / 2; ++j) {
        const float2 f = __bfloat1622float2(x[k].h[j]);
        ss += f.x * f.x + f.y * f.y;
      }
    }
  }
  float v[1] = {ss};
  int parity = 0;
  slot_sum<1>(v, S, red, parity);
  if (!live) return;
  const float r = rsqrtf(v[0] / float(C) + eps);
  if (t == 0) rstd[row] = r;
#pragma unroll
  for (int k = 0; k < kV; ++k) {
    const int p = t + k * S;
    if (p < nvec) {
      const Pack<N> wp = ld<N>(w + int64_t(p) * N);
      Pack<N> o;
#pragma unroll
      for (int j = 0; j < N / 2; ++j) {
        const float2 f = __bfloat1622float2(x[k].h[j]), wf = __bfloat1622float2(wp.h[j]);
        o.h[j] = __floats2bfloat162_rn(wf.x * round_bf16(f.x * r), wf.y * round_bf16(f.y * r));
      }
      st<N>(out + base + int64_t(p) * N, o);
    }
  }
}

// ---------------------------------------------------------------- backward
// dx_j = r·w_j·g_j − x_j·r³·mean_i(w_i·g_i·x_i);  dw_j += Σ_rows g_j·bf16(x_j·r)

template <int N, int kV>
__global__ void __launch_bounds__(kBwdMaxSlot)
    rmsnorm_bwd_kernel(bf16* dx, float* __restrict__ partial, const bf16* dout,
                       const bf16* __restrict__ x, const bf16* __restrict__ w,
                       const float* __restrict__ rstd, int64_t R, int C, int S, bool accumulate) {
  extern __shared__ float smem[];  // [2·32·kBwdRows] sums, then [Y][C] dw of each slot
  // rows in flight: 4, or 2 when a thread holds 16 bf16 of a row (keeps it under 128 registers)
  constexpr int kRows = N * kV >= 16 ? kBwdRows / 2 : kBwdRows;
  const int Y = blockDim.x / S, slot = threadIdx.x / S, t = threadIdx.x % S;
  const int nvec = C / N;
  Pack<N> wv[kV];  // w stays packed bf16 (registers are the limit here)
  float2 dw[kV][N / 2];
#pragma unroll
  for (int k = 0; k < kV; ++k) {
    const int p = t + k * S;
    if (p < nvec) wv[k] = ld<N>(w + int64_t(p) * N);
#pragma unroll
    for (int j = 0; j < N / 2; ++j) {
      if (p >= nvec) wv[k].h[j] = __floats2bfloat162_rn(0.0f, 0.0f);
      dw[k][j] = make_float2(0.0f, 0.0f);
    }
  }
  int parity = 0;
  const int64_t step = int64_t(gridDim.x) * Y * kRows;
  // Every slot of a block runs the same number of steps (S > 32: one slot): barriers line up.
  for (int64_t r0 = (int64_t(blockIdx.x) * Y + slot) * kRows; r0 - slot * kRows < R; r0 += step) {
    Pack<N> xv[kRows][kV], gv[kRows][kV];
    float rs[kRows], dot[kRows];
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const int64_t row = r0 + i;
      const bool live = row < R;
      rs[i] = live ? rstd[row] : 0.0f;
      dot[i] = 0.0f;
#pragma unroll
      for (int k = 0; k < kV; ++k) {
        const int p = t + k * S;
        if (live && p < nvec) {
          xv[i][k] = ld<N>(x + row * C + int64_t(p) * N);
          gv[i][k] = ld<N>(dout + row * C + int64_t(p) * N);
        }
      }
    }
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const bool live = r0 + i < R;
#pragma unroll
      for (int k = 0; k < kV; ++k) {
        const int p = t + k * S;
        if (live && p < nvec) {
#pragma unroll
          for (int j = 0; j < N / 2; ++j) {
            const float2 xf = __bfloat1622float2(xv[i][k].h[j]);
            const float2 gf = __bfloat1622float2(gv[i][k].h[j]);
            const float2 wf = __bfloat1622float2(wv[k].h[j]);
            dot[i] += wf.x * gf.x * xf.x + wf.y * gf.y * xf.y;
            dw[k][j].x += gf.x * round_bf16(xf.x * rs[i]);
            dw[k][j].y += gf.y * round_bf16(xf.y * rs[i]);
          }
        }
      }
    }
    slot_sum<kRows>(dot, S, smem, parity);
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const int64_t row = r0 + i;
      if (row >= R) continue;
      const float r = rs[i], kk = r * r * r * dot[i] / float(C);
#pragma unroll
      for (int k = 0; k < kV; ++k) {
        const int p = t + k * S;
        if (p >= nvec) continue;
        bf16* pd = dx + row * C + int64_t(p) * N;
        Pack<N> o;
        Pack<N> old;
        if (accumulate) old = ld<N>(pd);
#pragma unroll
        for (int j = 0; j < N / 2; ++j) {
          const float2 xf = __bfloat1622float2(xv[i][k].h[j]);
          const float2 gf = __bfloat1622float2(gv[i][k].h[j]);
          const float2 wf = __bfloat1622float2(wv[k].h[j]);
          float2 v = make_float2(r * wf.x * gf.x - xf.x * kk, r * wf.y * gf.y - xf.y * kk);
          if (accumulate) {
            const float2 of = __bfloat1622float2(old.h[j]);
            v.x += of.x;
            v.y += of.y;
          }
          o.h[j] = __floats2bfloat162_rn(v.x, v.y);
        }
        st<N>(pd, o);
      }
    }
  }
  // dw of the block: slot partials in slot order (Y == 1: straight out).
  float* prow = partial + int64_t(blockIdx.x) * C;
  if (Y == 1) {
#pragma unroll
    for (int k = 0; k < kV; ++k) {
      const int p = t + k * S;
      if (p < nvec)
#pragma unroll
        for (int j = 0; j < N / 2; ++j)
          reinterpret_cast<float2*>(prow + int64_t(p) * N)[j] = dw[k][j];
    }
    return;
  }
  float* sdw = smem + 2 * 32 * kBwdRows + slot * C;
#pragma unroll
  for (int k = 0; k < kV; ++k) {
    const int p = t + k * S;
    if (p < nvec)
#pragma unroll
      for (int j = 0; j < N / 2; ++j) reinterpret_cast<float2*>(sdw + p * N)[j] = dw[k][j];
  }
  __syncthreads();
  const float* s0 = smem + 2 * 32 * kBwdRows;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    float s = 0.0f;
    for (int y = 0; y < Y; ++y) s += s0[y * C + c];
    prow[c] = s;
  }
}

// dw[c] += Σ_b partial[b][c] in block order: 32 columns × 16 row-lanes a block, each lane sums a
// fixed subset of blocks in order, then the 16 lane sums are added in order.
__global__ void reduce_partial_kernel(float* dw, const float* partial, int nb, int64_t C) {
  __shared__ float part[16][33];
  const int64_t c = int64_t(blockIdx.x) * 32 + threadIdx.x;
  float s = 0.0f;
  if (c < C)
    for (int b = threadIdx.y; b < nb; b += 16) s += partial[int64_t(b) * C + c];
  part[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    float tot = 0.0f;
    for (int j = 0; j < 16; ++j) tot += part[j][threadIdx.x];
    dw[c] += tot;
  }
}

// Slot threads S and packs per thread kV for nvec packs a row: kV <= max_v unless the slot would
// exceed max_slot threads.
Geometry geometry(int nvec, int max_v, int max_slot) {
  int kV = 1;
  while (kV < max_v && (nvec + kV - 1) / kV > 32) kV *= 2;  // prefer one warp per row
  int S = (nvec + kV - 1) / kV;
  if (S <= 32) {
    int p = 1;
    while (p < S) p *= 2;
    S = p;
    return {S, kBlock / S, kV};
  }
  while (S > max_slot) {  // only for rows wider than max_slot·max_v packs
    kV *= 2;
    S = (nvec + kV - 1) / kV;
  }
  return {(S + 31) / 32 * 32, 1, kV};
}

template <int N>
void launch_fwd(const Geometry& g, unsigned grid, cudaStream_t st, bf16* sum, bf16* out,
                float* rstd, const bf16* a, const bf16* b, const bf16* w, int64_t R, int C,
                float eps) {
  const unsigned threads = unsigned(g.S * g.Y);
#define SF_FWD(V)                                                                                \
  case V:                                                                                        \
    rmsnorm_fwd_kernel<N, V><<<grid, threads, 0, st>>>(sum, out, rstd, a, b, w, R, C, g.S, eps); \
    break
  switch (g.kV) {
    SF_FWD(1);
    SF_FWD(2);
    SF_FWD(4);
    SF_FWD(8);
    SF_FWD(16);
    default:
      SF_FAIL("rmsnorm_forward: no kernel for ", g.kV, " packs a thread");
  }
#undef SF_FWD
}

int sm_count() {
  static const int n = [] {
    int dev = 0, v = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
      cudaGetLastError();
      return 132;
    }
    return std::min(v, kMaxSms);
  }();
  return n;
}

// Launches with as many persistent blocks as fit on the device at once (at most `max_blocks`,
// the rows of the dw partial scratch); returns the number of blocks (partial rows written).
template <int N, int kV>
int launch_bwd_v(const Geometry& g, int64_t R, int64_t max_blocks, size_t smem, cudaStream_t st,
                 bf16* dx, float* partial, const bf16* dout, const bf16* x, const bf16* w,
                 const float* rstd, int C, bool acc) {
  const int threads = g.S * g.Y;
  int per_sm = 0;
  SF_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, rmsnorm_bwd_kernel<N, kV>,
                                                              threads, smem),
                "rmsnorm_backward occupancy");
  const int64_t rows_per_block = int64_t(g.Y) * (N * kV >= 16 ? kBwdRows / 2 : kBwdRows);
  const int nb = int(std::min<int64_t>({(R + rows_per_block - 1) / rows_per_block,
                                        int64_t(sm_count()) * std::max(per_sm, 1), max_blocks}));
  SF_CHECK(nb > 0, "rmsnorm_backward: no dw partial scratch (", max_blocks, " rows)");
  rmsnorm_bwd_kernel<N, kV><<<unsigned(nb), unsigned(threads), smem, st>>>(dx, partial, dout, x, w,
                                                                           rstd, R, C, g.S, acc);
  return nb;
}

template <int N>
int launch_bwd(const Geometry& g, int64_t R, int64_t max_blocks, size_t smem, cudaStream_t st,
               bf16* dx, float* partial, const bf16* dout, const bf16* x, const bf16* w,
               const float* rstd, int C, bool acc) {
  // packs a thread: 16-byte packs hold 8 bf16, so 2 of them already cost 16 dw registers
  switch (g.kV) {
    case 1:
      return launch_bwd_v<N, 1>(g, R, max_blocks, smem, st, dx, partial, dout, x, w, rstd, C, acc);
    case 2:
      return launch_bwd_v<N, 2>(g, R, max_blocks, smem, st, dx, partial, dout, x, w, rstd, C, acc);
    default:
      if constexpr (N == 8) {  // rows wider than 8192 (512 threads × 2 packs of 8)
        if (g.kV == 4)
          return launch_bwd_v<8, 4>(g, R, max_blocks, smem, st, dx, partial, dout, x, w, rstd, C,
                                    acc);
      }
      if constexpr (N == 2) {
        if (g.kV == 4)
          return launch_bwd_v<2, 4>(g, R, max_blocks, smem, st, dx, partial, dout, x, w, rstd, C,
                                    acc);
        if (g.kV == 8)
          return launch_bwd_v<2, 8>(g, R, max_blocks, smem, st, dx, partial, dout, x, w, rstd, C,
                                    acc);
      }
      SF_FAIL("rmsnorm_backward: no kernel for ", g.kV, " packs of ", N, " a thread");
  }
}

bool vec8(int64_t C, std::initializer_list<const void*> ps) {
  if (C % 8 != 0) return false;
  for (const void* p : ps)
    if (p && reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  return true;
}

void check_shapes(const char* op, const Tensor& out, const Tensor& rstd, const Tensor& x,
                  const Tensor& w) {
  check_dtype(op, "out", out, DType::kBF16);
  check_dtype(op, "x", x, DType::kBF16);
  check_dtype(op, "w", w, DType::kBF16);
  check_dtype(op, "rstd", rstd, DType::kF32);
  const int64_t C = x.cols();
  SF_CHECK(
      out.numel() == x.numel() && out.cols() == C && w.numel() == C && rstd.numel() == x.rows(), op,
      ": shapes do not match out[R,C], rstd[R], x[R,C], w[C]: out ", out.shape_str(), ", rstd ",
      rstd.shape_str(), ", x ", x.shape_str(), ", w ", w.shape_str());
  SF_CHECK(C % 2 == 0 && C <= kMaxC && (C <= kMaxC2 || C % 8 == 0), op,
           ": the CUDA RMSNorm needs an even row length of at most ", kMaxC2, ", or a multiple of 8 ",
           "up to ", kMaxC, "; got x ", x.shape_str());
}

}  // namespace

int64_t rmsnorm_partial_rows() { return int64_t(kMaxSms) * kBwdPerSm; }

void rmsnorm_forward(Tensor sum, Tensor out, Tensor rstd, Tensor a, Tensor b, Tensor w, float eps,
                     cudaStream_t stream, int max_packs) {
  const char* op = sum.empty() ? "rmsnorm_forward" : "add_rmsnorm_forward";
  check_shapes(op, out, rstd, a, w);
  if (!sum.empty()) {
    check_dtype(op, "sum", sum, DType::kBF16);
    check_dtype(op, "b", b, DType::kBF16);
    SF_CHECK(sum.numel() == a.numel() && b.numel() == a.numel(), op, ": sum ", sum.shape_str(),
             ", a ", a.shape_str(), ", b ", b.shape_str(), " must have the same shape");
  }
  const int64_t R = a.rows(), C = a.cols();
  if (R == 0) return;
  bf16* ps = sum.empty() ? nullptr : sum.as<bf16>();
  const bf16* pb = sum.empty() ? nullptr : b.as<bf16>();
  const bool v8 = vec8(C, {ps, pb, out.data, a.data, w.data});
  SF_CHECK(max_packs == 0 || max_packs == 1 || max_packs == 2 || max_packs == 4 || max_packs == 8 ||
               max_packs == 16,
           op, ": packs a thread must be 0 (default), 1, 2, 4, 8 or 16, got ", max_packs);
  const Geometry g =
      geometry(int(v8 ? C / 8 : C / 2), max_packs ? max_packs : kFwdPacks, kFwdMaxSlot);
  const unsigned grid = unsigned((R + g.Y - 1) / g.Y);
  if (v8)
    launch_fwd<8>(g, grid, stream, ps, out.as<bf16>(), rstd.f32(), a.as<bf16>(), pb, w.as<bf16>(),
                  R, int(C), eps);
  else
    launch_fwd<2>(g, grid, stream, ps, out.as<bf16>(), rstd.f32(), a.as<bf16>(), pb, w.as<bf16>(),
                  R, int(C), eps);
  SF_LAUNCH_CHECK(op, " x ", a.shape_str());
}

void rmsnorm_backward(Tensor dx, Tensor dw, Tensor dout, Tensor x, Tensor w, Tensor rstd,
                      bool accumulate_dx, float* partial, int64_t partial_rows, cudaStream_t stream,
                      int max_packs) {
  const char* op = "rmsnorm_backward";
  check_shapes(op, dout, rstd, x, w);
  check_dtype(op, "dx", dx, DType::kBF16);
  check_dtype(op, "dw", dw, DType::kF32);
  SF_CHECK(dx.numel() == x.numel() && dw.numel() == w.numel(), op, ": dx ", dx.shape_str(),
           " / dw ", dw.shape_str(), " must match x ", x.shape_str(), " / w ", w.shape_str());
  const int64_t R = x.rows(), C = x.cols();
  if (R == 0) return;
  const bool v8 = vec8(C, {dx.data, dout.data, x.data, w.data});
  // At most 2 packs a thread (the dw partials live in registers): at C = 4096 a slot of 256
  // threads per row, 4 rows in flight; at C = 128 (q/k norms) 16 slots of 16 threads a block.
  SF_CHECK(max_packs == 0 || max_packs == 1 || max_packs == 2, op,
           ": packs a thread must be 0 (default), 1 or 2, got ", max_packs);
  const Geometry g = geometry(int(v8 ? C / 8 : C / 2), max_packs ? max_packs : 2, kBwdMaxSlot);
  const size_t smem = sizeof(float) * (2 * 32 * kBwdRows + (g.Y > 1 ? size_t(g.Y) * C : 0));
  const int64_t max_blocks = std::min<int64_t>(partial_rows, int64_t(sm_count()) * kBwdPerSm);
  const int nb =
      v8 ? launch_bwd<8>(g, R, max_blocks, smem, stream, dx.as<bf16>(), partial, dout.as<bf16>(),
                         x.as<bf16>(), w.as<bf16>(), rstd.f32(), int(C), accumulate_dx)
         : launch_bwd<2>(g, R, max_blocks, smem, stream, dx.as<bf16>(), partial, dout.as<bf16>(),
                         x.as<bf16>(), w.as<bf16>(), rstd.f32(), int(C), accumulate_dx);
  SF_LAUNCH_CHECK(op, " x ", x.shape_str());
  reduce_partial_kernel<<<unsigned((C + 31) / 32), dim3(32, 16), 0, stream>>>(dw.f32(), partial, nb,
                                                                              C);
  SF_LAUNCH_CHECK(op, " dw ", dw.shape_str());
}

}  // namespace sf::cuda
