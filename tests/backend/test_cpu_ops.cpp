// Forward checks of the CPU reference ops against naive double-precision references, and the
// errors they raise. Gradients: test_cpu_ops_grad.cpp; attention: test_cpu_ops_attention.cpp.
//
// Tolerances: results are compared by normalised mean squared error,
// nmse = Σ(out − ref)² / Σ ref², as llama.cpp's test-backend-ops does. An fp32 op that is
// correct to a few ulps gives nmse ≈ 1e-14; 1e-11 (relative RMS error 3e-6) leaves room for long
// fp32 dot products while any wrong term gives nmse ≳ 1e-4.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/ops.h"

namespace sf::cpu {
namespace {

using Vec = std::vector<float>;
constexpr double kMaxNmse = 1e-11;

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
double nmse(const Vec& out, const std::vector<double>& ref) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    num += (out[i] - ref[i]) * (out[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return num / std::max(den, 1e-30);
}
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}
#define EXPECT_ERROR_HAS(expr, ...)                                                         \
  do {                                                                                      \
    const std::string msg_ = error_of([&] { expr; });                                       \
    for (const char* part : {__VA_ARGS__})                                                  \
      EXPECT_NE(msg_.find(part), std::string::npos) << "'" << part << "' not in: " << msg_; \
  } while (0)

TEST(CpuOps, ConvertBf16RoundsToNearestEven) {
  Vec src = {1.0f,
             1.00390625f /* tie, even stays */,
             1.01171875f /* tie, rounds up */,
             std::nextafter(1.00390625f, 2.0f) /* above the tie */,
             -3.5f,
             INFINITY,
             1e-40f};
  std::vector<uint16_t> dst(src.size());
  convert(Tensor(dst.data(), DType::kBF16, {int64_t(src.size())}), f32(src, {int64_t(src.size())}));
  const std::vector<uint16_t> want = {0x3f80, 0x3f80, 0x3f82, 0x3f81, 0xc060, 0x7f80, 0x0001};
  EXPECT_EQ(dst, want);
  Vec back(src.size());
  convert(f32(back, {int64_t(src.size())}),
          Tensor(dst.data(), DType::kBF16, {int64_t(src.size())}));
  EXPECT_EQ(back[0], 1.0f);
  EXPECT_EQ(back[2], 1.015625f);
}

// Every finite half converts to fp32 and back unchanged; ties between halves round to even.
TEST(CpuOps, ConvertF16RoundTripAndTies) {
  std::vector<uint16_t> all, back(1 << 16);
  for (uint32_t h = 0; h < (1u << 16); ++h) all.push_back(uint16_t(h));
  Vec f(all.size());
  convert(f32(f, {int64_t(f.size())}), Tensor(all.data(), DType::kF16, {int64_t(all.size())}));
  convert(Tensor(back.data(), DType::kF16, {int64_t(back.size())}), f32(f, {int64_t(f.size())}));
  for (uint32_t h = 0; h < (1u << 16); ++h) {
    if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu)) continue;  // NaN payloads are not kept
    ASSERT_EQ(back[h], h) << "half 0x" << std::hex << h;
  }
  Vec ties = {1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048,    65519.0f,
              65520.0f,           std::ldexp(1.0f, -25), std::ldexp(1.5f, -25)};
  std::vector<uint16_t> h(ties.size());
  convert(Tensor(h.data(), DType::kF16, {int64_t(h.size())}), f32(ties, {int64_t(ties.size())}));
  EXPECT_EQ(h, (std::vector<uint16_t>{0x3c00, 0x3c02, 0x7bff, 0x7c00, 0x0000, 0x0001}));
}

TEST(CpuOps, AddAndFillZero) {
  std::mt19937 g(1);
  Vec a = random_vec(1000, g), b = random_vec(1000, g), out(1000);
  add(f32(out, {10, 100}), f32(a, {10, 100}), f32(b, {10, 100}));
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(out[i], a[i] + b[i]);
  fill_zero(f32(out, {10, 100}));
  for (float v : out) ASSERT_EQ(v, 0.0f);
}

TEST(CpuOps, LinearMatchesTripleLoop) {
  for (auto [M, K, N] :
       {std::array<int64_t, 3>{1, 1, 1}, {5, 7, 3}, {67, 259, 29}, {130, 64, 300}}) {
    std::mt19937 g(uint32_t(M + K + N));
    Vec x = random_vec(M * K, g), w = random_vec(N * K, g), b = random_vec(N, g);
    Vec dy = random_vec(M * N, g), y(M * N), dx0 = random_vec(M * K, g), dx = dx0;
    Vec dw0 = random_vec(N * K, g), dw = dw0, db0 = random_vec(N, g), db = db0;
    linear_forward(f32(y, {M, N}), f32(x, {M, K}), f32(w, {N, K}), f32(b, {N}));
    linear_backward_input(f32(dx, {M, K}), f32(dy, {M, N}), f32(w, {N, K}), true);
    linear_backward_weight(f32(dw, {N, K}), f32(db, {N}), f32(dy, {M, N}), f32(x, {M, K}));
    std::vector<double> ry(M * N), rdx(M * K), rdw(N * K), rdb(N);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double s = b[n];
        for (int64_t k = 0; k < K; ++k) s += double(x[m * K + k]) * w[n * K + k];
        ry[m * N + n] = s;
      }
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k = 0; k < K; ++k) {
        double s = dx0[m * K + k];  // accumulate = true
        for (int64_t n = 0; n < N; ++n) s += double(dy[m * N + n]) * w[n * K + k];
        rdx[m * K + k] = s;
      }
    for (int64_t n = 0; n < N; ++n) {
      double sb = db0[n];
      for (int64_t m = 0; m < M; ++m) sb += dy[m * N + n];
      rdb[n] = sb;
      for (int64_t k = 0; k < K; ++k) {
        double s = dw0[n * K + k];
        for (int64_t m = 0; m < M; ++m) s += double(dy[m * N + n]) * x[m * K + k];
        rdw[n * K + k] = s;
      }
    }
    EXPECT_LT(nmse(y, ry), kMaxNmse) << M << "x" << K << "x" << N;
    EXPECT_LT(nmse(dx, rdx), kMaxNmse) << M << "x" << K << "x" << N;
    EXPECT_LT(nmse(dw, rdw), kMaxNmse) << M << "x" << K << "x" << N;
    EXPECT_LT(nmse(db, rdb), kMaxNmse) << M << "x" << K << "x" << N;
    // accumulate = false overwrites whatever dx held
    linear_backward_input(f32(dx, {M, K}), f32(dy, {M, N}), f32(w, {N, K}), false);
    for (int64_t i = 0; i < M * K; ++i) rdx[i] -= dx0[i];
    EXPECT_LT(nmse(dx, rdx), kMaxNmse);
  }
}

TEST(CpuOps, EmbeddingGathersAndScattersRepeatedIds) {
  const int64_t V = 5, C = 3;
  Vec table(V * C);
  for (int64_t i = 0; i < V * C; ++i) table[i] = float(i);
  std::vector<int32_t> ids = {4, 0, 4, 4};
  Vec out(4 * C), dout = {1, 2, 3, 10, 20, 30, 100, 200, 300, 1000, 2000, 3000};
  embedding_forward(f32(out, {4, C}), i32(ids, {4}), f32(table, {V, C}));
  EXPECT_EQ(out, (Vec{12, 13, 14, 0, 1, 2, 12, 13, 14, 12, 13, 14}));
  Vec dtable(V * C, 0.5f);
  embedding_backward(f32(dtable, {V, C}), i32(ids, {4}), f32(dout, {4, C}));
  EXPECT_EQ(dtable, (Vec{10.5f, 20.5f, 30.5f, .5f, .5f, .5f, .5f, .5f, .5f, .5f, .5f, .5f, 1101.5f,
                         2202.5f, 3303.5f}));
}

TEST(CpuOps, RmsNormMatchesHf) {
  const int64_t R = 6, C = 45;
  const float eps = 1e-6f;
  std::mt19937 g(3);
  Vec a = random_vec(R * C, g, -3, 3), b = random_vec(R * C, g), w = random_vec(C, g);
  Vec sum(R * C), out(R * C), rstd(R), out2(R * C), rstd2(R);
  add_rmsnorm_forward(f32(sum, {R, C}), f32(out, {R, C}), f32(rstd, {R}), f32(a, {R, C}),
                      f32(b, {R, C}), f32(w, {C}), eps);
  rmsnorm_forward(f32(out2, {2, 3, C}), f32(rstd2, {2, 3}), f32(sum, {2, 3, C}), f32(w, {C}), eps);
  std::vector<double> ref(R * C), ref_rstd(R);
  for (int64_t r = 0; r < R; ++r) {
    double ss = 0.0;
    for (int64_t c = 0; c < C; ++c)
      ss += double(a[r * C + c] + b[r * C + c]) * (a[r * C + c] + b[r * C + c]);
    ref_rstd[r] = 1.0 / std::sqrt(ss / C + eps);
    for (int64_t c = 0; c < C; ++c)
      ref[r * C + c] = w[c] * double(a[r * C + c] + b[r * C + c]) * ref_rstd[r];
  }
  for (int64_t i = 0; i < R * C; ++i) ASSERT_EQ(sum[i], a[i] + b[i]);
  EXPECT_LT(nmse(out, ref), kMaxNmse);
  EXPECT_LT(nmse(rstd, ref_rstd), kMaxNmse);
  EXPECT_EQ(out, out2);  // fused and unfused agree bit for bit
  EXPECT_EQ(rstd, rstd2);
}

TEST(CpuOps, RopeMatchesRotateHalf) {
  const int64_t T = 4, H = 2, D = 8;
  std::mt19937 g(4);
  Vec x = random_vec(T * H * D, g), y = x, inv_freq(D / 2);
  for (int64_t i = 0; i < D / 2; ++i) inv_freq[i] = float(std::pow(500000.0, -2.0 * i / D));
  std::vector<int32_t> pos = {0, 1, 7, 4095};
  rope_forward(f32(y, {T, H, D}), i32(pos, {T}), f32(inv_freq, {D / 2}));
  std::vector<double> ref(T * H * D);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < D / 2; ++i) {
        const double angle = float(pos[t]) * inv_freq[i];  // HF forms the angle in fp32
        const float* v = &x[(t * H + h) * D];
        ref[(t * H + h) * D + i] = v[i] * std::cos(angle) - v[i + D / 2] * std::sin(angle);
        ref[(t * H + h) * D + i + D / 2] = v[i + D / 2] * std::cos(angle) + v[i] * std::sin(angle);
      }
  EXPECT_LT(nmse(y, ref), kMaxNmse);
  for (int64_t i = 0; i < H * D; ++i) EXPECT_EQ(y[i], x[i]) << "position 0 is the identity";
  rope_backward(f32(y, {T, H, D}), i32(pos, {T}), f32(inv_freq, {D / 2}));  // R(-θ)·R(θ) = I
  std::vector<double> xd(x.begin(), x.end());
  EXPECT_LT(nmse(y, xd), kMaxNmse);
}

TEST(CpuOps, SwiGluMatchesSilu) {
  std::mt19937 g(5);
  Vec gate = random_vec(333, g, -20, 20), up = random_vec(333, g), out(333);
  swiglu_forward(f32(out, {333}), f32(gate, {333}), f32(up, {333}));
  std::vector<double> ref(333);
  for (int i = 0; i < 333; ++i) ref[i] = gate[i] / (1.0 + std::exp(-double(gate[i]))) * up[i];
  EXPECT_LT(nmse(out, ref), kMaxNmse);
}

// Explicit T×V logits in double; 600 tokens span three chunks of 256; -100 tokens are skipped.
TEST(CpuOps, LinearCrossEntropyMatchesExplicitLogits) {
  const int64_t T = 600, C = 20, V = 77;
  const float grad_scale = 1.0f / 450;
  std::mt19937 g(6);
  Vec x = random_vec(T * C, g), w = random_vec(V * C, g, -2, 2);
  std::vector<int32_t> tgt(T);
  for (int64_t t = 0; t < T; ++t) tgt[t] = (t % 4 == 1) ? -100 : int32_t(g() % V);
  Vec loss = {1.5f}, dx(T * C, 7.0f), dw0 = random_vec(V * C, g), dw = dw0;
  linear_cross_entropy(f32(loss, {1}), f32(dx, {T, C}), f32(dw, {V, C}), f32(x, {T, C}),
                       f32(w, {V, C}), i32(tgt, {T}), grad_scale);
  double ref_loss = 1.5;
  std::vector<double> rdx(T * C, 0.0), rdw(dw0.begin(), dw0.end()), z(V);
  for (int64_t t = 0; t < T; ++t) {
    if (tgt[t] == -100) continue;
    double mx = -INFINITY, sum = 0.0;
    for (int64_t v = 0; v < V; ++v) {
      z[v] = 0.0;
      for (int64_t c = 0; c < C; ++c) z[v] += double(x[t * C + c]) * w[v * C + c];
      mx = std::max(mx, z[v]);
    }
    for (int64_t v = 0; v < V; ++v) sum += std::exp(z[v] - mx);
    ref_loss += mx + std::log(sum) - z[tgt[t]];
    for (int64_t v = 0; v < V; ++v) {
      const double gz = grad_scale * (std::exp(z[v] - mx) / sum - (v == tgt[t] ? 1.0 : 0.0));
      for (int64_t c = 0; c < C; ++c) {
        rdx[t * C + c] += gz * w[v * C + c];
        rdw[v * C + c] += gz * x[t * C + c];
      }
    }
  }
  EXPECT_NEAR(loss[0], ref_loss, 1e-6 * ref_loss);
  EXPECT_LT(nmse(dx, rdx), kMaxNmse);
  EXPECT_LT(nmse(dw, rdw), kMaxNmse);
  for (int64_t c = 0; c < C; ++c) EXPECT_EQ(dx[1 * C + c], 0.0f);
  Vec loss_only = {0.0f};  // loss without gradients (evaluation)
  linear_cross_entropy(f32(loss_only, {1}), Tensor{}, Tensor{}, f32(x, {T, C}), f32(w, {V, C}),
                       i32(tgt, {T}), 1.0f);
  EXPECT_NEAR(loss_only[0], ref_loss - 1.5, 1e-6 * ref_loss);
}

TEST(CpuOps, ErrorsNameTheOpAndShapes) {
  Vec x(12), w(20), y(20), b(4), dx(12);
  EXPECT_ERROR_HAS(linear_forward(f32(y, {4, 5}), f32(x, {4, 3}), f32(w, {5, 4}), Tensor{}),
                   "linear_forward", "[4,3]", "[5,4]");
  EXPECT_ERROR_HAS(linear_forward(f32(y, {4, 5}), f32(x, {4, 3}), f32(w, {5, 3}), f32(b, {4})),
                   "linear_forward", "bias");
  EXPECT_ERROR_HAS(linear_backward_input(f32(dx, {4, 3}), f32(y, {4, 5}), f32(w, {4, 5}), false),
                   "linear_backward_input", "[4,5]");
  EXPECT_ERROR_HAS(linear_backward_weight(f32(w, {5, 4}), Tensor{}, f32(y, {4, 5}), f32(x, {4, 3})),
                   "linear_backward_weight", "[5,4]");
  std::vector<int32_t> ids = {0, 9, 1};
  Vec table(12), out(12);
  EXPECT_ERROR_HAS(embedding_forward(f32(out, {3, 4}), i32(ids, {3}), f32(table, {3, 4})),
                   "embedding_forward", "token 1", "id 9", "[0, 3)");
  ids[1] = -2;
  EXPECT_ERROR_HAS(embedding_backward(f32(table, {3, 4}), i32(ids, {3}), f32(out, {3, 4})),
                   "embedding_backward", "id -2", "[0, 3)");
  std::vector<int32_t> tgt = {1, -100, 3};
  Vec loss(1), hw(12);
  EXPECT_ERROR_HAS(linear_cross_entropy(f32(loss, {1}), Tensor{}, Tensor{}, f32(out, {3, 4}),
                                        f32(hw, {3, 4}), i32(tgt, {3}), 1.0f),
                   "linear_cross_entropy", "token 2", "target 3", "[0, 3)");
  tgt[2] = -1;
  EXPECT_ERROR_HAS(linear_cross_entropy(f32(loss, {1}), Tensor{}, Tensor{}, f32(out, {3, 4}),
                                        f32(hw, {3, 4}), i32(tgt, {3}), 1.0f),
                   "token 2", "target -1");
  Vec rstd(3), nw(5);
  EXPECT_ERROR_HAS(
      rmsnorm_forward(f32(out, {3, 4}), f32(rstd, {3}), f32(x, {3, 4}), f32(nw, {5}), 1e-6f),
      "rmsnorm_forward", "[5]");
  Vec inv_freq(2), rx(18);
  std::vector<int32_t> pos = {0, 1, 2};
  EXPECT_ERROR_HAS(rope_forward(f32(rx, {3, 2, 3}), i32(pos, {3}), f32(inv_freq, {2})),
                   "rope_forward", "[3,2,3]");
  EXPECT_ERROR_HAS(swiglu_forward(f32(out, {12}), f32(x, {12}), f32(b, {4})), "swiglu_forward",
                   "up");
  std::vector<int32_t> ints(12);
  EXPECT_ERROR_HAS(convert(i32(ints, {12}), f32(x, {12})), "convert", "F32 -> I32");
}

}  // namespace
}  // namespace sf::cpu
