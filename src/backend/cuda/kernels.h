// defines: the launchers of the CUDA backend's own kernels (sf::cuda::*). Each checks dtypes and
// shapes on the host (throwing sf::Error naming the op and the shapes), launches on `stream` and
// checks the launch. Semantics are those of sf::Backend (backend/backend.h); activations and
// weights are BF16, statistics and gradient accumulators F32, indices I32.
#pragma once

#include <cuda_runtime.h>

#include "core/tensor.h"

namespace sf::cuda {

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
void rmsnorm_forward(Tensor sum, Tensor out, Tensor rstd, Tensor a, Tensor b, Tensor w, float eps,
                     cudaStream_t stream);  // sum/b empty: plain norm of a
void rmsnorm_backward(Tensor dx, Tensor dw, Tensor dout, Tensor x, Tensor w, Tensor rstd,
                      bool accumulate_dx, float* partial, int64_t partial_rows,
                      cudaStream_t stream);
int64_t rmsnorm_partial_rows();  // rows of partial the backward uses at most

// ---- attention (attention.cu); delta is F32 scratch of at least T·NH floats ----
void attention_forward(Tensor out, Tensor lse, Tensor q, Tensor k, Tensor v, Tensor cu_seqlens,
                       float scale, cudaStream_t stream);
void attention_backward(Tensor dq, Tensor dk, Tensor dv, Tensor dout, Tensor q, Tensor k,
                        Tensor v, Tensor out, Tensor lse, Tensor cu_seqlens, float scale,
                        float* delta, int64_t delta_capacity, cudaStream_t stream);

// ---- cross-entropy on a chunk of F32 logits [rows, V] (cross_entropy.cu) ----
// Row r: loss_row[r] = lse − logit[target] (0 if target is -100); the row is then overwritten,
// in place, by BF16 dlogits = grad_scale·(softmax − onehot) (zero for ignored rows) stored at the
// start of the row's bytes, i.e. as a BF16 matrix with leading dimension 2·V.
void ce_rows(float* logits, int64_t rows, int64_t V, const int32_t* targets, float grad_scale,
             float* loss_rows, cudaStream_t stream);
// loss_sum[0] += Σ loss_rows[0..rows), in order (deterministic).
void ce_accumulate(float* loss_sum, const float* loss_rows, int64_t rows, cudaStream_t stream);

}  // namespace sf::cuda
