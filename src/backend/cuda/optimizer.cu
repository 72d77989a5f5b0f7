// defines: sf::cuda::adamw, sf::cuda::sum_squares — the optimizer of the plan's GPU-resident share
// (sum_squares also forms a held host unit's Σ g² from its bf16 gradient before the D2H).
//
// adamw runs adamw_step_reference's arithmetic element by element (optim/adamw.h): the same
// scalars (formed on the host by adamw_consts), the same IEEE operations in the same order, each
// written as an explicitly rounded intrinsic so nvcc cannot contract a*b+c into an FMA where the
// reference has two roundings (the one FMA is torch's lerp, written as __fmaf_rn). sqrt and
// division are the correctly rounded ones. So the device update is bit-identical with the CPU's.
// The gradient is fp32 or bf16 (a clipped unit's kept one), widened exactly as adamw_step does.
// Memory-bound: 16 B read (14 from a bf16 gradient) + 12 B written per element (+2 for the bf16
// copy), float4 accesses.
// It also counts the master weights it leaves non-finite (adamw_step's count): per thread as it
// writes them, reduced over the block, one atomicAdd per block with any — nothing per element.
#include <algorithm>
#include <cstdint>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/kernels.h"

namespace sf::cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ void adamw_element(float& p, float& m, float& v, float g_raw,
                                              const AdamWConsts& k) {
  const float g = __fmul_rn(g_raw, k.scale);
  p = __fmul_rn(p, k.decay);
  const float d = __fsub_rn(g, m);
  m = k.w_small ? __fmaf_rn(k.w, d, m) : __fmaf_rn(__fsub_rn(k.w, 1.0f), d, g);
  v = __fadd_rn(__fmul_rn(v, k.beta2), __fmul_rn(__fmul_rn(k.c2, g), g));
  const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), k.bc2_sqrt), k.eps);
  p = __fadd_rn(p, __fdiv_rn(__fmul_rn(k.neg_step, m), denom));
}

// The block's total of one int per thread (warp shuffles, then one partial per warp).
__device__ int block_count(int x) {
  static_assert(kThreads % 32 == 0 && kThreads / 32 <= 32, "one warp reduces the warps' partials");
  __shared__ int warp_total[kThreads / 32];
  for (int o = 16; o > 0; o >>= 1) x += __shfl_down_sync(0xffffffffu, x, o);
  if (threadIdx.x % 32 == 0) warp_total[threadIdx.x / 32] = x;
  __syncthreads();
  x = threadIdx.x < kThreads / 32 ? warp_total[threadIdx.x] : 0;
  if (threadIdx.x < 32)
    for (int o = 16; o > 0; o >>= 1) x += __shfl_down_sync(0xffffffffu, x, o);
  return x;  // valid in thread 0
}

__device__ __forceinline__ int nonfinite(float x) { return isfinite(x) ? 0 : 1; }

// Elements 4i..4i+3 of the gradient, widened to float (exactly, from bf16), read once.
__device__ __forceinline__ float4 load4(const float* g, int64_t i) {
  return __ldcs(reinterpret_cast<const float4*>(g) + i);
}
__device__ __forceinline__ float4 load4(const bf16* g, int64_t i) {
  const uint2 raw = __ldcs(reinterpret_cast<const uint2*>(g) + i);
  const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.x));
  const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.y));
  return make_float4(a.x, a.y, b.x, b.y);
}

// Launched with kThreads threads per block (block_count). G: float or bf16, the gradient.
template <bool kVec, typename G>
__global__ void adamw_kernel(float* __restrict__ p, float* __restrict__ m, float* __restrict__ v,
                             const G* __restrict__ g, bf16* __restrict__ w, int64_t n,
                             AdamWConsts k, unsigned long long* __restrict__ bad_total) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  int bad = 0;  // this thread's: ≤ 4 · ⌈n / (4 · grid · kThreads)⌉, far from int's range
  if constexpr (kVec) {
    for (; i < n / 4; i += stride) {
      float4 pv = reinterpret_cast<float4*>(p)[i], mv = reinterpret_cast<float4*>(m)[i];
      float4 vv = reinterpret_cast<float4*>(v)[i];
      const float4 gv = load4(g, i);
      adamw_element(pv.x, mv.x, vv.x, gv.x, k);
      adamw_element(pv.y, mv.y, vv.y, gv.y, k);
      adamw_element(pv.z, mv.z, vv.z, gv.z, k);
      adamw_element(pv.w, mv.w, vv.w, gv.w, k);
      reinterpret_cast<float4*>(p)[i] = pv;
      bad += nonfinite(pv.x) + nonfinite(pv.y) + nonfinite(pv.z) + nonfinite(pv.w);
      reinterpret_cast<float4*>(m)[i] = mv;
      reinterpret_cast<float4*>(v)[i] = vv;
      if (w) {
        __nv_bfloat162 h[2] = {__floats2bfloat162_rn(pv.x, pv.y), __floats2bfloat162_rn(pv.z, pv.w)};
        reinterpret_cast<uint2*>(w)[i] = *reinterpret_cast<uint2*>(h);
      }
    }
  } else {
    for (; i < n; i += stride) {
      adamw_element(p[i], m[i], v[i], float(g[i]), k);
      bad += nonfinite(p[i]);
      if (w) w[i] = __float2bfloat16(p[i]);
    }
  }
  if (bad_total) {  // the same for the whole block: every thread reaches block_count
    const int total = block_count(bad);
    if (threadIdx.x == 0 && total > 0) atomicAdd(bad_total, (unsigned long long)(total));
  }
}

// Pass 1: block b sums the squares of the elements i ≡ b (mod grid) thread-strided, in double,
// then reduces its threads in a fixed tree; pass 2 (one block) reduces the partials the same way.
// Fixed grid, fixed order: the same bits every run.
__device__ double block_sum(double x) {
  __shared__ double s[kThreads];
  s[threadIdx.x] = x;
  __syncthreads();
  for (int h = kThreads / 2; h > 0; h /= 2) {
    if (int(threadIdx.x) < h) s[threadIdx.x] += s[threadIdx.x + h];
    __syncthreads();
  }
  return s[0];
}

template <typename T>
__global__ void sum_squares_kernel(double* __restrict__ partials, const T* __restrict__ x,
                                   int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  double acc = 0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const double e = double(float(x[i]));
    acc += e * e;
  }
  const double b = block_sum(acc);
  if (threadIdx.x == 0) partials[blockIdx.x] = b;
}

__global__ void sum_partials_kernel(double* __restrict__ out, const double* __restrict__ partials,
                                    int count) {
  double acc = 0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) acc += partials[i];
  const double b = block_sum(acc);
  if (threadIdx.x == 0) *out = b;
}

}  // namespace

void adamw(Tensor p, Tensor m, Tensor v, Tensor g, Tensor w, const AdamWConsts& k,
           int64_t* nonfinite, cudaStream_t stream) {
  static_assert(sizeof(int64_t) == sizeof(unsigned long long), "atomicAdd's 64-bit type");
  const char* op = "adamw";
  for (auto [name, t] : {std::pair{"p", &p}, {"m", &m}, {"v", &v}})
    check_dtype(op, name, *t, DType::kF32);
  SF_CHECK(g.dtype == DType::kF32 || g.dtype == DType::kBF16, op, ": g must be F32 or BF16, not ",
           dtype_name(g.dtype));
  const int64_t n = p.numel();
  SF_CHECK(m.numel() == n && v.numel() == n && g.numel() == n, op, ": m ", m.shape_str(), ", v ",
           v.shape_str(), ", g ", g.shape_str(), " must have the ", n, " elements of p");
  if (!w.empty()) {
    check_dtype(op, "weights", w, DType::kBF16);
    SF_CHECK(w.numel() == n, op, ": weights ", w.shape_str(), " must have ", n, " elements");
  }
  if (nonfinite)  // the kernel adds each block's count to it
    SF_CUDA_CHECK(cudaMemsetAsync(nonfinite, 0, sizeof(int64_t), stream), op, " (count)");
  if (n == 0) return;
  bf16* wp = w.empty() ? nullptr : static_cast<bf16*>(w.data);
  auto aligned = [](const void* q, int a) { return reinterpret_cast<uintptr_t>(q) % a == 0; };
  const bool vec = n % 4 == 0 && aligned(p.data, 16) && aligned(m.data, 16) &&
                   aligned(v.data, 16) && aligned(g.data, g.dtype == DType::kF32 ? 16 : 8) &&
                   (!wp || aligned(wp, 8));
  const int64_t work = vec ? n / 4 : n;
  const int blocks = int(std::min<int64_t>((work + kThreads - 1) / kThreads, 132 * 16));
  auto* bad = reinterpret_cast<unsigned long long*>(nonfinite);
  auto launch = [&](auto* gp) {
    if (vec)
      adamw_kernel<true>
          <<<blocks, kThreads, 0, stream>>>(p.f32(), m.f32(), v.f32(), gp, wp, n, k, bad);
    else
      adamw_kernel<false>
          <<<blocks, kThreads, 0, stream>>>(p.f32(), m.f32(), v.f32(), gp, wp, n, k, bad);
  };
  if (g.dtype == DType::kF32)
    launch(g.f32());
  else
    launch(static_cast<const bf16*>(g.data));
  SF_LAUNCH_CHECK(op, " of ", n, " elements");
}

void sum_squares(double* out, double* partials, int partial_count, Tensor x, cudaStream_t stream) {
  SF_CHECK(x.dtype == DType::kF32 || x.dtype == DType::kBF16,
           "sum_squares: x must be F32 or BF16, not ", dtype_name(x.dtype));
  if (x.dtype == DType::kF32)
    sum_squares_kernel<<<partial_count, kThreads, 0, stream>>>(partials, x.f32(), x.numel());
  else
    sum_squares_kernel<<<partial_count, kThreads, 0, stream>>>(
        partials, static_cast<const bf16*>(x.data), x.numel());
  SF_LAUNCH_CHECK("sum_squares of ", x.numel(), " elements");
  sum_partials_kernel<<<1, kThreads, 0, stream>>>(out, partials, partial_count);
  SF_LAUNCH_CHECK("sum_squares (partials)");
}

}  // namespace sf::cuda
