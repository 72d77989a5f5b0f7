// defines: sf::cuda::rmsnorm_forward (plain and fused with the residual add), rmsnorm_backward.
// Math of transformers' LlamaRMSNorm in bf16: h = bf16(x · rstd) with rstd = rsqrt(mean(x²) + eps)
// in fp32, out = bf16(w · h). One block per row; each thread keeps its (≤ kMaxPairs) bf16 pairs
// in registers, so x is read once. dw is deterministic: per-block partial sums in fixed row order
// into an F32 scratch, then one ordered reduction over the blocks.
#include <algorithm>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/kernels.h"

namespace sf::cuda {
namespace {

constexpr int kMaxPairs = 16;   // bf16 pairs per thread: C <= 2·256·16 = 8192
constexpr int kMaxThreads = 256;
constexpr int kBwdBlocks = 264;  // 2 per SM of an H100/H200; rows of the dw partial scratch

int threads_for(int64_t C2) {
  int64_t t = (C2 + 3) / 4;
  t = (t + 31) / 32 * 32;
  return int(std::clamp<int64_t>(t, 32, kMaxThreads));
}

__global__ void rmsnorm_fwd_kernel(bf16* __restrict__ sum, bf16* __restrict__ out,
                                   float* __restrict__ rstd, const bf16* a, const bf16* b,
                                   const bf16* __restrict__ w, int64_t C, float eps) {
  __shared__ float red[32];
  const int64_t row = blockIdx.x, C2 = C / 2;
  const __nv_bfloat162* pa = reinterpret_cast<const __nv_bfloat162*>(a + row * C);
  const __nv_bfloat162* pb = b ? reinterpret_cast<const __nv_bfloat162*>(b + row * C) : nullptr;
  __nv_bfloat162* ps = sum ? reinterpret_cast<__nv_bfloat162*>(sum + row * C) : nullptr;
  float2 x[kMaxPairs];
  float ss = 0.0f;
#pragma unroll
  for (int k = 0; k < kMaxPairs; ++k) {
    const int64_t c = threadIdx.x + int64_t(k) * blockDim.x;
    x[k] = make_float2(0.0f, 0.0f);
    if (c < C2) {
      x[k] = __bfloat1622float2(pa[c]);
      if (pb) {  // the residual sum is rounded to bf16 (it is stored so), then normalised
        const float2 y = __bfloat1622float2(pb[c]);
        const __nv_bfloat162 s = __floats2bfloat162_rn(x[k].x + y.x, x[k].y + y.y);
        ps[c] = s;
        x[k] = __bfloat1622float2(s);
      }
      ss += x[k].x * x[k].x + x[k].y * x[k].y;
    }
  }
  ss = block_sum(ss, red);
  const float r = rsqrtf(ss / float(C) + eps);
  if (threadIdx.x == 0) rstd[row] = r;
  const __nv_bfloat162* pw = reinterpret_cast<const __nv_bfloat162*>(w);
  __nv_bfloat162* po = reinterpret_cast<__nv_bfloat162*>(out + row * C);
#pragma unroll
  for (int k = 0; k < kMaxPairs; ++k) {
    const int64_t c = threadIdx.x + int64_t(k) * blockDim.x;
    if (c < C2) {
      const float2 wv = __bfloat1622float2(pw[c]);
      po[c] = __floats2bfloat162_rn(wv.x * round_bf16(x[k].x * r), wv.y * round_bf16(x[k].y * r));
    }
  }
}

// dx_j = r·w_j·g_j − x_j·r³·mean_i(w_i·g_i·x_i);  dw_j += Σ_rows g_j·bf16(x_j·r)
__global__ void rmsnorm_bwd_kernel(bf16* dx, float* __restrict__ partial, const bf16* dout,
                                   const bf16* __restrict__ x, const bf16* __restrict__ w,
                                   const float* __restrict__ rstd, int64_t R, int64_t C,
                                   bool accumulate) {
  __shared__ float red[32];
  const int64_t C2 = C / 2;
  const __nv_bfloat162* pw = reinterpret_cast<const __nv_bfloat162*>(w);
  float2 wv[kMaxPairs], dw[kMaxPairs];
#pragma unroll
  for (int k = 0; k < kMaxPairs; ++k) {
    const int64_t c = threadIdx.x + int64_t(k) * blockDim.x;
    wv[k] = c < C2 ? __bfloat1622float2(pw[c]) : make_float2(0.0f, 0.0f);
    dw[k] = make_float2(0.0f, 0.0f);
  }
  for (int64_t row = blockIdx.x; row < R; row += gridDim.x) {
    const __nv_bfloat162* px = reinterpret_cast<const __nv_bfloat162*>(x + row * C);
    const __nv_bfloat162* pg = reinterpret_cast<const __nv_bfloat162*>(dout + row * C);
    __nv_bfloat162* pd = reinterpret_cast<__nv_bfloat162*>(dx + row * C);
    const float r = rstd[row];
    float2 xv[kMaxPairs], gv[kMaxPairs];
    float dot = 0.0f;
#pragma unroll
    for (int k = 0; k < kMaxPairs; ++k) {
      const int64_t c = threadIdx.x + int64_t(k) * blockDim.x;
      xv[k] = gv[k] = make_float2(0.0f, 0.0f);
      if (c < C2) {
        xv[k] = __bfloat1622float2(px[c]);
        gv[k] = __bfloat1622float2(pg[c]);
        dot += wv[k].x * gv[k].x * xv[k].x + wv[k].y * gv[k].y * xv[k].y;
        dw[k].x += gv[k].x * round_bf16(xv[k].x * r);
        dw[k].y += gv[k].y * round_bf16(xv[k].y * r);
      }
    }
    dot = block_sum(dot, red);  // also orders every read of this row before the writes below
    const float kk = r * r * r * dot / float(C);
#pragma unroll
    for (int k = 0; k < kMaxPairs; ++k) {
      const int64_t c = threadIdx.x + int64_t(k) * blockDim.x;
      if (c < C2) {
        float2 v = make_float2(r * wv[k].x * gv[k].x - xv[k].x * kk,
                               r * wv[k].y * gv[k].y - xv[k].y * kk);
        if (accumulate) {
          const float2 o = __bfloat1622float2(pd[c]);
          v.x += o.x;
          v.y += o.y;
        }
        pd[c] = __floats2bfloat162_rn(v.x, v.y);
      }
    }
  }
#pragma unroll
  for (int k = 0; k < kMaxPairs; ++k) {
    const int64_t c = threadIdx.x + int64_t(k) * blockDim.x;
    if (c < C2) reinterpret_cast<float2*>(partial + int64_t(blockIdx.x) * C)[c] = dw[k];
  }
}

__global__ void reduce_partial_kernel(float* dw, const float* partial, int nb, int64_t C) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float s = 0.0f;
  for (int b = 0; b < nb; ++b) s += partial[int64_t(b) * C + c];
  dw[c] += s;
}

void check_shapes(const char* op, const Tensor& out, const Tensor& rstd, const Tensor& x,
                  const Tensor& w) {
  check_dtype(op, "out", out, DType::kBF16);
  check_dtype(op, "x", x, DType::kBF16);
  check_dtype(op, "w", w, DType::kBF16);
  check_dtype(op, "rstd", rstd, DType::kF32);
  const int64_t C = x.cols();
  SF_CHECK(out.numel() == x.numel() && out.cols() == C && w.numel() == C &&
               rstd.numel() == x.rows(),
           op, ": shapes do not match out[R,C], rstd[R], x[R,C], w[C]: out ", out.shape_str(),
           ", rstd ", rstd.shape_str(), ", x ", x.shape_str(), ", w ", w.shape_str());
  SF_CHECK(C % 2 == 0 && C <= 2 * kMaxThreads * kMaxPairs, op, ": the CUDA RMSNorm needs an even ",
           "row length of at most ", 2 * kMaxThreads * kMaxPairs, ", got x ", x.shape_str());
}

}  // namespace

int64_t rmsnorm_partial_rows() { return kBwdBlocks; }

void rmsnorm_forward(Tensor sum, Tensor out, Tensor rstd, Tensor a, Tensor b, Tensor w, float eps,
                     cudaStream_t stream) {
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
  rmsnorm_fwd_kernel<<<unsigned(R), threads_for(C / 2), 0, stream>>>(
      sum.empty() ? nullptr : sum.as<bf16>(), out.as<bf16>(), rstd.f32(), a.as<bf16>(),
      sum.empty() ? nullptr : b.as<bf16>(), w.as<bf16>(), C, eps);
  SF_LAUNCH_CHECK(op, " x ", a.shape_str());
}

void rmsnorm_backward(Tensor dx, Tensor dw, Tensor dout, Tensor x, Tensor w, Tensor rstd,
                      bool accumulate_dx, float* partial, int64_t partial_rows,
                      cudaStream_t stream) {
  const char* op = "rmsnorm_backward";
  check_shapes(op, dout, rstd, x, w);
  check_dtype(op, "dx", dx, DType::kBF16);
  check_dtype(op, "dw", dw, DType::kF32);
  SF_CHECK(dx.numel() == x.numel() && dw.numel() == w.numel(), op, ": dx ", dx.shape_str(),
           " / dw ", dw.shape_str(), " must match x ", x.shape_str(), " / w ", w.shape_str());
  const int64_t R = x.rows(), C = x.cols();
  if (R == 0) return;
  const int nb = int(std::min<int64_t>({R, kBwdBlocks, partial_rows}));
  rmsnorm_bwd_kernel<<<unsigned(nb), threads_for(C / 2), 0, stream>>>(
      dx.as<bf16>(), partial, dout.as<bf16>(), x.as<bf16>(), w.as<bf16>(), rstd.f32(), R, C,
      accumulate_dx);
  SF_LAUNCH_CHECK(op, " x ", x.shape_str());
  reduce_partial_kernel<<<grid_for(C, 256), 256, 0, stream>>>(dw.f32(), partial, nb, C);
  SF_LAUNCH_CHECK(op, " dw ", dw.shape_str());
}

}  // namespace sf::cuda
