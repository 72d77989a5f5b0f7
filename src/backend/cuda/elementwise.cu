// defines: sf::cuda::convert, add, swiglu_forward/backward, rope, bias_grad (the embedding kernels
// are in embedding.cu). Memory-bound kernels: 16-byte accesses (8 bf16) where the pointers and
// sizes allow, a scalar path otherwise; fp32 math, one rounding to bf16 per stored value.
#include <algorithm>
#include <cstdint>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/kernels.h"

namespace sf::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kPack = 8;  // bf16 per 16-byte access

struct Pack8 {
  float v[kPack];
};

__device__ __forceinline__ Pack8 load8(const bf16* p) {
  uint4 u = *reinterpret_cast<const uint4*>(p);
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
  Pack8 r;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 f = __bfloat1622float2(h[i]);
    r.v[2 * i] = f.x;
    r.v[2 * i + 1] = f.y;
  }
  return r;
}

__device__ __forceinline__ void store8(bf16* p, const Pack8& r) {
  uint4 u;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&u);
#pragma unroll
  for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(r.v[2 * i], r.v[2 * i + 1]);
  *reinterpret_cast<uint4*>(p) = u;
}

// ---- convert ----
__global__ void f32_to_bf16_kernel(bf16* __restrict__ d, const float* __restrict__ s, int64_t n,
                                   bool vec) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (vec) {
    for (; i < n / kPack; i += stride) {
      const float4 a = reinterpret_cast<const float4*>(s)[2 * i];
      const float4 b = reinterpret_cast<const float4*>(s)[2 * i + 1];
      store8(d + i * kPack, Pack8{{a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w}});
    }
  } else {
    for (; i < n; i += stride) d[i] = __float2bfloat16(s[i]);
  }
}

// 4 bf16 (8 bytes) in and one float4 out per step, so both the loads and the stores of a warp are
// contiguous; 4 independent steps a loop iteration keep 4 loads in flight per thread.
__global__ void bf16_to_f32_kernel(float* __restrict__ d, const bf16* __restrict__ s, int64_t n,
                                   bool vec) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (vec) {
    const int64_t n4 = n / 4;
    const uint2* s4 = reinterpret_cast<const uint2*>(s);
    float4* d4 = reinterpret_cast<float4*>(d);
    for (; i + 3 * stride < n4; i += 4 * stride) {
      uint2 u[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) u[k] = __ldcs(s4 + i + k * stride);  // streamed: read once
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u[k].x));
        const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u[k].y));
        d4[i + k * stride] = make_float4(a.x, a.y, b.x, b.y);
      }
    }
    for (; i < n4; i += stride) {
      const uint2 u = s4[i];
      const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u.x));
      const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u.y));
      d4[i] = make_float4(a.x, a.y, b.x, b.y);
    }
  } else {
    for (; i < n; i += stride) d[i] = __bfloat162float(s[i]);
  }
}

// ---- add ----
__global__ void add_bf16_kernel(bf16* o, const bf16* a, const bf16* b, int64_t n, bool vec) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (vec) {
    for (; i < n / kPack; i += stride) {
      Pack8 x = load8(a + i * kPack), y = load8(b + i * kPack);
#pragma unroll
      for (int j = 0; j < kPack; ++j) x.v[j] += y.v[j];
      store8(o + i * kPack, x);
    }
  } else {
    for (; i < n; i += stride)
      o[i] = __float2bfloat16(__bfloat162float(a[i]) + __bfloat162float(b[i]));
  }
}

__global__ void add_f32_kernel(float* o, const float* a, const float* b, int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    o[i] = a[i] + b[i];
}

// ---- SwiGLU: as transformers in bf16, silu(gate) is rounded to bf16 before the product ----
__device__ __forceinline__ float silu_bf16(float g) { return round_bf16(g / (1.0f + __expf(-g))); }

__global__ void swiglu_fwd_kernel(bf16* o, const bf16* g, const bf16* u, int64_t n, bool vec) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (vec) {
    for (; i < n / kPack; i += stride) {
      Pack8 x = load8(g + i * kPack), y = load8(u + i * kPack);
#pragma unroll
      for (int j = 0; j < kPack; ++j) x.v[j] = silu_bf16(x.v[j]) * y.v[j];
      store8(o + i * kPack, x);
    }
  } else {
    for (; i < n; i += stride)
      o[i] = __float2bfloat16(silu_bf16(__bfloat162float(g[i])) * __bfloat162float(u[i]));
  }
}

// d/dg [g·σ(g)] = σ(g)·(1 + g·(1 − σ(g)))
__device__ __forceinline__ void swiglu_grad(float d, float g, float u, float& dg, float& du) {
  const float sig = 1.0f / (1.0f + __expf(-g));
  dg = d * u * sig * (1.0f + g * (1.0f - sig));
  du = d * round_bf16(g * sig);
}

__global__ void swiglu_bwd_kernel(bf16* dg, bf16* du, const bf16* d, const bf16* g, const bf16* u,
                                  int64_t n, bool vec) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (vec) {
    for (; i < n / kPack; i += stride) {
      Pack8 pd = load8(d + i * kPack), pg = load8(g + i * kPack), pu = load8(u + i * kPack);
      Pack8 rg, ru;
#pragma unroll
      for (int j = 0; j < kPack; ++j) swiglu_grad(pd.v[j], pg.v[j], pu.v[j], rg.v[j], ru.v[j]);
      store8(dg + i * kPack, rg);
      store8(du + i * kPack, ru);
    }
  } else {
    for (; i < n; i += stride) {
      float a, b;
      swiglu_grad(__bfloat162float(d[i]), __bfloat162float(g[i]), __bfloat162float(u[i]), a, b);
      dg[i] = __float2bfloat16(a);
      du[i] = __float2bfloat16(b);
    }
  }
}

// ---- RoPE: a block takes `tpb` tokens; cos/sin of each token's D/2 angles are computed once
// into shared memory (precise sincosf: angles reach ~1e5 rad), then applied to every head. The
// vector path moves 8 consecutive pairs (two 16-byte accesses, x[i..i+8) and x[half+i..)) a
// thread; the scalar path (half not a multiple of 8) one pair ----
template <bool kVec>
__global__ void rope_kernel(bf16* x, const int32_t* pos, const float* inv_freq, int64_t T, int H,
                            int half, int tpb, float sign) {
  extern __shared__ float cs[];  // per token of the block: [half] cos, [half] sin
  const int64_t t0 = int64_t(blockIdx.x) * tpb;
  for (int e = threadIdx.x; e < tpb * half; e += blockDim.x) {
    const int j = e / half, i = e % half;
    if (t0 + j >= T) continue;
    float sn, c;
    sincosf(float(pos[t0 + j]) * inv_freq[i], &sn, &c);  // the product in fp32, as transformers
    cs[j * 2 * half + i] = c;
    cs[j * 2 * half + half + i] = sign * sn;
  }
  __syncthreads();
  constexpr int G = kVec ? 8 : 1;  // pairs a thread
  const int groups = half / G, per_token = H * groups;
  for (int e = threadIdx.x; e < tpb * per_token; e += blockDim.x) {
    const int j = e / per_token, r = e % per_token, h = r / groups, i = (r % groups) * G;
    if (t0 + j >= T) break;
    bf16* v = x + ((t0 + j) * H + h) * int64_t(2 * half);
    const float* c = cs + j * 2 * half;
    if constexpr (kVec) {
      uint4 ua = *reinterpret_cast<const uint4*>(v + i);
      uint4 ub = *reinterpret_cast<const uint4*>(v + half + i);
      __nv_bfloat162* a = reinterpret_cast<__nv_bfloat162*>(&ua);
      __nv_bfloat162* b = reinterpret_cast<__nv_bfloat162*>(&ub);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const float2 x1 = __bfloat1622float2(a[k]), x2 = __bfloat1622float2(b[k]);
        const float c0 = c[i + 2 * k], c1 = c[i + 2 * k + 1];
        const float s0 = c[half + i + 2 * k], s1 = c[half + i + 2 * k + 1];
        a[k] = __floats2bfloat162_rn(x1.x * c0 - x2.x * s0, x1.y * c1 - x2.y * s1);
        b[k] = __floats2bfloat162_rn(x2.x * c0 + x1.x * s0, x2.y * c1 + x1.y * s1);
      }
      *reinterpret_cast<uint4*>(v + i) = ua;
      *reinterpret_cast<uint4*>(v + half + i) = ub;
    } else {
      const float x1 = __bfloat162float(v[i]), x2 = __bfloat162float(v[i + half]);
      const float cc = c[i], sn = c[half + i];
      v[i] = __float2bfloat16(x1 * cc - x2 * sn);
      v[i + half] = __float2bfloat16(x2 * cc + x1 * sn);
    }
  }
}

// ---- dbias: block of 32 columns × 8 row-lanes; each thread sums a fixed row subset in order,
// then the 8 partials are added in a fixed order ----
__global__ void bias_grad_kernel(float* dbias, const bf16* dy, int64_t M, int64_t N) {
  __shared__ float part[8][33];
  const int64_t n = int64_t(blockIdx.x) * 32 + threadIdx.x;
  float acc = 0.0f;
  if (n < N)
    for (int64_t m = threadIdx.y; m < M; m += 8) acc += __bfloat162float(dy[m * N + n]);
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && n < N) {
    float s = 0.0f;
    for (int j = 0; j < 8; ++j) s += part[j][threadIdx.x];
    dbias[n] += s;
  }
}

void check_same_bf16(const char* op,
                     std::initializer_list<std::pair<const char*, const Tensor*>> ts) {
  const Tensor& first = *ts.begin()->second;
  for (auto [name, t] : ts) {
    check_dtype(op, name, *t, DType::kBF16);
    SF_CHECK(t->numel() == first.numel(), op, ": ", name, " ", t->shape_str(), " does not match ",
             ts.begin()->first, " ", first.shape_str());
  }
}

}  // namespace

void convert(Tensor dst, Tensor src, cudaStream_t stream) {
  SF_CHECK(dst.numel() == src.numel(), "convert: dst ", dst.shape_str(), " and src ",
           src.shape_str(), " must have the same number of elements");
  const int64_t n = src.numel();
  if (n == 0) return;
  const auto what = [&] {
    return str_cat("convert ", dtype_name(src.dtype), src.shape_str(), " -> ",
                   dtype_name(dst.dtype), dst.shape_str());
  };
  if (dst.dtype == src.dtype) {
    if (dst.data != src.data)
      SF_CUDA_CHECK(cudaMemcpyAsync(dst.data, src.data, src.bytes(), cudaMemcpyDefault, stream),
                    what());
    return;
  }
  const bool vec = n % kPack == 0 && aligned16({dst.data, src.data});
  const unsigned grid = grid_for(vec ? n / kPack : n, kThreads, 132 * 32);
  if (dst.dtype == DType::kBF16 && src.dtype == DType::kF32) {
    f32_to_bf16_kernel<<<grid, kThreads, 0, stream>>>(dst.as<bf16>(), src.as<float>(), n, vec);
  } else if (dst.dtype == DType::kF32 && src.dtype == DType::kBF16) {
    bf16_to_f32_kernel<<<grid, kThreads, 0, stream>>>(dst.as<float>(), src.as<bf16>(), n, vec);
  } else {
    SF_FAIL(what(), ": not supported on the CUDA backend (F32 <-> BF16 and same-dtype copies)");
  }
  SF_LAUNCH_CHECK(what());
}

void add(Tensor out, Tensor a, Tensor b, cudaStream_t stream) {
  SF_CHECK(out.numel() == a.numel() && out.numel() == b.numel(), "add: shapes differ: out ",
           out.shape_str(), ", a ", a.shape_str(), ", b ", b.shape_str());
  SF_CHECK(out.dtype == a.dtype && out.dtype == b.dtype &&
               (out.dtype == DType::kBF16 || out.dtype == DType::kF32),
           "add: out, a, b must all be BF16 or all F32, got ", dtype_name(out.dtype), ", ",
           dtype_name(a.dtype), ", ", dtype_name(b.dtype));
  const int64_t n = out.numel();
  if (n == 0) return;
  if (out.dtype == DType::kF32) {
    add_f32_kernel<<<grid_for(n, kThreads, 132 * 32), kThreads, 0, stream>>>(
        out.as<float>(), a.as<float>(), b.as<float>(), n);
  } else {
    const bool vec = n % kPack == 0 && aligned16({out.data, a.data, b.data});
    add_bf16_kernel<<<grid_for(vec ? n / kPack : n, kThreads, 132 * 32), kThreads, 0, stream>>>(
        out.as<bf16>(), a.as<bf16>(), b.as<bf16>(), n, vec);
  }
  SF_LAUNCH_CHECK("add ", out.shape_str());
}

void swiglu_forward(Tensor out, Tensor gate, Tensor up, cudaStream_t stream) {
  check_same_bf16("swiglu_forward", {{"out", &out}, {"gate", &gate}, {"up", &up}});
  const int64_t n = out.numel();
  if (n == 0) return;
  const bool vec = n % kPack == 0 && aligned16({out.data, gate.data, up.data});
  swiglu_fwd_kernel<<<grid_for(vec ? n / kPack : n, kThreads, 132 * 32), kThreads, 0, stream>>>(
      out.as<bf16>(), gate.as<bf16>(), up.as<bf16>(), n, vec);
  SF_LAUNCH_CHECK("swiglu_forward ", out.shape_str());
}

void swiglu_backward(Tensor dgate, Tensor dup, Tensor dout, Tensor gate, Tensor up,
                     cudaStream_t stream) {
  check_same_bf16(
      "swiglu_backward",
      {{"dgate", &dgate}, {"dup", &dup}, {"dout", &dout}, {"gate", &gate}, {"up", &up}});
  const int64_t n = dout.numel();
  if (n == 0) return;
  const bool vec =
      n % kPack == 0 && aligned16({dgate.data, dup.data, dout.data, gate.data, up.data});
  swiglu_bwd_kernel<<<grid_for(vec ? n / kPack : n, kThreads, 132 * 32), kThreads, 0, stream>>>(
      dgate.as<bf16>(), dup.as<bf16>(), dout.as<bf16>(), gate.as<bf16>(), up.as<bf16>(), n, vec);
  SF_LAUNCH_CHECK("swiglu_backward ", dout.shape_str());
}

void rope(const char* op, Tensor x, Tensor positions, Tensor inv_freq, float sign,
          cudaStream_t stream) {
  check_dtype(op, "x", x, DType::kBF16);
  check_dtype(op, "positions", positions, DType::kI32);
  check_dtype(op, "inv_freq", inv_freq, DType::kF32);
  SF_CHECK(x.ndim == 3 && x.dim(2) % 2 == 0 && positions.numel() == x.dim(0) &&
               inv_freq.numel() == x.dim(2) / 2,
           op, ": shapes do not match x[T,heads,D] (D even), positions[T], inv_freq[D/2]: x ",
           x.shape_str(), ", positions ", positions.shape_str(), ", inv_freq ",
           inv_freq.shape_str());
  const int64_t T = x.dim(0);
  const int H = int(x.dim(1)), half = int(x.dim(2) / 2);
  if (T == 0) return;
  const bool vec = half % 8 == 0 && aligned16({x.data});
  // tokens a block: enough work items (one per thread) for kThreads threads
  const int per_token = H * (vec ? half / 8 : half);
  const int tpb = std::max(1, std::min(kThreads / std::max(per_token, 1), 16));
  const unsigned grid = unsigned((T + tpb - 1) / tpb);
  const size_t smem = size_t(tpb) * 2 * half * sizeof(float);
  if (vec)
    rope_kernel<true><<<grid, kThreads, smem, stream>>>(x.as<bf16>(), positions.i32(),
                                                        inv_freq.f32(), T, H, half, tpb, sign);
  else
    rope_kernel<false><<<grid, kThreads, smem, stream>>>(x.as<bf16>(), positions.i32(),
                                                         inv_freq.f32(), T, H, half, tpb, sign);
  SF_LAUNCH_CHECK(op, " x ", x.shape_str());
}

void bias_grad(Tensor dbias, Tensor dy, cudaStream_t stream) {
  check_dtype("linear_backward_weight", "dbias", dbias, DType::kF32);
  const int64_t M = dy.rows(), N = dy.cols();
  SF_CHECK(dbias.numel() == N, "linear_backward_weight: dbias ", dbias.shape_str(),
           " must have N=", N, " elements (dy ", dy.shape_str(), ")");
  if (N == 0) return;
  bias_grad_kernel<<<unsigned((N + 31) / 32), dim3(32, 8), 0, stream>>>(dbias.f32(), dy.as<bf16>(),
                                                                        M, N);
  SF_LAUNCH_CHECK("linear_backward_weight dbias ", dbias.shape_str(), " dy ", dy.shape_str());
}

}  // namespace sf::cuda
