// defines: sf::cuda::cudnn::{Uid, Layout, Variant, kVariants, BwdWorkspace, bwd_workspace,
// build_forward, build_backward} — the SDPA forward and backward operation graphs, as
// cudnn-frontend (1.x) lowers its sdpa / sdpa_backward nodes for cuDNN 9.x: matmul, pointwise and
// reduction ops that cuDNN's engines recognise as fused flash attention. Forward: bmm1 (Q·Kᵀ, M/N
// overridden by the sample lengths) → ·scale → padding mask → causal mask (row ≥ col) → softmax
// with stats (max + log Σexp) → bmm2 (P·V). Backward: rowsum(dO∘O), P recomputed from the stats,
// dV = Pᵀ·dO, dS = P∘(dP − rowsum)·scale, dK = dSᵀ·Q, dQ = dS·K accumulated in F32 (zeroed
// first) then converted; for GQA, dK/dV come from per-query-head partials reduced over each
// group. Only enum values present since cuDNN 9.0 are used (GQA with ragged offsets needs 9.6).
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cuda/cudnn_graph.h"

namespace sf::cuda::cudnn {

// Unique ids of the graphs' non-virtual tensors (below Graph::kFirstLowest).
enum Uid : int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kStats,
  kDO,
  kDQ,
  kDK,
  kDV,
  kSeqQ,
  kSeqKV,
  kOffQ,
  kOffKV,
  kOffSt,
  kScale,
  kDQAccum,
  kSoftmaxSum,
  kOne,
  kDKFull,
  kDVFull,
};

inline int64_t pow2_at_least(int64_t n) {
  int64_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

constexpr size_t kAlign = 256;
inline size_t aligned(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// The ragged tensors of one call: dims [B, H, S, D], element strides of our [T, H, D] rows.
// ragged: samples of any length (offsets + padding mask); otherwise every sample has length S and
// the rows are plain [B, S, H, D] (no offsets, no masks but the causal one: the graph torch uses).
struct Layout {
  int64_t B, S, NH, NKV, D;
  bool ragged;
  Dims q() const { return {B, NH, S, D}; }
  Dims q_strides() const { return rows_of(NH); }
  Dims kv() const { return {B, NKV, S, D}; }
  Dims kv_strides() const { return rows_of(NKV); }
  Dims kv_t() const { return {B, NKV, D, S}; }  // Kᵀ / Vᵀ views of the same bytes
  Dims kv_t_strides() const {
    const Dims r = rows_of(NKV);
    return {r[0], r[1], r[3], r[2]};
  }
  Dims rows() const { return {B, NH, S, 1}; }
  // lse[T, NH] when ragged; cuDNN < 9.26 takes other stats only as packed [B, H, S, 1], so the
  // dense graphs use a scratch in that layout (cudnn_stats_layout converts).
  Dims rows_strides() const { return ragged ? Dims{S * NH, 1, NH, 1} : dense(rows()); }
  Dims scores() const { return {B, NH, S, S}; }
  Dims scores_t_strides() const { return {NH * S * S, S * S, 1, S}; }
  // strides of [B, H, S, D] over our [T, H, D] rows
  Dims rows_of(int64_t H) const { return {S * H * D, D, H * D, 1}; }
};

void build_forward(Graph& g, const Layout& l);

// How the backward's F32/partial tensors live in the workspace. cudnn-frontend uses the first
// (ragged, T-sized) layout when given max_total_seq_len and cuDNN >= 9.6, and then also keeps the
// GQA per-query-head dK/dV partials in the workspace; the others are its layouts without it.
// Plans are tried in this order until one finalizes.
struct Variant {
  bool ragged_acc;     // dQ accumulator and row sums as ragged [T, ...]; else dense [B, H, S, ...]
  bool full_heads_ws;  // GQA dK/dV partials in the workspace (ragged); else virtual
};
inline constexpr Variant kVariants[] = {{true, false}, {true, true}, {false, false}};

// Workspace bytes of the backward's own tensors, in this order: dQ accumulator, row sums, dK and
// dV partials; cuDNN's plan workspace follows.
struct BwdWorkspace {
  size_t acc = 0, sums = 0, full = 0, stats = 0;  // stats: the dense graphs' [B, H, S] scratch
  size_t total() const { return acc + sums + 2 * full + stats; }
};

BwdWorkspace bwd_workspace(const Variant& v, bool ragged, int64_t T, int64_t B, int64_t S,
                           int64_t NH, int64_t NKV, int64_t D);

void build_backward(Graph& g, const Layout& l, const Variant& var);

}  // namespace sf::cuda::cudnn
