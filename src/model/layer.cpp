#include "model/layer.h"

#include <algorithm>
#include <cmath>

#include "core/carver.h"

namespace sf {
namespace {

LayerWorkspace carve_layer(const ModelSpec& m, int64_t T, int64_t mlp_tokens, DType dt, void* base,
                           size_t* bytes) {
  Carver c(base);
  const int64_t C = m.hidden, Q = m.heads * m.head_dim, KV = m.kv_heads * m.head_dim,
                I = m.intermediate;
  // The MLP's T × intermediate tensors hold one block of F rows (all T unless the plan cut them).
  const int64_t F = mlp_tokens > 0 ? std::min(mlp_tokens, T) : T;
  LayerWorkspace w;
  w.xn1 = c.take(dt, {T, C});
  w.rstd1 = c.take(DType::kF32, {T});
  w.q = c.take(dt, {T, Q});
  w.k = c.take(dt, {T, KV});
  w.v = c.take(dt, {T, KV});
  if (m.qk_norm) {
    w.q_pre = c.take(dt, {T, Q});
    w.k_pre = c.take(dt, {T, KV});
    w.rstd_q = c.take(DType::kF32, {T * m.heads});
    w.rstd_k = c.take(DType::kF32, {T * m.kv_heads});
  }
  w.attn = c.take(dt, {T, Q});
  w.lse = c.take(DType::kF32, {T, m.heads});
  w.h = c.take(dt, {T, C});
  w.xn2 = c.take(dt, {T, C});
  w.rstd2 = c.take(DType::kF32, {T});
  w.gate = c.take(dt, {F, I});
  w.up = c.take(dt, {F, I});
  w.act = c.take(dt, {F, I});
  w.tmp = c.take(dt, {T, C});
  w.dxn = c.take(dt, {T, C});
  w.dq = c.take(dt, {T, Q});
  w.dk = c.take(dt, {T, KV});
  w.dv = c.take(dt, {T, KV});
  w.dattn = c.take(dt, {T, Q});
  w.dgate = c.take(dt, {F, I});
  w.dup = c.take(dt, {F, I});
  w.dact = c.take(dt, {F, I});
  if (m.qk_norm) {
    w.dq_pre = c.take(dt, {T, Q});
    w.dk_pre = c.take(dt, {T, KV});
  }
  if (bytes) *bytes = c.used();
  return w;
}

Tensor heads_view(Tensor t, int64_t T, int64_t heads, int64_t D) {
  return t.reshaped({T, heads, D});
}
// rows of one head each: the view q/k norms run over.
Tensor head_rows(Tensor t, int64_t T, int64_t heads, int64_t D) {
  return t.reshaped({T * heads, D});
}

Tensor row_block(Tensor t, int64_t begin, int64_t n) { return t.row_range(begin, n); }

// gate, up and act of rows [t0, t0 + n) of xn2, into the first n rows of the MLP's blocks.
void mlp_up(Backend& be, const LayerParams& p, LayerWorkspace& w, int64_t t0, int64_t n,
            Stream& s) {
  using LT = LayerTensor;
  const Tensor gate = row_block(w.gate, 0, n), up = row_block(w.up, 0, n);
  be.linear_forward(gate, row_block(w.xn2, t0, n), p[LT::kGate], p[LT::kGateBias], s);
  be.linear_forward(up, row_block(w.xn2, t0, n), p[LT::kUp], p[LT::kUpBias], s);
  be.swiglu_forward(row_block(w.act, 0, n), gate, up, s);
}

}  // namespace

size_t LayerWorkspace::bytes_needed(const ModelSpec& spec, int64_t tokens, DType dt,
                                    int64_t mlp_tokens) {
  size_t n = 0;
  carve_layer(spec, tokens, mlp_tokens, dt, nullptr, &n);
  return n;
}
LayerWorkspace LayerWorkspace::carve(const ModelSpec& spec, int64_t tokens, DType dt, void* base,
                                     int64_t mlp_tokens) {
  return carve_layer(spec, tokens, mlp_tokens, dt, base, nullptr);
}

LayerParams LayerParams::view(const UnitLayout& layout, void* base, DType dt) {
  LayerParams p;
  for (size_t k = 0; k < p.w.size(); ++k) p.w[k] = layout.view(int(k), base, dt);
  return p;
}

void layer_forward(Backend& be, const ModelSpec& m, const LayerParams& p, const StepInputs& in,
                   LayerWorkspace& w, Tensor x, Tensor y, Stream& s) {
  using LT = LayerTensor;
  const int64_t T = in.tokens, D = m.head_dim;
  const float eps = float(m.rms_norm_eps);
  be.rmsnorm_forward(w.xn1, w.rstd1, x, p[LT::kInputNorm], eps, s);
  // Qwen3 normalises each head of q and k before the rotation; keep the pre-norm values for
  // backward.
  Tensor q_out = m.qk_norm ? w.q_pre : w.q, k_out = m.qk_norm ? w.k_pre : w.k;
  be.linear_forward(q_out, w.xn1, p[LT::kQ], p[LT::kQBias], s);
  be.linear_forward(k_out, w.xn1, p[LT::kK], p[LT::kKBias], s);
  be.linear_forward(w.v, w.xn1, p[LT::kV], p[LT::kVBias], s);
  if (m.qk_norm) {
    be.rmsnorm_forward(head_rows(w.q, T, m.heads, D), w.rstd_q, head_rows(w.q_pre, T, m.heads, D),
                       p[LT::kQNorm], eps, s);
    be.rmsnorm_forward(head_rows(w.k, T, m.kv_heads, D), w.rstd_k,
                       head_rows(w.k_pre, T, m.kv_heads, D), p[LT::kKNorm], eps, s);
  }
  Tensor q3 = heads_view(w.q, T, m.heads, D), k3 = heads_view(w.k, T, m.kv_heads, D);
  be.rope_forward(q3, in.positions, in.inv_freq, s);
  be.rope_forward(k3, in.positions, in.inv_freq, s);
  const float scale = 1.0f / std::sqrt(float(D));
  be.attention_forward(heads_view(w.attn, T, m.heads, D), w.lse, q3, k3,
                       heads_view(w.v, T, m.kv_heads, D), in.cu_seqlens, scale, s);
  be.linear_forward(w.tmp, w.attn, p[LT::kO], p[LT::kOBias], s);
  be.add_rmsnorm_forward(w.h, w.xn2, w.rstd2, x, w.tmp, p[LT::kPostNorm], eps, s);
  // The MLP in blocks of F rows (one block unless the plan cut it). The recompute of backward
  // (y empty) keeps the blocks only where there is one; else the backward recomputes each.
  const int64_t F = w.gate.rows();
  if (y.empty()) {
    if (F == T) mlp_up(be, p, w, 0, T, s);
    return;
  }
  for (int64_t t0 = 0; t0 < T; t0 += F) {
    const int64_t n = std::min(F, T - t0);
    mlp_up(be, p, w, t0, n, s);
    be.linear_forward(row_block(w.tmp, t0, n), row_block(w.act, 0, n), p[LT::kDown],
                      p[LT::kDownBias], s);
  }
  be.add(y, w.h, w.tmp, s);
}

void layer_backward(Backend& be, const ModelSpec& m, const LayerParams& p, const LayerParams& g,
                    const StepInputs& in, LayerWorkspace& w, Tensor x, Tensor grad, Stream& s) {
  using LT = LayerTensor;
  const int64_t T = in.tokens, D = m.head_dim;
  // MLP: y = h + down(act), block by block (each block's gate, up, act recomputed first where
  // there are several); the weight gradients accumulate over the blocks.
  const int64_t F = w.gate.rows();
  for (int64_t t0 = 0; t0 < T; t0 += F) {
    const int64_t n = std::min(F, T - t0);
    if (F < T) mlp_up(be, p, w, t0, n, s);
    const Tensor dy = row_block(grad, t0, n), xn2 = row_block(w.xn2, t0, n),
                 dxn = row_block(w.dxn, t0, n), act = row_block(w.act, 0, n),
                 dact = row_block(w.dact, 0, n), dgate = row_block(w.dgate, 0, n),
                 dup = row_block(w.dup, 0, n);
    be.linear_backward_input(dact, dy, p[LT::kDown], false, s);
    be.linear_backward_weight(g[LT::kDown], g[LT::kDownBias], dy, act, s);
    be.swiglu_backward(dgate, dup, dact, row_block(w.gate, 0, n), row_block(w.up, 0, n), s);
    be.linear_backward_input(dxn, dgate, p[LT::kGate], false, s);
    be.linear_backward_input(dxn, dup, p[LT::kUp], true, s);
    be.linear_backward_weight(g[LT::kGate], g[LT::kGateBias], dgate, xn2, s);
    be.linear_backward_weight(g[LT::kUp], g[LT::kUpBias], dup, xn2, s);
  }
  // grad becomes ∂L/∂h: the residual path plus the post-attention norm's input gradient
  be.rmsnorm_backward(grad, g[LT::kPostNorm], w.dxn, w.h, p[LT::kPostNorm], w.rstd2, true, s);
  // attention: h = x + o(attn)
  be.linear_backward_input(w.dattn, grad, p[LT::kO], false, s);
  be.linear_backward_weight(g[LT::kO], g[LT::kOBias], grad, w.attn, s);
  const float scale = 1.0f / std::sqrt(float(D));
  Tensor dq3 = heads_view(w.dq, T, m.heads, D), dk3 = heads_view(w.dk, T, m.kv_heads, D);
  be.attention_backward(dq3, dk3, heads_view(w.dv, T, m.kv_heads, D),
                        heads_view(w.dattn, T, m.heads, D), heads_view(w.q, T, m.heads, D),
                        heads_view(w.k, T, m.kv_heads, D), heads_view(w.v, T, m.kv_heads, D),
                        heads_view(w.attn, T, m.heads, D), w.lse, in.cu_seqlens, scale, s);
  be.rope_backward(dq3, in.positions, in.inv_freq, s);
  be.rope_backward(dk3, in.positions, in.inv_freq, s);
  Tensor dq = w.dq, dk = w.dk;
  if (m.qk_norm) {
    // dq/dk are w.r.t. the normed heads: take them through the per-head norms to the projections.
    be.rmsnorm_backward(head_rows(w.dq_pre, T, m.heads, D), g[LT::kQNorm],
                        head_rows(w.dq, T, m.heads, D), head_rows(w.q_pre, T, m.heads, D),
                        p[LT::kQNorm], w.rstd_q, false, s);
    be.rmsnorm_backward(head_rows(w.dk_pre, T, m.kv_heads, D), g[LT::kKNorm],
                        head_rows(w.dk, T, m.kv_heads, D), head_rows(w.k_pre, T, m.kv_heads, D),
                        p[LT::kKNorm], w.rstd_k, false, s);
    dq = w.dq_pre;
    dk = w.dk_pre;
  }
  be.linear_backward_input(w.dxn, dq, p[LT::kQ], false, s);
  be.linear_backward_input(w.dxn, dk, p[LT::kK], true, s);
  be.linear_backward_input(w.dxn, w.dv, p[LT::kV], true, s);
  be.linear_backward_weight(g[LT::kQ], g[LT::kQBias], dq, w.xn1, s);
  be.linear_backward_weight(g[LT::kK], g[LT::kKBias], dk, w.xn1, s);
  be.linear_backward_weight(g[LT::kV], g[LT::kVBias], w.dv, w.xn1, s);
  // grad becomes ∂L/∂x: residual plus the input norm's gradient
  be.rmsnorm_backward(grad, g[LT::kInputNorm], w.dxn, x, p[LT::kInputNorm], w.rstd1, true, s);
}

OuterParams OuterParams::view(const ModelSpec& spec, const UnitLayout& layout, void* base,
                              DType dt) {
  OuterParams p;
  p.embed = layout.view(int(OuterTensor::kEmbed), base, dt);
  p.norm = layout.view(int(OuterTensor::kFinalNorm), base, dt);
  p.head = spec.tie_word_embeddings ? p.embed : layout.view(int(OuterTensor::kLmHead), base, dt);
  return p;
}

size_t HeadWorkspace::bytes_needed(const ModelSpec& spec, int64_t tokens, DType dt) {
  Carver c(nullptr);
  c.take(dt, {tokens, spec.hidden});
  c.take(DType::kF32, {tokens});
  c.take(dt, {tokens, spec.hidden});
  return c.used();
}
HeadWorkspace HeadWorkspace::carve(const ModelSpec& spec, int64_t tokens, DType dt, void* base) {
  Carver c(base);
  HeadWorkspace w;
  w.xn = c.take(dt, {tokens, spec.hidden});
  w.rstd = c.take(DType::kF32, {tokens});
  w.dxn = c.take(dt, {tokens, spec.hidden});
  return w;
}

void head_forward_backward(Backend& be, const ModelSpec& m, const OuterParams& p,
                           const OuterParams& g, const StepInputs& in, HeadWorkspace& w, Tensor x,
                           Tensor grad, Tensor loss_sum, float grad_scale, Stream& s) {
  be.rmsnorm_forward(w.xn, w.rstd, x, p.norm, float(m.rms_norm_eps), s);
  be.linear_cross_entropy(loss_sum, w.dxn, g.head, w.xn, p.head, in.targets, grad_scale, s);
  be.rmsnorm_backward(grad, g.norm, w.dxn, x, p.norm, w.rstd, false, s);
}

void head_logits(Backend& be, const ModelSpec& m, const OuterParams& p, const StepInputs& in,
                 HeadWorkspace& w, Tensor x, Tensor logits, Stream& s) {
  be.rmsnorm_forward(w.xn, w.rstd, x, p.norm, float(m.rms_norm_eps), s);
  be.linear_forward(logits, w.xn, p.head, Tensor(), s);
}

}  // namespace sf
