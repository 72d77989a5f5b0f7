// defines: the launchers of the CUDA backend's own kernels (sf::cuda::*). Each checks dtypes and
// shapes on the host (throwing sf::Error naming the op and the shapes), launches on `stream` and
// checks the launch. Semantics are those of sf::Backend (backend/backend.h); activations and
// weights are BF16, statistics and gradient accumulators F32, indices I32.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/tensor.h"
#include "optim/adamw.h"

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
// dbias[N] += Σ_rows dy[M, N] (F32), column by column in a fixed order: deterministic.
void bias_grad(Tensor dbias, Tensor dy, cudaStream_t stream);

// ---- optimizer (optimizer.cu) ----
// One AdamW step with the scalars of adamw_consts: bit-identical with adamw_step_reference.
// *nonfinite (device memory; null: not counted) := the master weights left NaN or ±inf.
void adamw(Tensor p, Tensor m, Tensor v, Tensor g, Tensor weights, const AdamWConsts& k,
           int64_t* nonfinite, cudaStream_t stream);
// out[0] = Σ x² in double over partial_count fixed blocks (partials: that many doubles).
void sum_squares(double* out, double* partials, int partial_count, Tensor x, cudaStream_t stream);

// ---- embedding (embedding.cu) ----
// The backward's device scratch, carved from one allocation of embedding_scratch_bytes(max_tokens,
// hidden) bytes made when the backend is created: sort keys and token positions (two buffers
// each), the radix sort's temporary storage, the list of runs longer than a chunk and the F32
// partial sums of their pieces (2·⌈max_tokens/32⌉ rows of hidden; 16 MiB at 16384 × 4096).
// Up to 16384 tokens and tables of < 2^18 rows are sorted by one block (one launch; the kernel's
// 135 KB of shared memory is granted here, once: tile_sort). Otherwise, with vocab > 0, the sort
// of max_tokens keys of the bits vocab needs is captured once into a CUDA graph (one launch a
// call instead of ten); tables of more rows sort without it.
struct EmbeddingScratch {
  uint32_t* keys[2] = {};
  int32_t* pos[2] = {};
  int32_t* runs = nullptr;
  int32_t* run_count = nullptr;
  void* sort_temp = nullptr;
  size_t sort_temp_bytes = 0;
  float* partial = nullptr;
  int64_t max_tokens = 0, hidden = 0;
  std::shared_ptr<CUgraphExec_st> sort_graph;  // null: sort directly
  int graph_bits = 0;
  const uint32_t* graph_keys = nullptr;  // where the graph leaves the sorted keys and positions
  const int32_t* graph_pos = nullptr;
  bool tile_sort = false;  // false: every call sorts device-wide
};
size_t embedding_scratch_bytes(int64_t max_tokens, int64_t hidden);
EmbeddingScratch embedding_scratch(void* base, int64_t max_tokens, int64_t hidden,
                                   int64_t vocab = 0);
void embedding_forward(Tensor out, Tensor ids, Tensor table, cudaStream_t stream);
// dtable[V, C] += scatter(dout[T, C], ids[T]), bitwise repeatable (sort by id, then every sum in a
// fixed order: embedding.cu); ids outside [0, V) contribute nothing. T <= scratch.max_tokens,
// C <= scratch.hidden. `stages` exists for bench_kernels: 1 = keys and sort only, 2 = and the
// chunk sums, 3 = everything.
void embedding_backward(Tensor dtable, Tensor ids, Tensor dout, const EmbeddingScratch& scratch,
                        cudaStream_t stream, int stages = 3);

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

// ---- attention against a KV cache (attention_decode.cu): q[Tq,NH,D], k/v[Tk,NKV,D], D <= 256 ----
void attention_decode(Tensor out, Tensor q, Tensor k, Tensor v, float scale, cudaStream_t stream);

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
