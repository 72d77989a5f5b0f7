#include "engine/decode_layer.h"

#include <cmath>

#include "core/carver.h"

namespace sf {
namespace {

DecodeWorkspace carve_decode(const ModelSpec& m, int64_t T, DType dt, void* base, size_t* bytes) {
  Carver c(base);
  const int64_t C = m.hidden, Q = m.heads * m.head_dim, KV = m.kv_heads * m.head_dim,
                I = m.intermediate;
  DecodeWorkspace w;
  w.xn1 = c.take(dt, {T, C});
  w.rstd1 = c.take(DType::kF32, {T});
  w.q = c.take(dt, {T, Q});
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
  w.gate = c.take(dt, {T, I});
  w.up = c.take(dt, {T, I});
  w.act = c.take(dt, {T, I});
  w.tmp = c.take(dt, {T, C});
  if (bytes) *bytes = c.used();
  return w;
}

// Rows [from, from + n) of a [capacity, heads, D] cache.
Tensor cache_rows(const Tensor& cache, int64_t from, int64_t n) {
  const int64_t heads = cache.dim(1), D = cache.dim(2);
  return Tensor(static_cast<char*>(cache.data) + size_t(from * heads * D) * dtype_size(cache.dtype),
                cache.dtype, {n, heads, D});
}

}  // namespace

size_t DecodeWorkspace::bytes_needed(const ModelSpec& spec, int64_t tokens, DType dt) {
  size_t n = 0;
  carve_decode(spec, tokens, dt, nullptr, &n);
  return n;
}

DecodeWorkspace DecodeWorkspace::carve(const ModelSpec& spec, int64_t tokens, DType dt,
                                       void* base) {
  return carve_decode(spec, tokens, dt, base, nullptr);
}

void decode_layer_forward(Backend& be, const ModelSpec& m, const LayerParams& p,
                          const DecodeInputs& in, DecodeWorkspace& w, const LayerCache& cache,
                          Tensor x, Tensor y, Stream& s) {
  using LT = LayerTensor;
  const int64_t T = in.tokens, D = m.head_dim, NH = m.heads, NKV = m.kv_heads;
  SF_CHECK(in.past + T <= cache.k.dim(0), "decode_layer_forward: ", in.past, " cached + ", T,
           " new tokens exceed the cache's ", cache.k.dim(0));
  const float eps = float(m.rms_norm_eps);
  // The new rows of the cache are where k and v are produced: no copy afterwards.
  const Tensor k3 = cache_rows(cache.k, in.past, T), v3 = cache_rows(cache.v, in.past, T);
  const Tensor k2 = k3.reshaped({T, NKV * D}), v2 = v3.reshaped({T, NKV * D});
  be.rmsnorm_forward(w.xn1, w.rstd1, x, p[LT::kInputNorm], eps, s);
  // Qwen3 normalises each head of q and k before the rotation.
  be.linear_forward(m.qk_norm ? w.q_pre : w.q, w.xn1, p[LT::kQ], p[LT::kQBias], s);
  be.linear_forward(m.qk_norm ? w.k_pre : k2, w.xn1, p[LT::kK], p[LT::kKBias], s);
  be.linear_forward(v2, w.xn1, p[LT::kV], p[LT::kVBias], s);
  if (m.qk_norm) {
    be.rmsnorm_forward(w.q.reshaped({T * NH, D}), w.rstd_q, w.q_pre.reshaped({T * NH, D}),
                       p[LT::kQNorm], eps, s);
    be.rmsnorm_forward(k3.reshaped({T * NKV, D}), w.rstd_k, w.k_pre.reshaped({T * NKV, D}),
                       p[LT::kKNorm], eps, s);
  }
  const Tensor q3 = w.q.reshaped({T, NH, D}), attn3 = w.attn.reshaped({T, NH, D});
  be.rope_forward(q3, in.positions, in.inv_freq, s);
  be.rope_forward(k3, in.positions, in.inv_freq, s);
  const float scale = 1.0f / std::sqrt(float(D));
  if (in.past == 0) {
    be.attention_forward(attn3, w.lse, q3, k3, v3, in.cu_seqlens, scale, s);
  } else {
    be.attention_decode(attn3, q3, cache_rows(cache.k, 0, in.past + T),
                        cache_rows(cache.v, 0, in.past + T), scale, s);
  }
  be.linear_forward(w.tmp, w.attn, p[LT::kO], p[LT::kOBias], s);
  be.add_rmsnorm_forward(w.h, w.xn2, w.rstd2, x, w.tmp, p[LT::kPostNorm], eps, s);
  be.linear_forward(w.gate, w.xn2, p[LT::kGate], p[LT::kGateBias], s);
  be.linear_forward(w.up, w.xn2, p[LT::kUp], p[LT::kUpBias], s);
  be.swiglu_forward(w.act, w.gate, w.up, s);
  be.linear_forward(w.tmp, w.act, p[LT::kDown], p[LT::kDownBias], s);
  be.add(y, w.h, w.tmp, s);
}

}  // namespace sf
