// defines: sf::DecodeWorkspace, sf::LayerCache, sf::DecodeInputs, decode_layer_forward — one
// decoder layer run for the new tokens of one sequence against that layer's K/V cache: the
// forward of model/layer.h (same ops, same order) without what only a backward needs, with k and
// v written straight into the cache rows that follow the cached ones and attention over all of
// them.
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "model/layer.h"
#include "model/spec.h"

namespace sf {

// Intermediates of one layer for T new tokens (compute dtype unless noted), carved from one
// buffer. Carving for fewer tokens than the buffer was sized for stays inside it, so a decoder
// carves for each pass's own T.
struct DecodeWorkspace {
  Tensor xn1, rstd1, q, q_pre, k_pre, rstd_q, rstd_k, attn, lse, h, xn2, rstd2, gate, up, act, tmp;

  static size_t bytes_needed(const ModelSpec& spec, int64_t tokens, DType dt);
  static DecodeWorkspace carve(const ModelSpec& spec, int64_t tokens, DType dt, void* base);
};

// One layer's cache: k and v of every position so far, [capacity, NKV, D] each, compute dtype
// (k after its norm and rotation, as attention reads it).
struct LayerCache {
  Tensor k, v;
};

struct DecodeInputs {
  int64_t past = 0;    // tokens already in the cache
  int64_t tokens = 0;  // T new ones, at positions past .. past+T-1
  Tensor positions;    // [T] I32
  Tensor cu_seqlens;   // [2] I32 = {0, T}: the first pass (past == 0) is plain causal attention
  Tensor inv_freq;     // [D/2] F32
};

// y = layer(x) for the new tokens x[T, C]; their k and v are appended to `cache`. The first pass
// runs the training path's attention_forward over its T tokens; later ones attention_decode over
// past + T keys.
void decode_layer_forward(Backend& be, const ModelSpec& spec, const LayerParams& p,
                          const DecodeInputs& in, DecodeWorkspace& ws, const LayerCache& cache,
                          Tensor x, Tensor y, Stream& s);

}  // namespace sf
