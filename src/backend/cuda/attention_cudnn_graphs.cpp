// defines: sf::cuda::cudnn::{build_forward, build_backward, bwd_workspace}
// (attention_cudnn_graphs.h).
#include "backend/cuda/attention_cudnn_graphs.h"

namespace sf::cuda::cudnn {
namespace {

// Score masks, as cudnn-frontend writes them: masked scores become -FLT_MAX.
Desc padding_mask(Graph& g, Desc s, const Dims& dims, Desc seq_q, Desc seq_kv) {
  Desc row = g.virt(kI32, dims), col = g.virt(kI32, dims);
  g.pointwise(kPwGenIndex, s, nullptr, row, nullptr, kI32, 2);
  g.pointwise(kPwGenIndex, s, nullptr, col, nullptr, kI32, 3);
  Desc row_ok = g.virt(kBool, dims), col_ok = g.virt(kBool, dims), ok = g.virt(kBool, dims);
  g.pointwise(kPwCmpLt, row, seq_q, row_ok, nullptr, kBool);
  g.pointwise(kPwCmpLt, col, seq_kv, col_ok, nullptr, kBool);
  g.pointwise(kPwAnd, row_ok, col_ok, ok, nullptr, kBool);
  Desc y = g.virt(kF32, dims);
  g.pointwise(kPwSelect, s, g.lowest(), y, ok);
  return y;
}

Desc causal_mask(Graph& g, Desc s, const Dims& dims) {
  Desc row = g.virt(kI32, dims), col = g.virt(kI32, dims), ok = g.virt(kBool, dims);
  g.pointwise(kPwGenIndex, s, nullptr, row, nullptr, kI32, 2);
  g.pointwise(kPwGenIndex, s, nullptr, col, nullptr, kI32, 3);
  g.pointwise(kPwCmpGe, row, col, ok, nullptr, kBool);
  Desc y = g.virt(kF32, dims);
  g.pointwise(kPwSelect, s, g.lowest(), y, ok);
  return y;
}

struct Inputs {  // the graph's index tensors
  Desc seq_q, seq_kv, off_q, off_kv, off_st;
};

Inputs index_tensors(Graph& g, const Layout& l) {
  const Dims one{1, 1, 1, 1};
  Inputs in{};
  if (!l.ragged) return in;
  in.off_q = g.tensor(kOffQ, kI32, {l.B + 1, 1, 1, 1}, one, false);
  in.off_kv = g.tensor(kOffKV, kI32, {l.B + 1, 1, 1, 1}, one, false);
  in.off_st = g.tensor(kOffSt, kI32, {l.B + 1, 1, 1, 1}, one, false);
  in.seq_q = g.tensor(kSeqQ, kI32, {l.B, 1, 1, 1}, one, false);
  in.seq_kv = g.tensor(kSeqKV, kI32, {l.B, 1, 1, 1}, one, false);
  return in;
}

}  // namespace

void build_forward(Graph& g, const Layout& l) {
  const Inputs in = index_tensors(g, l);
  Desc q = g.tensor(kQ, kBF16, l.q(), l.q_strides(), false, in.off_q);
  Desc kt = g.tensor(kK, kBF16, l.kv_t(), l.kv_t_strides(), false, in.off_kv);
  Desc v = g.tensor(kV, kBF16, l.kv(), l.kv_strides(), false, in.off_kv);
  Desc o = g.tensor(kO, kBF16, l.q(), l.q_strides(), false, in.off_q);
  Desc stats = g.tensor(kStats, kF32, l.rows(), l.rows_strides(), false, in.off_st);
  Desc scale = g.scalar(kScale);
  const Dims ss = l.scores(), rs = l.rows();

  Desc s1 = g.virt(kF32, ss), s2 = g.virt(kF32, ss);
  g.matmul(q, kt, s1, in.seq_q, in.seq_kv, nullptr, l.ragged);
  g.pointwise(kPwMul, s1, scale, s2);
  Desc s3 = l.ragged ? padding_mask(g, s2, ss, in.seq_q, in.seq_kv) : s2;
  Desc s4 = causal_mask(g, s3, ss);
  // softmax with stats: m = max, e = exp(s − m), z = Σe, stats = m + log z, P = e / z (bf16)
  Desc m = g.virt(kF32, rs), sub = g.virt(kF32, ss), e = g.virt(kF32, ss);
  Desc z = g.virt(kF32, rs), logz = g.virt(kF32, rs), p = g.virt(kBF16, ss);
  g.reduction(kReduceMax, s4, m);
  g.pointwise(kPwSub, s4, m, sub);
  g.pointwise(kPwExp, sub, nullptr, e);
  g.reduction(kReduceAdd, e, z);
  g.pointwise(kPwLog, z, nullptr, logz);
  g.pointwise(kPwAdd, m, logz, stats);
  g.pointwise(kPwDiv, e, z, p);
  g.matmul(p, v, o, in.seq_q, nullptr, in.seq_kv, false);
}

BwdWorkspace bwd_workspace(const Variant& v, bool ragged, int64_t T, int64_t B, int64_t S,
                           int64_t NH, int64_t NKV, int64_t D) {
  BwdWorkspace w;
  if (!ragged) w.stats = aligned(size_t(T * NH) * 4);
  const int64_t rows = v.ragged_acc ? T : B * S;
  w.acc = aligned(size_t(rows * NH * D) * 4);
  w.sums = aligned(size_t(rows * NH) * 4);
  // sized as the frontend sizes them (4 bytes an element, though they are declared BF16)
  if (v.full_heads_ws && NH != NKV) w.full = aligned(size_t(T * NH * D) * 4);
  return w;
}

void build_backward(Graph& g, const Layout& l, const Variant& var) {
  const Inputs in = index_tensors(g, l);
  Desc q = g.tensor(kQ, kBF16, l.q(), l.q_strides(), false, in.off_q);
  Desc kt = g.tensor(kK, kBF16, l.kv_t(), l.kv_t_strides(), false, in.off_kv);
  Desc vt = g.tensor(kV, kBF16, l.kv_t(), l.kv_t_strides(), false, in.off_kv);
  Desc o = g.tensor(kO, kBF16, l.q(), l.q_strides(), false, in.off_q);
  Desc dout = g.tensor(kDO, kBF16, l.q(), l.q_strides(), false, in.off_q);
  Desc stats = g.tensor(kStats, kF32, l.rows(), l.rows_strides(), false, in.off_st);
  Desc dq = g.tensor(kDQ, kBF16, l.q(), l.q_strides(), false, in.off_q);
  Desc dk = g.tensor(kDK, kBF16, l.kv(), l.kv_strides(), false, in.off_kv);
  Desc dv = g.tensor(kDV, kBF16, l.kv(), l.kv_strides(), false, in.off_kv);
  Desc scale = g.scalar(kScale);
  const Dims ss = l.scores(), rs = l.rows();
  const bool gqa = l.NH != l.NKV;

  // softmax_sum = rowsum(dO ∘ O), kept in the workspace in lse's layout
  Desc doo = g.virt(kF32, l.q(), {l.NH * l.S * l.D, l.S * l.D, l.NH * l.D, 1});
  Desc rsum = g.virt(kF32, rs);
  Desc ssum = var.ragged_acc ? g.tensor(kSoftmaxSum, kF32, rs, l.rows_strides(), false, in.off_st)
                             : g.tensor(kSoftmaxSum, kF32, rs, dense(rs), false);
  g.pointwise(kPwMul, dout, o, doo);
  g.reduction(kReduceAdd, doo, rsum);
  g.pointwise(kPwMul, rsum, g.scalar(kOne), ssum);

  // P = exp(scale·Q·Kᵀ − stats), masked as in the forward
  Desc s1 = g.virt(kF32, ss), s2 = g.virt(kF32, ss), s4 = g.virt(kF32, ss), e = g.virt(kF32, ss);
  g.matmul(q, kt, s1, in.seq_q, in.seq_kv, nullptr, false);
  g.pointwise(kPwMul, s1, scale, s2);
  Desc s3 = l.ragged ? padding_mask(g, s2, ss, in.seq_q, in.seq_kv) : s2;
  g.pointwise(kPwSub, s3, stats, s4);
  // the padding mask again after the stats (cudnn-frontend's workaround for cuDNN 9)
  Desc s5 = l.ragged ? padding_mask(g, s4, ss, in.seq_q, in.seq_kv) : s4;
  Desc s6 = causal_mask(g, s5, ss);
  g.pointwise(kPwExp, s6, nullptr, e);

  // dV = Pᵀ·dO (per query head, then summed over each group for GQA)
  Desc pt = g.virt(kBF16, ss, l.scores_t_strides());
  g.reshape(e, pt);
  if (gqa) {
    Desc dv_full = var.full_heads_ws
                       ? g.tensor(kDVFull, kBF16, l.q(), l.q_strides(), false, in.off_kv)
                       : g.virt(kBF16, l.q());
    g.matmul(pt, dout, dv_full, in.seq_kv, nullptr, in.seq_q, false);
    g.reduction(kReduceAdd, dv_full, dv);
  } else {
    g.matmul(pt, dout, dv, in.seq_kv, nullptr, in.seq_q, false);
  }

  // dS = P ∘ (dO·Vᵀ − softmax_sum) · scale
  Desc dp = g.virt(kF32, ss), dp2 = g.virt(kF32, ss), dp3 = g.virt(kF32, ss), ds = g.virt(kF32, ss);
  g.matmul(dout, vt, dp, in.seq_q, in.seq_kv, nullptr, false);
  g.pointwise(kPwSub, dp, ssum, dp2);
  g.pointwise(kPwMul, dp2, e, dp3);
  g.pointwise(kPwMul, dp3, scale, ds);

  // dK = dSᵀ·Q
  Desc dst = g.virt(kBF16, ss, l.scores_t_strides());
  g.reshape(ds, dst);
  if (gqa) {
    Desc dk_full = var.full_heads_ws
                       ? g.tensor(kDKFull, kBF16, l.q(), l.q_strides(), false, in.off_kv)
                       : g.virt(kBF16, l.q());
    g.matmul(dst, q, dk_full, in.seq_kv, nullptr, in.seq_q, false);
    g.reduction(kReduceAdd, dk_full, dk);
  } else {
    g.matmul(dst, q, dk, in.seq_kv, nullptr, in.seq_q, false);
  }

  // dQ = dS·K, accumulated in F32 (workspace, zeroed before each run), then converted
  Desc kr = g.virt(kBF16, l.kv(), l.kv_strides(), in.off_kv);
  g.reshape(kt, kr);
  Desc dq_acc = var.ragged_acc ? g.tensor(kDQAccum, kF32, l.q(), l.q_strides(), false, in.off_q)
                               : g.tensor(kDQAccum, kF32, l.q(), dense(l.q()), false);
  g.matmul(ds, kr, dq_acc, in.seq_q, nullptr, in.seq_kv, false);
  g.pointwise(kPwIdentity, dq_acc, nullptr, dq);
}

}  // namespace sf::cuda::cudnn
