// defines: sf::cpu::attention_decode — causal GQA attention of the last Tq tokens of one sequence
// against all Tk of its keys and values (a KV cache): query i sees keys 0 .. Tk-Tq+i.
//
// The arithmetic is attention_forward's (ops_attention.cpp), term for term: the same 8-lane dot
// products, scores in fp32, the max and the exp-sum in double, fp32 weights into an 8-lane axpy.
// So with Tq == Tk it gives attention_forward's bits (a test holds it to that), and a decoder
// built on it gives the logits of the full forward, not merely close ones.
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "backend/cpu/ops.h"
#include "core/thread_pool.h"

namespace sf::cpu {
namespace {

constexpr int64_t kLanes = 8;  // as ops_attention.cpp: vectorised at -O2, partials added in double

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

}  // namespace

void attention_decode(Tensor out, Tensor q, Tensor k, Tensor v, float scale) {
  const char* op = "attention_decode";
  for (auto [name, t] : {std::pair{"out", &out}, {"q", &q}, {"k", &k}, {"v", &v}})
    SF_CHECK(t->dtype == DType::kF32, op, ": ", name, " must be F32, got ", dtype_name(t->dtype));
  const int64_t Tq = q.dim(0), NH = q.dim(1), D = q.dim(2), Tk = k.dim(0), NKV = k.dim(1);
  SF_CHECK(q.ndim == 3 && k.ndim == 3 && v.ndim == 3 && k.dim(2) == D && v.dim(0) == Tk &&
               v.dim(1) == NKV && v.dim(2) == D && NKV > 0 && NH % NKV == 0 && Tq >= 1 &&
               Tk >= Tq && out.numel() == q.numel() && out.cols() == D,
           op, ": shapes do not match q[Tq,NH,D], k/v[Tk,NKV,D] with Tk >= Tq >= 1 (NH a ",
           "multiple of NKV), out[Tq,NH,D]: q ", q.shape_str(), ", k ", k.shape_str(), ", v ",
           v.shape_str(), ", out ", out.shape_str());
  const int64_t group = NH / NKV, past = Tk - Tq;
  const float *pq = q.f32(), *pk = k.f32(), *pv = v.f32();
  float* po = out.f32();
  parallel_for(NH * Tq, 16, [&](int64_t b, int64_t e) {
    std::vector<float> score(static_cast<size_t>(Tk)), acc(static_cast<size_t>(D));
    for (int64_t task = b; task < e; ++task) {
      const int64_t h = task / Tq, i = task % Tq, g = h / group, n = past + i + 1;
      const float* qr = pq + (i * NH + h) * D;
      float mx = -INFINITY;
      for (int64_t j = 0; j < n; ++j) {
        score[size_t(j)] = scale * dot(qr, pk + (j * NKV + g) * D, D);
        mx = std::max(mx, score[size_t(j)]);
      }
      double sum = 0.0;
      for (int64_t j = 0; j < n; ++j) sum += std::exp(double(score[size_t(j)]) - mx);
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t j = 0; j < n; ++j) {
        const float p = float(std::exp(double(score[size_t(j)]) - mx) / sum);
        axpy(acc.data(), p, pv + (j * NKV + g) * D, D);
      }
      std::copy(acc.begin(), acc.end(), po + (i * NH + h) * D);
    }
  });
}

}  // namespace sf::cpu
