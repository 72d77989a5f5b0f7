// defines: sf::cpu::rmsnorm_forward, add_rmsnorm_forward, rmsnorm_backward
// Math of Hugging Face's LlamaRMSNorm in fp32:
//   variance = mean(x²);  rstd = rsqrt(variance + eps);  out = w · (x · rstd)
#include <cmath>
#include <vector>

#include "backend/cpu/ops.h"
#include "core/thread_pool.h"

namespace sf::cpu {
namespace {

void check_f32(const char* op, const char* name, const Tensor& t) {
  SF_CHECK(t.dtype == DType::kF32, op, ": ", name, " must be F32, got ", dtype_name(t.dtype));
}

void check_norm_shapes(const char* op, const Tensor& out, const Tensor& rstd, const Tensor& x,
                       const Tensor& w) {
  check_f32(op, "out", out);
  check_f32(op, "rstd", rstd);
  check_f32(op, "x", x);
  check_f32(op, "w", w);
  SF_CHECK(out.numel() == x.numel() && out.cols() == x.cols() && w.numel() == x.cols() &&
               rstd.numel() == x.rows(),
           op, ": shapes do not match out[R,C], rstd[R], x[R,C], w[C]: out ", out.shape_str(),
           ", rstd ", rstd.shape_str(), ", x ", x.shape_str(), ", w ", w.shape_str());
}

// One row: the mean of squares in double (torch's fp32 mean is a cascade sum, close to exact),
// then the rest in fp32 in HF's order.
inline void norm_row(float* out, float* rstd, const float* x, const float* w, int64_t C,
                     float eps) {
  double ss = 0.0;
  for (int64_t c = 0; c < C; ++c) ss += double(x[c]) * double(x[c]);
  const float variance = float(ss / double(C));
  const float r = float(1.0 / std::sqrt(double(variance + eps)));
  *rstd = r;
  for (int64_t c = 0; c < C; ++c) out[c] = w[c] * (x[c] * r);
}

}  // namespace

void rmsnorm_forward(Tensor out, Tensor rstd, Tensor x, Tensor w, float eps) {
  check_norm_shapes("rmsnorm_forward", out, rstd, x, w);
  const int64_t R = x.rows(), C = x.cols();
  const float *px = x.f32(), *pw = w.f32();
  float *po = out.f32(), *pr = rstd.f32();
  parallel_for(R, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) norm_row(po + r * C, pr + r, px + r * C, pw, C, eps);
  });
}

void add_rmsnorm_forward(Tensor sum, Tensor out, Tensor rstd, Tensor a, Tensor b, Tensor w,
                         float eps) {
  check_norm_shapes("add_rmsnorm_forward", out, rstd, a, w);
  check_f32("add_rmsnorm_forward", "sum", sum);
  check_f32("add_rmsnorm_forward", "b", b);
  SF_CHECK(sum.numel() == a.numel() && b.numel() == a.numel(), "add_rmsnorm_forward: sum ",
           sum.shape_str(), ", a ", a.shape_str(), ", b ", b.shape_str(),
           " must have the same shape");
  const int64_t R = a.rows(), C = a.cols();
  const float *pa = a.f32(), *pb = b.f32(), *pw = w.f32();
  float *ps = sum.f32(), *po = out.f32(), *pr = rstd.f32();
  parallel_for(R, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* s = ps + r * C;  // may alias a or b (the residual stream updated in place)
      for (int64_t c = 0; c < C; ++c) s[c] = pa[r * C + c] + pb[r * C + c];
      norm_row(po + r * C, pr + r, s, pw, C, eps);
    }
  });
}

// With h = x·r, out = w·h and r = (mean(x²) + eps)^-1/2, so ∂r/∂x_j = -r³·x_j / C:
//   dx_j = r·w_j·g_j − x_j · r³ · mean_i(w_i·g_i·x_i)
//   dw_j = Σ_rows g_j · h_j
void rmsnorm_backward(Tensor dx, Tensor dw, Tensor dout, Tensor x, Tensor w, Tensor rstd,
                      bool accumulate_dx) {
  check_norm_shapes("rmsnorm_backward", dout, rstd, x, w);
  check_f32("rmsnorm_backward", "dx", dx);
  check_f32("rmsnorm_backward", "dw", dw);
  SF_CHECK(dx.numel() == x.numel() && dw.numel() == w.numel(), "rmsnorm_backward: dx ",
           dx.shape_str(), " / dw ", dw.shape_str(), " must match x ", x.shape_str(), " / w ",
           w.shape_str());
  const int64_t R = x.rows(), C = x.cols();
  const float *px = x.f32(), *pw = w.f32(), *pg = dout.f32(), *pr = rstd.f32();
  float *pdx = dx.f32(), *pdw = dw.f32();
  // dw first (so dx may alias dout): threads own column ranges and sum over rows in double —
  // race-free and deterministic.
  parallel_for(C, 32, [&](int64_t c0, int64_t c1) {
    std::vector<double> acc(size_t(c1 - c0), 0.0);
    for (int64_t r = 0; r < R; ++r) {
      const float rs = pr[r];
      for (int64_t c = c0; c < c1; ++c) acc[size_t(c - c0)] += pg[r * C + c] * (px[r * C + c] * rs);
    }
    for (int64_t c = c0; c < c1; ++c) pdw[c] += float(acc[size_t(c - c0)]);
  });
  parallel_for(R, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float *xr = px + r * C, *gr = pg + r * C;
      float* dxr = pdx + r * C;
      const double rs = pr[r];
      double dot = 0.0;
      for (int64_t c = 0; c < C; ++c) dot += double(pw[c]) * gr[c] * xr[c];
      const double k = rs * rs * rs * dot / double(C);
      for (int64_t c = 0; c < C; ++c) {
        const float v = float(rs * double(pw[c]) * gr[c] - double(xr[c]) * k);
        dxr[c] = accumulate_dx ? dxr[c] + v : v;
      }
    }
  });
}

}  // namespace sf::cpu
