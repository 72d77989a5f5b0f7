// defines: sf::LayerWorkspace, sf::StepInputs, layer_forward, layer_backward,
// head_forward_backward, head_logits — one decoder layer and the head, written once against
// sf::Backend.
//
// A Llama-family layer (Llama, Mistral, Qwen2, Qwen3 differ only in biases and q/k norms):
//   xn1 = rmsnorm(x)                  q,k,v = xn1·Wᵀ (+b)   [Qwen3: q,k = rmsnorm_D(q),
//   rmsnorm_D(k)] q,k = rope(q,k)                   a = attention(q,k,v)  h = x + a·Woᵀ (+bo) xn2 =
//   rmsnorm(h)                  y = h + Wd·(silu(Wg·xn2) ∘ Wu·xn2)
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "model/layout.h"
#include "model/spec.h"

namespace sf {

// Per-step inputs every layer reads, already on the device.
struct StepInputs {
  int64_t tokens = 0;  // T
  Tensor ids;          // [T] I32
  Tensor targets;      // [T] I32, next-token labels, -100 = ignored
  Tensor positions;    // [T] I32, restart at each packed sample
  Tensor cu_seqlens;   // [nseq+1] I32
  Tensor inv_freq;     // [D/2] F32
};

// Intermediates of one layer for T tokens (compute dtype unless noted), carved from one buffer.
struct LayerWorkspace {
  Tensor xn1, rstd1, q, k, v, q_pre, k_pre, rstd_q, rstd_k, attn, lse, h, xn2, rstd2, gate, up, act,
      tmp;
  // gradients of the intermediates
  Tensor dxn, dq, dk, dv, dattn, dgate, dup, dact, dq_pre, dk_pre;

  // `mlp_tokens` > 0 (and < tokens): the MLP's T × intermediate tensors (gate, up, act and their
  // gradients) hold blocks of that many rows, the MLP runs block by block (plan: F).
  static size_t bytes_needed(const ModelSpec& spec, int64_t tokens, DType dt,
                             int64_t mlp_tokens = 0);
  static LayerWorkspace carve(const ModelSpec& spec, int64_t tokens, DType dt, void* base,
                              int64_t mlp_tokens = 0);
};

// Views of one layer's tensors inside a cache unit's flat parameter / gradient buffers.
struct LayerParams {
  std::array<Tensor, size_t(LayerTensor::kCount)> w;
  Tensor operator[](LayerTensor t) const { return w[size_t(t)]; }
  static LayerParams view(const UnitLayout& layout, void* base, DType dt);
};

// y = layer(x). With `output` empty only the intermediates are produced (the recompute of
// backward).
void layer_forward(Backend& be, const ModelSpec& spec, const LayerParams& p, const StepInputs& in,
                   LayerWorkspace& ws, Tensor x, Tensor y, Stream& s);

// On entry `grad` holds ∂L/∂y, on return ∂L/∂x. Parameter gradients are added to `g` (F32).
// Expects the intermediates of layer_forward(x) in `ws`.
void layer_backward(Backend& be, const ModelSpec& spec, const LayerParams& p, const LayerParams& g,
                    const StepInputs& in, LayerWorkspace& ws, Tensor x, Tensor grad, Stream& s);

// The outer unit's tensors: embedding, final norm, head (the embedding itself when tied).
struct OuterParams {
  Tensor embed, norm, head;
  static OuterParams view(const ModelSpec& spec, const UnitLayout& layout, void* base, DType dt);
};

// Head workspace: the normed hidden states and their rstd.
struct HeadWorkspace {
  Tensor xn, rstd, dxn;
  static size_t bytes_needed(const ModelSpec& spec, int64_t tokens, DType dt);
  static HeadWorkspace carve(const ModelSpec& spec, int64_t tokens, DType dt, void* base);
};

// loss_sum += Σ CE over valid targets; grad = ∂(grad_scale·loss_sum)/∂x_L; head/norm gradients
// added to g.
void head_forward_backward(Backend& be, const ModelSpec& spec, const OuterParams& p,
                           const OuterParams& g, const StepInputs& in, HeadWorkspace& ws, Tensor x,
                           Tensor grad, Tensor loss_sum, float grad_scale, Stream& s);

// logits[T,V] = head(norm(x)) — for evaluation and tests (materialises T×V).
void head_logits(Backend& be, const ModelSpec& spec, const OuterParams& p, const StepInputs& in,
                 HeadWorkspace& ws, Tensor x, Tensor logits, Stream& s);

}  // namespace sf
