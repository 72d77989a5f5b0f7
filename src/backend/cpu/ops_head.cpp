// defines: sf::cpu::linear_cross_entropy — lm_head + cross-entropy fused, in chunks of tokens so
// that T×V logits never exist; only the tokens with a target take part in the matmuls.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/ops.h"
#include "core/thread_pool.h"

namespace sf::cpu {
namespace {

constexpr int32_t kIgnoreIndex = -100;     // torch.nn.CrossEntropyLoss's default ignore_index
constexpr int64_t kChunkRows = 256;        // tokens per chunk ...
constexpr int64_t kChunkLogits = 1 << 23;  // ... but at most this many logits (32 MB of fp32)

}  // namespace

// For a valid token: loss = logsumexp(z) − z[target], z = x·wᵀ, and
// ∂loss/∂z = softmax(z) − onehot(target), so with G = grad_scale·(softmax − onehot) per row:
// dx = G·w and dw += Gᵀ·x. dx and dw may be empty (loss only, e.g. evaluation).
void linear_cross_entropy(Tensor loss_sum, Tensor dx, Tensor dw, Tensor x, Tensor w, Tensor targets,
                          float grad_scale) {
  SF_CHECK(loss_sum.dtype == DType::kF32 && x.dtype == DType::kF32 && w.dtype == DType::kF32 &&
               targets.dtype == DType::kI32,
           "linear_cross_entropy: expected F32 loss_sum/x/w and I32 targets, got ",
           dtype_name(loss_sum.dtype), ", ", dtype_name(x.dtype), ", ", dtype_name(w.dtype), ", ",
           dtype_name(targets.dtype));
  const int64_t T = x.rows(), C = x.cols(), V = w.dim(0);
  SF_CHECK(w.ndim == 2 && w.dim(1) == C && targets.numel() == T && loss_sum.numel() == 1,
           "linear_cross_entropy: shapes do not match x[T,C], w[V,C], targets[T], loss_sum[1]: x ",
           x.shape_str(), ", w ", w.shape_str(), ", targets ", targets.shape_str(), ", loss_sum ",
           loss_sum.shape_str());
  SF_CHECK(dx.empty() || (dx.dtype == DType::kF32 && dx.numel() == x.numel()),
           "linear_cross_entropy: dx ", dx.shape_str(), " must be F32 and shaped like x ",
           x.shape_str());
  SF_CHECK(dw.empty() || (dw.dtype == DType::kF32 && dw.numel() == w.numel()),
           "linear_cross_entropy: dw ", dw.shape_str(), " must be F32 and shaped like w ",
           w.shape_str());
  const int32_t* tgt = targets.i32();
  std::vector<int64_t> valid;  // tokens with a target, in order
  for (int64_t t = 0; t < T; ++t) {
    if (tgt[t] == kIgnoreIndex) continue;
    SF_CHECK(tgt[t] >= 0 && tgt[t] < V, "linear_cross_entropy: token ", t, " has target ", tgt[t],
             " outside the vocabulary [0, ", V, ") and is not the ignore index -100");
    valid.push_back(t);
  }
  if (!dx.empty()) fill_zero(dx);  // ignored tokens get a zero gradient

  const float* px = x.f32();
  const int64_t rows =
      std::max<int64_t>(1, std::min(kChunkRows, kChunkLogits / std::max<int64_t>(V, 1)));
  std::vector<float> xc(size_t(std::min<int64_t>(rows, int64_t(valid.size())) * C));
  std::vector<float> logits(size_t(std::min<int64_t>(rows, int64_t(valid.size())) * V));
  std::vector<float> dxc(dx.empty() ? 0 : xc.size());
  std::vector<double> row_loss(static_cast<size_t>(rows));
  double total = 0.0;
  for (size_t c0 = 0; c0 < valid.size(); c0 += size_t(rows)) {
    const int64_t R = std::min<int64_t>(rows, int64_t(valid.size() - c0));
    for (int64_t r = 0; r < R; ++r)  // gather the chunk's rows of x
      std::memcpy(&xc[size_t(r * C)], px + valid[c0 + size_t(r)] * C, size_t(C) * sizeof(float));
    Tensor xt(xc.data(), DType::kF32, {R, C}), zt(logits.data(), DType::kF32, {R, V});
    linear_forward(zt, xt, w, Tensor{});
    // Per row: logsumexp in double; the logits become G in place.
    parallel_for(R, 4, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        float* z = &logits[size_t(r * V)];
        const int32_t target = tgt[valid[c0 + size_t(r)]];
        const float mx = *std::max_element(z, z + V);
        double sum = 0.0;
        for (int64_t i = 0; i < V; ++i) sum += std::exp(double(z[i]) - mx);
        const double lse = mx + std::log(sum);
        row_loss[size_t(r)] = lse - z[target];
        const double p_target = std::exp(double(z[target]) - lse);
        for (int64_t i = 0; i < V; ++i) z[i] = float(grad_scale * std::exp(double(z[i]) - lse));
        z[target] = float(grad_scale * (p_target - 1.0));  // no fp32 cancellation when p ≈ 1
      }
    });
    for (int64_t r = 0; r < R; ++r) total += row_loss[size_t(r)];
    if (!dx.empty()) {
      Tensor dxt(dxc.data(), DType::kF32, {R, C});
      linear_backward_input(dxt, zt, w, false);
      float* pdx = dx.f32();
      for (int64_t r = 0; r < R; ++r)  // scatter back to the tokens' rows
        std::memcpy(pdx + valid[c0 + size_t(r)] * C, &dxc[size_t(r * C)],
                    size_t(C) * sizeof(float));
    }
    if (!dw.empty()) linear_backward_weight(Tensor(dw.data, DType::kF32, {V, C}), Tensor{}, zt, xt);
  }
  loss_sum.f32()[0] += float(total);
}

}  // namespace sf::cpu
