// defines: sf::cuda::gemm_reference — Gemm::run's contract as a plain CUDA kernel: one thread per
// element of y, an fp32 sum over k in order, no shared memory, no tiling. Correct by inspection,
// not fast: it is what the cuBLASLt path is tested against and what SF_GEMM=reference runs (so
// that compute-sanitizer can check the kernels around the GEMMs).
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/gemm.h"

namespace sf::cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(bf16 v) { return __bfloat162float(v); }
__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(bf16* p, float v) { *p = __float2bfloat16(v); }  // nearest

// y[m, n] = alpha · Σ_k op(a)[m, k] · op(b)[k, n] + beta · y[m, n] + bias[n], element i = m·N + n
// per thread (grid-stride). Row-major storage: op(a)[m, k] is a[m·lda + k], or a[k·lda + m] when
// a is stored transposed; op(b)[k, n] is b[k·ldb + n], or b[n·ldb + k] when b is.
template <typename Y>
__global__ void __launch_bounds__(kThreads)
    gemm_reference_kernel(Y* __restrict__ y, int64_t ldy, const bf16* __restrict__ a, int64_t lda,
                          bool a_t, const bf16* __restrict__ b, int64_t ldb, bool b_t, int64_t M,
                          int64_t N, int64_t K, float alpha, float beta,
                          const Y* __restrict__ bias) {
  const int64_t a_row = a_t ? 1 : lda, a_k = a_t ? lda : 1;  // strides of op(a) over m and k
  const int64_t b_k = b_t ? 1 : ldb, b_col = b_t ? ldb : 1;  // strides of op(b) over k and n
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < M * N;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t m = i / N, n = i % N;
    const bf16* ar = a + m * a_row;
    const bf16* bc = b + n * b_col;
    float acc = 0.0f;  // a bf16 × bf16 product is exact in fp32: only the sum rounds
    for (int64_t k = 0; k < K; ++k) acc += to_f32(ar[k * a_k]) * to_f32(bc[k * b_k]);
    float v = alpha * acc;
    Y* out = y + m * ldy + n;
    if (beta != 0.0f) v += beta * to_f32(*out);  // beta = 0: the old y (maybe NaN) is not read
    if (bias) v += to_f32(bias[n]);
    store(out, v);  // the only rounding into y's dtype
  }
}

}  // namespace

void gemm_reference(const char* op, Mat y, Mat a, bool a_t, Mat b, bool b_t, float alpha,
                    float beta, const void* bias, cudaStream_t stream) {
  // Row-major shapes: op(a) [M,K], op(b) [K,N], y [M,N] (the same checks as the cuBLASLt path).
  const int64_t M = a_t ? a.cols : a.rows, K = a_t ? a.rows : a.cols;
  const int64_t Kb = b_t ? b.cols : b.rows, N = b_t ? b.rows : b.cols;
  auto shapes = [&] {
    return str_cat(op, " (reference GEMM y[", y.rows, ",", y.cols, "] = a[", a.rows, ",", a.cols,
                   "]", a_t ? "ᵀ" : "", " · b[", b.rows, ",", b.cols, "]", b_t ? "ᵀ" : "", ")");
  };
  SF_CHECK(K == Kb && y.rows == M && y.cols == N, shapes(), ": inner or outer sizes differ");
  SF_CHECK(a.ld >= a.cols && b.ld >= b.cols && y.ld >= y.cols, shapes(),
           ": a leading dimension is smaller than its row (ld a ", a.ld, ", b ", b.ld, ", y ", y.ld,
           ")");
  SF_CHECK(a.dtype == DType::kBF16 && b.dtype == DType::kBF16, shapes(),
           ": a and b must be BF16, got ", dtype_name(a.dtype), " and ", dtype_name(b.dtype));
  if (M == 0 || N == 0) return;
  const unsigned grid = grid_for(M * N, kThreads);
  const bf16* pa = static_cast<const bf16*>(a.data);
  const bf16* pb = static_cast<const bf16*>(b.data);
  if (y.dtype == DType::kF32) {
    gemm_reference_kernel<float><<<grid, kThreads, 0, stream>>>(
        static_cast<float*>(const_cast<void*>(y.data)), y.ld, pa, a.ld, a_t, pb, b.ld, b_t, M, N, K,
        alpha, beta, static_cast<const float*>(bias));
  } else if (y.dtype == DType::kBF16) {
    gemm_reference_kernel<bf16><<<grid, kThreads, 0, stream>>>(
        static_cast<bf16*>(const_cast<void*>(y.data)), y.ld, pa, a.ld, a_t, pb, b.ld, b_t, M, N, K,
        alpha, beta, static_cast<const bf16*>(bias));
  } else {
    SF_FAIL(shapes(), ": y must be BF16 or F32, got ", dtype_name(y.dtype));
  }
  SF_LAUNCH_CHECK(shapes());
}

}  // namespace sf::cuda
