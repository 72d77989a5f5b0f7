// defines: sf::cuda::ce_workspace_rows, linear_cross_entropy — the fused head on the device:
// loss, dx and dW of CE(x·Wᵀ, targets) without ever holding T×V.
//
// Workspace (CeRows): a BF16 dlogits chunk of `chunk` rows [chunk, V] and a smaller F32 logits
// buffer of `sub` rows. Per chunk of tokens: for each sub-chunk, logits (F32) = x·Wᵀ, then one
// block per row turns its F32 row into loss_row = lse − logit[target] and the BF16 row
// grad_scale·(softmax − onehot) in the dlogits chunk; after the whole chunk, dx = dlogits·W and
// dW += dlogitsᵀ·x as two GEMMs with K = chunk rows (the dW GEMM re-reads and re-writes the F32
// dW each chunk, so chunks must stay long: at 1024 rows it is still compute-bound). The F32
// logits keep the softmax in fp32 precision; only dlogits are rounded to bf16 (as before both
// GEMMs anyway).
#include <algorithm>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/gemm.h"
#include "backend/cuda/kernels.h"

namespace sf::cuda {
namespace {

constexpr int kThreads = 512;
constexpr int kUnroll = 4;

// One block per row. Pass 1 reads the F32 row (online max and sum of exp), pass 2 reads it again
// and writes the BF16 dlogits row. kVec: 16-byte loads and 8-byte stores (V % 4 == 0).
template <bool kVec>
__global__ void __launch_bounds__(kThreads)
    ce_softmax_kernel(const float* __restrict__ logits, int64_t V,
                      const int32_t* __restrict__ targets, float grad_scale,
                      float* __restrict__ loss_rows, bf16* __restrict__ dlogits) {
  __shared__ float red[32];
  const int64_t row = blockIdx.x;
  const float* x = logits + row * V;
  bf16* d = dlogits + row * V;
  const int32_t target = targets[row];
  const bool valid = target >= 0 && target < V;  // -100 (or anything outside) is ignored

  float m = -INFINITY, s = 0.0f;
  auto add = [&](float v) {  // online: s = Σ exp(v − m) with a running max
    if (v > m) {
      s = s * __expf(m - v) + 1.0f;
      m = v;
    } else {
      s += __expf(v - m);
    }
  };
  if constexpr (kVec) {
    const float4* x4 = reinterpret_cast<const float4*>(x);
    const int64_t n4 = V / 4;
    int64_t i = threadIdx.x;
    for (; i + (kUnroll - 1) * kThreads < n4; i += kUnroll * kThreads) {
      float4 v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) v[u] = x4[i + u * kThreads];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        add(v[u].x);
        add(v[u].y);
        add(v[u].z);
        add(v[u].w);
      }
    }
    for (; i < n4; i += kThreads) {
      const float4 v = x4[i];
      add(v.x);
      add(v.y);
      add(v.z);
      add(v.w);
    }
  } else {
    for (int64_t i = threadIdx.x; i < V; i += kThreads) add(x[i]);
  }
  const float M = block_max(m, red);
  s = m == -INFINITY ? 0.0f : s * __expf(m - M);
  const float sum = block_sum(s, red);
  const float lse = M + logf(sum);
  if (threadIdx.x == 0) loss_rows[row] = valid ? lse - x[target] : 0.0f;

  const float gs = valid ? grad_scale : 0.0f;
  auto grad = [&](float v, int64_t i) {
    return gs * (__expf(v - lse) - (i == target ? 1.0f : 0.0f));
  };
  if constexpr (kVec) {
    const float4* x4 = reinterpret_cast<const float4*>(x);
    uint2* d4 = reinterpret_cast<uint2*>(d);
    auto put = [&](const float4& v, int64_t i) {
      const __nv_bfloat162 a = __floats2bfloat162_rn(grad(v.x, 4 * i), grad(v.y, 4 * i + 1));
      const __nv_bfloat162 b = __floats2bfloat162_rn(grad(v.z, 4 * i + 2), grad(v.w, 4 * i + 3));
      uint2 o;
      o.x = *reinterpret_cast<const uint32_t*>(&a);
      o.y = *reinterpret_cast<const uint32_t*>(&b);
      d4[i] = o;
    };
    const int64_t n4 = V / 4;
    int64_t i = threadIdx.x;
    for (; i + (kUnroll - 1) * kThreads < n4; i += kUnroll * kThreads) {
      float4 v[kUnroll];  // all loads in flight before the first use (pass 2 was latency-bound)
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) v[u] = x4[i + u * kThreads];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) put(v[u], i + u * kThreads);
    }
    for (; i < n4; i += kThreads) put(x4[i], i);
  } else {
    for (int64_t i = threadIdx.x; i < V; i += kThreads) d[i] = __float2bfloat16(grad(x[i], i));
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

CeRows ce_workspace_rows(size_t bytes, int64_t V, int64_t max_tokens) {
  V = std::max<int64_t>(V, 1);
  // 2V bytes a dlogits row plus, for a quarter of the rows, 4V bytes of F32 logits: 3V a row.
  int64_t chunk = std::max<int64_t>(16, int64_t(bytes / (3 * size_t(V))));
  if (chunk >= 128) chunk = chunk / 64 * 64;  // GEMM-friendly
  chunk = std::max<int64_t>(1, std::min(chunk, max_tokens));
  const int64_t left = (int64_t(bytes) - 2 * V * chunk) / (4 * V);
  int64_t sub = std::max((chunk + 3) / 4, left);
  if (sub >= 128) sub = sub / 64 * 64;
  sub = std::max<int64_t>(1, std::min(sub, chunk));
  return CeRows{chunk, sub};
}

void linear_cross_entropy(Gemm& gemm, Tensor loss_sum, Tensor dx, Tensor dw, Tensor x, Tensor w,
                          Tensor targets, float grad_scale, const CeWorkspace& ws,
                          cudaStream_t st) {
  const int64_t T = x.rows(), C = x.cols(), V = w.dim(0);
  const Mat wm{w.data, DType::kBF16, V, C, C};
  const Mat dwm{dw.data, DType::kF32, V, C, C};
  const bool vec = V % 4 == 0;
  for (int64_t c0 = 0; c0 < T; c0 += ws.rows.chunk) {
    const int64_t rows = std::min(ws.rows.chunk, T - c0);
    const Mat xm{x.as<bf16>() + c0 * C, DType::kBF16, rows, C, C};
    for (int64_t s0 = 0; s0 < rows; s0 += ws.rows.sub) {
      const int64_t n = std::min(ws.rows.sub, rows - s0);
      const Mat xs{x.as<bf16>() + (c0 + s0) * C, DType::kBF16, n, C, C};
      gemm.run("linear_cross_entropy (logits)", Mat{ws.logits, DType::kF32, n, V, V}, xs, false, wm,
               true, 1.0f, 0.0f, nullptr, st);
      const int32_t* tg = targets.i32() + c0 + s0;
      bf16* dl = ws.dlogits + s0 * V;
      if (vec)
        ce_softmax_kernel<true>
            <<<unsigned(n), kThreads, 0, st>>>(ws.logits, V, tg, grad_scale, ws.loss_rows, dl);
      else
        ce_softmax_kernel<false>
            <<<unsigned(n), kThreads, 0, st>>>(ws.logits, V, tg, grad_scale, ws.loss_rows, dl);
      SF_LAUNCH_CHECK("linear_cross_entropy (softmax rows) rows ", n, " V ", V);
      ce_accumulate_kernel<<<1, 256, 0, st>>>(loss_sum.f32(), ws.loss_rows, n);
      SF_LAUNCH_CHECK("linear_cross_entropy (loss sum) rows ", n);
    }
    const Mat dl{ws.dlogits, DType::kBF16, rows, V, V};
    gemm.run("linear_cross_entropy (dx)", Mat{dx.as<bf16>() + c0 * C, DType::kBF16, rows, C, C}, dl,
             false, wm, false, 1.0f, 0.0f, nullptr, st);
    gemm.run("linear_cross_entropy (dw)", dwm, dl, true, xm, false, 1.0f, 1.0f, nullptr, st);
  }
}

}  // namespace sf::cuda
