// defines: sf::cuda::attn::{kLog2e, kLn2, Cfg, kGenMax, Shape, check_shapes, use_mma,
// set_smem} — what the attention forward (attention.cu) and backward (attention_bwd.cu) share:
// the tensor-core tile configuration, the generic path's register budget and the host-side shape
// checks and launch helpers.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <utility>

#include "backend/cuda/attention_mma.cuh"
#include "backend/cuda/kernels.h"

namespace sf::cuda::attn {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

template <int D>
struct Cfg {
  static_assert(D % 16 == 0 && D >= 16 && D <= 128, "tensor-core attention: head_dim 16..128");
  static constexpr int kRows = 64;  // query rows (forward, dQ) or keys (dK/dV) per block
  static constexpr int kS =
      D + 8;  // smem row stride (bf16): +16 B puts ldmatrix rows in distinct banks
  static constexpr int kBq = D >= 128 ? 32 : 64;  // query rows per step of the dK/dV kernel
  static constexpr size_t kTile = size_t(kRows) * kS * sizeof(bf16);
};

// the generic path (any head_dim <= 256): one warp per row, D / 32 values per lane
constexpr int kGenMax = 8;  // D / 32 per lane

// ---- host side ----
struct Shape {
  int64_t T;
  int NH, NKV, D, nseq;
};

inline Shape check_shapes(const char* op, const Tensor& out, const Tensor& lse, const Tensor& q,
                          const Tensor& k, const Tensor& v, const Tensor& cu) {
  for (auto [name, t] : {std::pair{"out", &out}, {"q", &q}, {"k", &k}, {"v", &v}})
    check_dtype(op, name, *t, DType::kBF16);
  check_dtype(op, "lse", lse, DType::kF32);
  check_dtype(op, "cu_seqlens", cu, DType::kI32);
  Shape s{q.dim(0), int(q.dim(1)), int(k.dim(1)), int(q.dim(2)), int(cu.numel()) - 1};
  SF_CHECK(q.ndim == 3 && k.ndim == 3 && v.ndim == 3 && k.dim(0) == s.T && k.dim(2) == s.D &&
               v.dim(0) == s.T && v.dim(1) == s.NKV && v.dim(2) == s.D && s.NKV > 0 &&
               s.NH % s.NKV == 0 && out.numel() == q.numel() && out.cols() == s.D &&
               lse.numel() == s.T * s.NH && cu.ndim == 1 && s.nseq >= 1,
           op, ": shapes do not match q[T,NH,D], k/v[T,NKV,D] (NH a multiple of NKV), out[T,NH,D],",
           " lse[T,NH], cu_seqlens[nseq+1]: q ", q.shape_str(), ", k ", k.shape_str(), ", v ",
           v.shape_str(), ", out ", out.shape_str(), ", lse ", lse.shape_str(), ", cu_seqlens ",
           cu.shape_str());
  return s;
}

inline bool use_mma(int D) { return D == 16 || D == 32 || D == 64 || D == 128; }

template <int D, typename K>
void set_smem(K kernel, size_t bytes) {
  SF_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)),
      "attention: raising the shared-memory limit to ", bytes, " bytes (head_dim ", D, ")");
}

}  // namespace sf::cuda::attn
