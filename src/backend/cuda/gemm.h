// defines: sf::cuda::Gemm — matrix products (bf16 operands, fp32 accumulate) for the row-major
// [rows, cols] tensors of sf::Backend, through cuBLASLt (algorithm choices cached per shape) or,
// for verification, through gemm_reference: a plain CUDA kernel with the same contract.
//
// SF_GEMM=reference (environment, read once per process) makes every Gemm built with the default
// implementation run gemm_reference instead of cuBLASLt: a debug switch, orders of magnitude
// slower, for comparing results and for compute-sanitizer (whose racecheck cannot run through
// cuBLASLt's TMA/wgmma kernels). Unset, empty or "cublaslt": cuBLASLt. Anything else is an error.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>

#include "core/tensor.h"

namespace sf::cuda {

// A row-major matrix [rows, cols] with leading dimension ld (elements) >= cols.
struct Mat {
  const void* data;
  DType dtype;
  int64_t rows, cols, ld;
};

enum class GemmImpl { kCublasLt, kReference };

// The value of SF_GEMM as an implementation (null or "" = cuBLASLt); throws on anything unknown.
GemmImpl gemm_impl_from(const char* sf_gemm);
// gemm_impl_from(getenv("SF_GEMM")), read on the first call and kept for the process.
GemmImpl gemm_impl_from_env();

class Gemm {
 public:
  // impl defaults to SF_GEMM's; the workspace is cuBLASLt's (unused by the reference).
  Gemm(void* workspace, size_t workspace_bytes);
  Gemm(void* workspace, size_t workspace_bytes, GemmImpl impl);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  GemmImpl impl() const;

  // y = alpha · a · op(b) + beta · y (+ bias[y.cols] broadcast over rows), all row-major:
  // op(b) = bᵀ when b_transposed. y may be BF16 or F32; a, b BF16; bias of y's dtype or null.
  // Accumulates in fp32 and rounds into y's dtype. beta = 0 never reads the old y (it may hold
  // NaN garbage); the bias is not scaled by alpha. The reference rounds exactly once; cuBLASLt,
  // for a BF16 y with a bias, rounds twice (measured, test_cuda_gemm.cpp): the bias is added to
  // the already-rounded product, bf16(bf16(alpha·a·op(b) + beta·y) + bias). Split-K partials are
  // kept in fp32 (the heuristics are asked for that reduction scheme only).
  void run(const char* op, Mat y, Mat a, bool a_transposed, Mat b, bool b_transposed, float alpha,
           float beta, const void* bias, cudaStream_t stream);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Gemm::run's contract computed the obvious way (one thread per element of y, k in order, fp32
// sums): the slow reference the cuBLASLt path is tested against (tests/backend/test_cuda_gemm.cpp).
void gemm_reference(const char* op, Mat y, Mat a, bool a_transposed, Mat b, bool b_transposed,
                    float alpha, float beta, const void* bias, cudaStream_t stream);

}  // namespace sf::cuda
