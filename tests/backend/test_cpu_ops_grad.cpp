// Finite-difference gradient checks of the CPU reference ops (llama.cpp test-backend-ops style):
// random inputs, scalar loss L = Σ out·r for a random r, analytic gradients from the backward op
// compared with central differences (L evaluated by the fp32 forward op, summed in double).
// Attention has its own file (test_cpu_ops_attention.cpp).
//
// Threshold. err = ‖analytic − fd‖₂ / max(‖analytic‖₂, ‖fd‖₂) over the checked elements. With
// eps = 1e-3 the truncation error of central differences is O(eps²) ≈ 1e-6 relative, and the
// fp32 rounding noise of L (only the outputs that depend on the perturbed element change, each by
// a few ulps ≈ 1e-7 relative) divided by 2·eps is ≈ 1e-4 relative. 1e-3 leaves ~10x margin over
// that noise while a wrong term (a missing factor, a sign, a dropped sum) gives err ≳ 1e-1.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "backend/cpu/ops.h"

namespace sf::cpu {
namespace {

using Vec = std::vector<float>;
constexpr float kEps = 1e-3f;
constexpr double kMaxErr = 1e-3;

Vec random_vec(size_t n, std::mt19937& g, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> u(lo, hi);
  Vec v(n);
  for (float& x : v) x = u(g);
  return v;
}
Tensor f32(Vec& v, std::initializer_list<int64_t> dims) {
  return Tensor(v.data(), DType::kF32, dims);
}
Tensor i32(std::vector<int32_t>& v, std::initializer_list<int64_t> dims) {
  return Tensor(v.data(), DType::kI32, dims);
}
double dot(const Vec& a, const Vec& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += double(a[i]) * b[i];
  return s;
}

// Central differences of loss() w.r.t. x at up to max_checks random elements; returns the
// normalised error against `analytic`.
double fd_error(Vec& x, const Vec& analytic, const std::function<double()>& loss, float eps = kEps,
                size_t max_checks = 48) {
  std::mt19937 g(1234);
  std::vector<size_t> idx(x.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::shuffle(idx.begin(), idx.end(), g);
  idx.resize(std::min(max_checks, idx.size()));
  double num = 0.0, na = 0.0, nf = 0.0;
  for (size_t i : idx) {
    const float v = x[i];
    x[i] = v + eps;
    const float hi = x[i];
    const double lp = loss();
    x[i] = v - eps;
    const float lo = x[i];
    const double lm = loss();
    x[i] = v;
    const double fd = (lp - lm) / (double(hi) - double(lo));
    num += (fd - analytic[i]) * (fd - analytic[i]);
    na += double(analytic[i]) * analytic[i];
    nf += fd * fd;
  }
  return std::sqrt(num) / std::max({std::sqrt(na), std::sqrt(nf), 1e-12});
}

void check_linear_grads(int64_t M, int64_t K, int64_t N, bool with_bias) {
  std::mt19937 g{uint32_t(M * 1000 + K * 10 + N)};
  Vec x = random_vec(M * K, g), w = random_vec(N * K, g), b = random_vec(N, g);
  Vec r = random_vec(M * N, g), y(M * N);
  auto loss = [&] {
    linear_forward(f32(y, {M, N}), f32(x, {M, K}), f32(w, {N, K}),
                   with_bias ? f32(b, {N}) : Tensor{});
    return dot(y, r);
  };
  Vec dx(M * K), dw(N * K, 0.0f), db(N, 0.0f);
  linear_backward_input(f32(dx, {M, K}), f32(r, {M, N}), f32(w, {N, K}), false);
  linear_backward_weight(f32(dw, {N, K}), with_bias ? f32(db, {N}) : Tensor{}, f32(r, {M, N}),
                         f32(x, {M, K}));
  // L is linear in each of x, w, b: central differences carry no truncation error, so a larger
  // eps only divides the rounding noise of the K-long dot products (≈4e-4 at eps = 1e-3, K = 300).
  const float eps = 1e-2f;
  EXPECT_LT(fd_error(x, dx, loss, eps), kMaxErr) << "dx M=" << M << " K=" << K << " N=" << N;
  EXPECT_LT(fd_error(w, dw, loss, eps), kMaxErr) << "dw M=" << M << " K=" << K << " N=" << N;
  if (with_bias) {
    EXPECT_LT(fd_error(b, db, loss, eps), kMaxErr) << "dbias";
  }
}

TEST(CpuOpsGrad, Linear) {
  check_linear_grads(7, 13, 11, true);    // below one micro-tile in every dimension
  check_linear_grads(70, 300, 20, true);  // > one M block (64) and > one depth block (256)
  check_linear_grads(5, 8, 9, false);
}

TEST(CpuOpsGrad, Embedding) {
  const int64_t T = 9, V = 6, C = 5;
  std::mt19937 g(7);
  std::vector<int32_t> ids = {3, 1, 3, 0, 5, 3, 1, 2, 3};  // repeats must accumulate
  Vec table = random_vec(V * C, g), r = random_vec(T * C, g), out(T * C);
  auto loss = [&] {
    embedding_forward(f32(out, {T, C}), i32(ids, {T}), f32(table, {V, C}));
    return dot(out, r);
  };
  Vec dtable(V * C, 0.0f);
  embedding_backward(f32(dtable, {V, C}), i32(ids, {T}), f32(r, {T, C}));
  EXPECT_LT(fd_error(table, dtable, loss, kEps, 1000), kMaxErr);
}

TEST(CpuOpsGrad, RmsNorm) {
  const int64_t R = 5, C = 37;
  std::mt19937 g(11);
  Vec x = random_vec(R * C, g), w = random_vec(C, g, 0.5f, 1.5f), r = random_vec(R * C, g);
  Vec out(R * C), rstd(R);
  auto loss = [&] {
    rmsnorm_forward(f32(out, {R, C}), f32(rstd, {R}), f32(x, {R, C}), f32(w, {C}), 1e-5f);
    return dot(out, r);
  };
  loss();
  Vec dx(R * C), dw(C, 0.0f);
  rmsnorm_backward(f32(dx, {R, C}), f32(dw, {C}), f32(r, {R, C}), f32(x, {R, C}), f32(w, {C}),
                   f32(rstd, {R}), false);
  EXPECT_LT(fd_error(x, dx, loss), kMaxErr) << "dx";
  EXPECT_LT(fd_error(w, dw, loss), kMaxErr) << "dw";
}

// The fused residual add: both outputs (sum feeds the next residual, out the next sublayer) are
// in the loss, so da = db = r_sum + ∂norm — also exercises accumulate_dx.
TEST(CpuOpsGrad, AddRmsNorm) {
  const int64_t R = 4, C = 24;
  std::mt19937 g(12);
  Vec a = random_vec(R * C, g), b = random_vec(R * C, g), w = random_vec(C, g, 0.5f, 1.5f);
  Vec r_out = random_vec(R * C, g), r_sum = random_vec(R * C, g);
  Vec sum(R * C), out(R * C), rstd(R);
  auto loss = [&] {
    add_rmsnorm_forward(f32(sum, {R, C}), f32(out, {R, C}), f32(rstd, {R}), f32(a, {R, C}),
                        f32(b, {R, C}), f32(w, {C}), 1e-6f);
    return dot(out, r_out) + dot(sum, r_sum);
  };
  loss();
  Vec dsum = r_sum, dw(C, 0.0f);
  rmsnorm_backward(f32(dsum, {R, C}), f32(dw, {C}), f32(r_out, {R, C}), f32(sum, {R, C}),
                   f32(w, {C}), f32(rstd, {R}), true);
  EXPECT_LT(fd_error(a, dsum, loss), kMaxErr) << "da";
  EXPECT_LT(fd_error(b, dsum, loss), kMaxErr) << "db";
  EXPECT_LT(fd_error(w, dw, loss), kMaxErr) << "dw";
}

void check_rope_grads(int64_t T, int64_t H, int64_t D) {
  std::mt19937 g{uint32_t(D)};
  Vec x = random_vec(T * H * D, g), r = random_vec(T * H * D, g), inv_freq(D / 2);
  for (int64_t i = 0; i < D / 2; ++i) inv_freq[i] = float(std::pow(10000.0, -2.0 * i / D));
  std::vector<int32_t> pos(T);
  for (int64_t t = 0; t < T; ++t) pos[t] = int32_t(t * 37 % 1000);
  Vec y;
  auto loss = [&] {
    y = x;
    rope_forward(f32(y, {T, H, D}), i32(pos, {T}), f32(inv_freq, {D / 2}));
    return dot(y, r);
  };
  Vec dx = r;
  rope_backward(f32(dx, {T, H, D}), i32(pos, {T}), f32(inv_freq, {D / 2}));
  EXPECT_LT(fd_error(x, dx, loss), kMaxErr) << "D=" << D;
}

TEST(CpuOpsGrad, Rope) {
  check_rope_grads(6, 3, 16);
  check_rope_grads(5, 2, 32);
}

TEST(CpuOpsGrad, SwiGlu) {
  const int64_t n = 61;
  std::mt19937 g(13);
  Vec gate = random_vec(n, g, -4.0f, 4.0f), up = random_vec(n, g, -2.0f, 2.0f);
  Vec r = random_vec(n, g), out(n);
  auto loss = [&] {
    swiglu_forward(f32(out, {n}), f32(gate, {n}), f32(up, {n}));
    return dot(out, r);
  };
  Vec dgate(n), dup(n);
  swiglu_backward(f32(dgate, {n}), f32(dup, {n}), f32(r, {n}), f32(gate, {n}), f32(up, {n}));
  EXPECT_LT(fd_error(gate, dgate, loss, kEps, 100), kMaxErr) << "dgate";
  EXPECT_LT(fd_error(up, dup, loss, kEps, 100), kMaxErr) << "dup";
}

// L = grad_scale · loss_sum. loss_sum is one fp32 accumulator (half an ulp of a loss of ~20 is
// 1e-6), so eps = 1e-2 here keeps that rounding at ~5e-5 of the gradient; the O(eps²)
// truncation error is ~1e-5 for the smooth log-sum-exp.
TEST(CpuOpsGrad, LinearCrossEntropy) {
  const int64_t T = 9, C = 12, V = 23;
  const float grad_scale = 0.37f;
  std::mt19937 g(14);
  Vec x = random_vec(T * C, g), w = random_vec(V * C, g);
  std::vector<int32_t> targets = {4, -100, 0, 22, 7, -100, 7, 13, 1};
  auto loss = [&] {
    Vec loss_sum = {0.0f};
    linear_cross_entropy(f32(loss_sum, {1}), Tensor{}, Tensor{}, f32(x, {T, C}), f32(w, {V, C}),
                         i32(targets, {T}), 1.0f);
    return double(grad_scale) * loss_sum[0];
  };
  Vec loss_sum = {0.0f}, dx(T * C, 1.0f), dw(V * C, 0.0f);
  linear_cross_entropy(f32(loss_sum, {1}), f32(dx, {T, C}), f32(dw, {V, C}), f32(x, {T, C}),
                       f32(w, {V, C}), i32(targets, {T}), grad_scale);
  EXPECT_LT(fd_error(x, dx, loss, 1e-2f, 200), kMaxErr) << "dx";
  EXPECT_LT(fd_error(w, dw, loss, 1e-2f, 200), kMaxErr) << "dw";
  for (int64_t c = 0; c < C; ++c) EXPECT_EQ(dx[1 * C + c], 0.0f) << "ignored token keeps dx = 0";
}

}  // namespace
}  // namespace sf::cpu
