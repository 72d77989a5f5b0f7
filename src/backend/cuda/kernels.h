// defines: the launchers of the CUDA backend's own kernels (sf::cuda::*). Each checks dtypes and
// shapes on the host (throwing sf::Error naming the op and the shapes), launches on `stream` and
// checks the launch. Semantics are those of sf::Backend (backend/backend.h); activations and
// weights are BF16, statistics and gradient accumulators F32, indices I32.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "core/tensor.h"

namespace sf::cuda {

using bf16 = __nv_bfloat16;

// ---- elementwise (elementwise.cu) ----
void convert(Tensor dst, Tensor src, cudaStream_t stream);
void add(Tensor out, Tensor a, Tensor b, cudaStream_t stream);
void swiglu_forward(Tensor out, Tensor gate, Tensor up, cudaStream_t stream);
void swiglu_backward(Tensor dgate, Tensor dup, Tensor dout, Tensor gate, Tensor up,
                     cudaStream_t stream);
void rope(const char* op, Tensor x, Tensor positions, Tensor inv_freq, float sign,
          cudaStream_t stream);
void embedding_forward(Tensor out, Tensor ids, Tensor table, cudaStream_t stream);
void embedding_backward(Tensor dtable, Tensor ids, Tensor dout, cudaStream_t stream);
// dbias[N] += Σ_rows dy[M, N] (F32), column by column in a fixed order: deterministic.
void bias_grad(Tensor dbias, Tensor dy, cudaStream_t stream);

// ---- RMSNorm (norm.cu); partial is F32 scratch of partial_rows × C for the dw reduction ----
// sum/b empty: plain norm of a. max_packs (packs of 8 bf16 a thread at most; 0 = the tuned
// default) exists for bench_kernels' variants.
void rmsnorm_forward(Tensor sum, Tensor out, Tensor rstd, Tensor a, Tensor b, Tensor w, float eps,
                     cudaStream_t stream, int max_packs = 0);
void rmsnorm_backward(Tensor dx, Tensor dw, Tensor dout, Tensor x, Tensor w, Tensor rstd,
                      bool accumulate_dx, float* partial, int64_t partial_rows, cudaStream_t stream,
                      int max_packs = 0);  // max_packs: as the forward's
int64_t rmsnorm_partial_rows();            // rows of partial the backward uses at most

// ---- attention (attention.cu); delta is F32 scratch of at least T·NH floats ----
void attention_forward(Tensor out, Tensor lse, Tensor q, Tensor k, Tensor v, Tensor cu_seqlens,
                       float scale, cudaStream_t stream);
void attention_backward(Tensor dq, Tensor dk, Tensor dv, Tensor dout, Tensor q, Tensor k, Tensor v,
                        Tensor out, Tensor lse, Tensor cu_seqlens, float scale, float* delta,
                        int64_t delta_capacity, cudaStream_t stream);

// ---- the fused head: linear + cross-entropy (cross_entropy.cu) ----
class Gemm;
// Rows of the head's workspace: `chunk` rows of BF16 dlogits [chunk, V] (the K of the dx/dW
// GEMMs) and `sub` rows of F32 logits [sub, V]; together about `bytes` (2·V·chunk + 4·V·sub).
struct CeRows {
  int64_t chunk = 0, sub = 0;
};
CeRows ce_workspace_rows(size_t bytes, int64_t V, int64_t max_tokens);
struct CeWorkspace {
  CeRows rows;
  float* logits = nullptr;     // [rows.sub, V] F32
  bf16* dlogits = nullptr;     // [rows.chunk, V] BF16
  float* loss_rows = nullptr;  // [rows.sub] F32
};
// loss_sum[0] += Σ_rows CE (ignored targets, -100, add 0); dx = grad_scale·∂/∂x (BF16);
// dw += grad_scale·∂/∂w (F32). Deterministic: every sum in a fixed order. Shapes checked by the
// caller; w's V must fit the workspace's vocab.
void linear_cross_entropy(Gemm& gemm, Tensor loss_sum, Tensor dx, Tensor dw, Tensor x, Tensor w,
                          Tensor targets, float grad_scale, const CeWorkspace& ws,
                          cudaStream_t stream);

}  // namespace sf::cuda
