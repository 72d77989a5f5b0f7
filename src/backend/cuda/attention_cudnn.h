// defines: sf::cuda::CudnnAttention, sf::cuda::AttentionImpl, sf::cuda::attention_impl_from_env —
// causal GQA attention over packed samples through cuDNN's fused flash-attention engines (backend
// graph API), with libcudnn.so.9 loaded at run time (dlopen): nothing links against cuDNN, and
// where the library is absent create() returns nullptr and the caller keeps its own kernel.
//
// Layout: our [T, heads, D] tensors are cuDNN "THD" ragged tensors — dims [B, H, S, D] with
// per-sample element offsets (ragged offsets) and per-sample lengths (padding mask), B = number of
// samples (rounded up to a power of two; the extra samples are empty), S = longest sample (rounded
// up to a power of two) — so no token attends across a sample boundary and no padding is stored.
// The graphs are the ones cudnn-frontend's SDPA nodes lower to (cuDNN 9.6+ for ragged GQA;
// attention_cudnn_graphs.h); each shape's plan is the fastest of the heuristics' candidates,
// timed at its first call (SF_CUDNN_TUNE=0: the first candidate).
// lse = cuDNN's softmax "stats" = max + log(Σ exp(s − max)) of the scaled scores: natural log,
// the same convention as our kernel and the CPU reference.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/tensor.h"

namespace sf::cuda {

enum class AttentionImpl { kOwn, kCudnn };

// SF_ATTENTION=cudnn|own forces one implementation; unset (or anything else) gives `fallback`.
AttentionImpl attention_impl_from_env(AttentionImpl fallback);

class CudnnAttention {
 public:
  // What to do when the caller cannot give the sample lengths on the host: kRead copies
  // cu_seqlens back (one stream synchronisation per call, exact S); kBound plans with S = T
  // (no synchronisation; more, mostly empty, thread blocks).
  enum class UnknownLengths { kRead, kBound };

  // Loads libcudnn.so.9 (or $SF_CUDNN_LIB) and creates a handle on the current device.
  // max_tokens bounds T (and the number of samples); workspace_bytes is device memory allocated
  // here, once, for the dQ accumulator (T·NH·D F32), the softmax row sums and stats (T·NH F32),
  // the GQA dK/dV partials of some plans and cuDNN's own plan workspace: a plan that needs more is
  // not used. Returns nullptr, with the reason in *why, when cuDNN is unusable (absent, older than
  // 9.6, a GPU before Hopper).
  static std::unique_ptr<CudnnAttention> create(int64_t max_tokens, size_t workspace_bytes,
                                                std::string* why);
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  // Shapes and semantics of sf::Backend::attention_forward/backward. Return true when cuDNN ran;
  // false, having enqueued nothing, when it cannot take this call (head_dim, alignment, no plan
  // for the shape, workspace too small): the caller runs its own kernel. host_cu, if given, is
  // cu_seqlens on the host (the same values); otherwise `unknown_lengths` applies. Throws
  // sf::Error when cuDNN fails at execution.
  bool forward(Tensor out, Tensor lse, Tensor q, Tensor k, Tensor v, Tensor cu_seqlens,
               const int32_t* host_cu, float scale, cudaStream_t stream);
  bool backward(Tensor dq, Tensor dk, Tensor dv, Tensor dout, Tensor q, Tensor k, Tensor v,
                Tensor out, Tensor lse, Tensor cu_seqlens, const int32_t* host_cu, float scale,
                cudaStream_t stream);

  void set_unknown_lengths(UnknownLengths u) { unknown_ = u; }
  // When every sample has the same length (and the lengths are known), use the plain [B, S, H, D]
  // graphs without offsets or padding mask (default on; off for measurements).
  void set_dense_when_equal(bool on) { dense_ = on; }
  // Backward workspace layout to use (-1: the first that cuDNN finalizes; see kVariants).
  void force_backward_variant(int v) { variant_ = v; }
  size_t version() const;              // cudnnGetVersion(), e.g. 91400
  const std::string& library() const;  // the path it was loaded from
  // Why the last call returned false ("" after a call that ran).
  const std::string& last_refusal() const { return refusal_; }

  struct Impl;

 private:
  explicit CudnnAttention(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> p_;
  UnknownLengths unknown_ = UnknownLengths::kRead;
  bool dense_ = true;
  int variant_ = -1;
  std::string refusal_;
};

// Device metadata for the ragged tensors, from cu_seqlens[nseq+1]: seq[B] (sample lengths, 0 for
// b >= nseq), off_q/off_kv/off_st[B+1] = cu[min(b, nseq)] · (NH·D, NKV·D, NH). (attention_cudnn.cu)
void cudnn_ragged_metadata(const int32_t* cu, int nseq, int B, int64_t q_unit, int64_t kv_unit,
                           int64_t st_unit, int32_t* seq, int32_t* off_q, int32_t* off_kv,
                           int32_t* off_st, cudaStream_t stream);

// The dense graphs' stats [B, NH, S] <-> lse [B·S, NH] (to_bhs: lse -> stats). (attention_cudnn.cu)
void cudnn_stats_layout(const float* src, float* dst, int64_t B, int64_t NH, int64_t S, bool to_bhs,
                        cudaStream_t stream);

}  // namespace sf::cuda
