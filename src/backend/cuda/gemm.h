// defines: sf::cuda::Gemm — cuBLASLt matrix products (bf16 operands, fp32 accumulate) for the
// row-major [rows, cols] tensors of sf::Backend; algorithm choices are cached per shape.
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

class Gemm {
 public:
  Gemm(void* workspace, size_t workspace_bytes);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // y = alpha · a · op(b) + beta · y (+ bias[y.cols] broadcast over rows), all row-major:
  // op(b) = bᵀ when b_transposed. y may be BF16 or F32; a, b BF16; bias of y's dtype or null.
  void run(const char* op, Mat y, Mat a, bool a_transposed, Mat b, bool b_transposed,
           float alpha, float beta, const void* bias, cudaStream_t stream);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sf::cuda
