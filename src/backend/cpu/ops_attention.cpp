// defines: sf::cpu::attention_forward, attention_backward — causal grouped-query attention over
// packed samples, never holding a T×T matrix: one query row (forward, dQ) or one key row (dK, dV)
// at a time, P recomputed from the saved log-sum-exp.
#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>
#include <vector>

#include "backend/cpu/ops.h"
#include "core/thread_pool.h"

namespace sf::cpu {
namespace {

// Fixed-width inner blocks so that the compiler vectorises them at -O2 without -ffast-math;
// the 8 partial sums are then added in double.
constexpr int64_t kLanes = 8;

inline float dot(const float* a, const float* b, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t u = 0; u < kLanes; ++u) acc[u] += a[i + u] * b[i + u];
  double s = 0.0;
  for (; i < n; ++i) s += double(a[i]) * b[i];
  for (int64_t u = 0; u < kLanes; ++u) s += acc[u];
  return float(s);
}

inline void axpy(float* y, float a, const float* x, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t u = 0; u < kLanes; ++u) y[i + u] += a * x[i + u];
  for (; i < n; ++i) y[i] += a * x[i];
}

// Shapes and the sample of every token.
struct AttnShape {
  int64_t T, NH, NKV, D, group;
  std::vector<int32_t> start, end;  // token t attends to [start[t], t]; its sample ends at end[t]
};

AttnShape check_attention(const char* op, const Tensor& out, const Tensor& lse, const Tensor& q,
                          const Tensor& k, const Tensor& v, const Tensor& cu_seqlens) {
  for (auto [name, t] : {std::pair{"out", &out}, {"lse", &lse}, {"q", &q}, {"k", &k}, {"v", &v}})
    SF_CHECK(t->dtype == DType::kF32, op, ": ", name, " must be F32, got ", dtype_name(t->dtype));
  SF_CHECK(cu_seqlens.dtype == DType::kI32, op, ": cu_seqlens must be I32, got ",
           dtype_name(cu_seqlens.dtype));
  AttnShape s;
  s.T = q.dim(0), s.NH = q.dim(1), s.D = q.dim(2), s.NKV = k.dim(1);
  SF_CHECK(q.ndim == 3 && k.ndim == 3 && v.ndim == 3 && k.dim(0) == s.T && k.dim(2) == s.D &&
               v.dim(0) == s.T && v.dim(1) == s.NKV && v.dim(2) == s.D && s.NKV > 0 &&
               s.NH % s.NKV == 0 && out.numel() == q.numel() && out.cols() == s.D &&
               lse.numel() == s.T * s.NH,
           op, ": shapes do not match q[T,NH,D], k/v[T,NKV,D] (NH a multiple of NKV), out[T,NH,D],",
           " lse[T,NH]: q ", q.shape_str(), ", k ", k.shape_str(), ", v ", v.shape_str(), ", out ",
           out.shape_str(), ", lse ", lse.shape_str());
  s.group = s.NH / s.NKV;
  const int64_t n = cu_seqlens.numel();
  const int32_t* cu = cu_seqlens.i32();
  SF_CHECK(cu_seqlens.ndim == 1 && n >= 2 && cu[0] == 0 && cu[n - 1] == s.T, op, ": cu_seqlens ",
           cu_seqlens.shape_str(), " must start at 0 and end at T=", s.T, " (got first ",
           n > 0 ? cu[0] : -1, ", last ", n > 0 ? cu[n - 1] : -1, ")");
  s.start.resize(size_t(s.T));
  s.end.resize(size_t(s.T));
  for (int64_t i = 0; i + 1 < n; ++i) {
    SF_CHECK(cu[i] <= cu[i + 1] && cu[i + 1] <= s.T, op,
             ": cu_seqlens must be non-decreasing and within [0, T=", s.T, "], but cu_seqlens[", i,
             "]=", cu[i], ", cu_seqlens[", i + 1, "]=", cu[i + 1]);
  }
  for (int64_t i = 0; i + 1 < n; ++i) {
    for (int32_t t = cu[i]; t < cu[i + 1]; ++t) {
      s.start[size_t(t)] = cu[i];
      s.end[size_t(t)] = cu[i + 1];
    }
  }
  return s;
}

// Causal rows do unequal work (row t sees t - start + 1 keys). Visiting rows in the order
// 0, T-1, 1, T-2, … makes every contiguous chunk of tasks (what parallel_for hands a thread)
// carry about the same work.
inline int64_t balanced_row(int64_t r, int64_t T) { return (r % 2 == 0) ? r / 2 : T - 1 - r / 2; }

}  // namespace

void attention_forward(Tensor out, Tensor lse, Tensor q, Tensor k, Tensor v, Tensor cu_seqlens,
                       float scale) {
  const AttnShape s = check_attention("attention_forward", out, lse, q, k, v, cu_seqlens);
  const int64_t T = s.T, NH = s.NH, NKV = s.NKV, D = s.D;
  const float *pq = q.f32(), *pk = k.f32(), *pv = v.f32();
  float *po = out.f32(), *pl = lse.f32();
  parallel_for(NH * T, 16, [&](int64_t b, int64_t e) {
    std::vector<float> score(static_cast<size_t>(T)), acc(static_cast<size_t>(D));
    for (int64_t task = b; task < e; ++task) {
      const int64_t h = task / T, t = balanced_row(task % T, T), g = h / s.group;
      const int64_t j0 = s.start[size_t(t)], n = t - j0 + 1;
      const float* qr = pq + (t * NH + h) * D;
      float mx = -INFINITY;
      for (int64_t j = 0; j < n; ++j) {
        score[size_t(j)] = scale * dot(qr, pk + ((j0 + j) * NKV + g) * D, D);
        mx = std::max(mx, score[size_t(j)]);
      }
      double sum = 0.0;
      for (int64_t j = 0; j < n; ++j) sum += std::exp(double(score[size_t(j)]) - mx);
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t j = 0; j < n; ++j) {
        const float p = float(std::exp(double(score[size_t(j)]) - mx) / sum);
        axpy(acc.data(), p, pv + ((j0 + j) * NKV + g) * D, D);
      }
      std::copy(acc.begin(), acc.end(), po + (t * NH + h) * D);
      pl[t * NH + h] = float(mx + std::log(sum));
    }
  });
}

// With P = softmax(scale·q·kᵀ) recomputed as exp(scale·q·k − lse):
//   dP = dO·Vᵀ;  Δ_t = Σ_d dO∘O;  dS = P∘(dP − Δ);  dQ = scale·dS·K;  dK = scale·dSᵀ·Q;  dV = Pᵀ·dO
// dQ is computed per query row, dK/dV per key row (summed over the query heads of the kv group),
// so each thread owns what it writes.
void attention_backward(Tensor dq, Tensor dk, Tensor dv, Tensor dout, Tensor q, Tensor k, Tensor v,
                        Tensor out, Tensor lse, Tensor cu_seqlens, float scale) {
  const AttnShape s = check_attention("attention_backward", out, lse, q, k, v, cu_seqlens);
  for (auto [name, t, like] :
       {std::tuple{"dq", &dq, &q}, {"dk", &dk, &k}, {"dv", &dv, &v}, {"dout", &dout, &q}}) {
    SF_CHECK(t->dtype == DType::kF32 && t->numel() == like->numel() && t->cols() == s.D,
             "attention_backward: ", name, " ", t->shape_str(), " (", dtype_name(t->dtype),
             ") must be F32 and shaped like ", like->shape_str());
  }
  const int64_t T = s.T, NH = s.NH, NKV = s.NKV, D = s.D;
  const float *pq = q.f32(), *pk = k.f32(), *pv = v.f32(), *po = out.f32(), *pl = lse.f32();
  const float* pdo = dout.f32();
  float *pdq = dq.f32(), *pdk = dk.f32(), *pdv = dv.f32();

  std::vector<float> delta(size_t(T * NH));  // Δ[t,h] = dO[t,h]·O[t,h]
  parallel_for(T * NH, 256, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) delta[size_t(i)] = dot(pdo + i * D, po + i * D, D);
  });

  // dQ: one (head, query) row per task.
  parallel_for(NH * T, 16, [&](int64_t b, int64_t e) {
    std::vector<float> acc(static_cast<size_t>(D));
    for (int64_t task = b; task < e; ++task) {
      const int64_t h = task / T, t = balanced_row(task % T, T), g = h / s.group;
      const int64_t row = t * NH + h;
      const float *qr = pq + row * D, *gr = pdo + row * D;
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t j = s.start[size_t(t)]; j <= t; ++j) {
        const float *kr = pk + (j * NKV + g) * D, *vr = pv + (j * NKV + g) * D;
        const float p = float(std::exp(double(scale * dot(qr, kr, D)) - pl[row]));
        const float ds = p * (dot(gr, vr, D) - delta[size_t(row)]);
        axpy(acc.data(), ds, kr, D);
      }
      for (int64_t d = 0; d < D; ++d) pdq[row * D + d] = scale * acc[size_t(d)];
    }
  });

  // dK, dV: one (kv head, key) row per task, over the group's query heads and the later queries
  // of the same sample (key j is seen by queries j .. end-1).
  parallel_for(NKV * T, 16, [&](int64_t b, int64_t e) {
    std::vector<float> acck(static_cast<size_t>(D)), accv(static_cast<size_t>(D));
    for (int64_t task = b; task < e; ++task) {
      const int64_t g = task / T, j = T - 1 - balanced_row(task % T, T);
      const float *kr = pk + (j * NKV + g) * D, *vr = pv + (j * NKV + g) * D;
      std::fill(acck.begin(), acck.end(), 0.0f);
      std::fill(accv.begin(), accv.end(), 0.0f);
      for (int64_t h = g * s.group; h < (g + 1) * s.group; ++h) {
        for (int64_t t = j; t < s.end[size_t(j)]; ++t) {
          const int64_t row = t * NH + h;
          const float *qr = pq + row * D, *gr = pdo + row * D;
          const float p = float(std::exp(double(scale * dot(qr, kr, D)) - pl[row]));
          const float ds = p * (dot(gr, vr, D) - delta[size_t(row)]);
          axpy(acck.data(), ds, qr, D);
          axpy(accv.data(), p, gr, D);
        }
      }
      for (int64_t d = 0; d < D; ++d) {
        pdk[(j * NKV + g) * D + d] = scale * acck[size_t(d)];
        pdv[(j * NKV + g) * D + d] = accv[size_t(d)];
      }
    }
  });
}

}  // namespace sf::cpu
