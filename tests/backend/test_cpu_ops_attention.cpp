// Causal GQA attention over packed samples: forward against an explicit double softmax matrix,
// sample isolation, finite-difference gradients (see test_cpu_ops_grad.cpp for the thresholds'
// reasoning), and cu_seqlens errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/ops.h"

namespace sf::cpu {
namespace {

using Vec = std::vector<float>;

Vec random_vec(size_t n, std::mt19937& g, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> u(lo, hi);
  Vec v(n);
  for (float& x : v) x = u(g);
  return v;
}

struct Case {
  int64_t NH, NKV, D;
  std::vector<int32_t> cu;  // cu_seqlens
  int64_t T() const { return cu.back(); }
};

struct Attn {
  Case c;
  Vec q, k, v, out, lse;
  float scale;
  explicit Attn(Case cs, uint32_t seed) : c(std::move(cs)) {
    std::mt19937 g(seed);
    const int64_t T = c.T();
    // Scores of a few units: a peaked but not one-hot softmax.
    q = random_vec(T * c.NH * c.D, g, -2, 2);
    k = random_vec(T * c.NKV * c.D, g, -2, 2);
    v = random_vec(T * c.NKV * c.D, g);
    out.resize(q.size());
    lse.resize(T * c.NH);
    scale = 1.0f / std::sqrt(float(c.D));
  }
  Tensor t(Vec& x, int64_t heads) { return Tensor(x.data(), DType::kF32, {c.T(), heads, c.D}); }
  Tensor cu() { return Tensor(c.cu.data(), DType::kI32, {int64_t(c.cu.size())}); }
  void forward() {
    attention_forward(t(out, c.NH), Tensor(lse.data(), DType::kF32, {c.T(), c.NH}), t(q, c.NH),
                      t(k, c.NKV), t(v, c.NKV), cu(), scale);
  }
};

const std::vector<Case> kCases = {
    {4, 4, 16, {0, 5, 14, 17}},   // GQA ratio 1, three samples of different lengths
    {4, 1, 16, {0, 5, 14, 17}},   // ratio 4
    {8, 2, 32, {0, 11, 12, 20}},  // ratio 4, head_dim 32, a one-token sample
    {3, 3, 32, {0, 9}},           // one sample, odd head count
    {2, 1, 20, {0, 3, 3, 10}},    // head_dim not a multiple of 8, an empty sample
};

TEST(CpuOpsAttention, ForwardMatchesExplicitSoftmax) {
  for (const Case& cs : kCases) {
    Attn a(cs, 1);
    a.forward();
    const int64_t T = cs.T(), NH = cs.NH, NKV = cs.NKV, D = cs.D;
    double num = 0, den = 0, lse_err = 0;
    for (size_t s = 0; s + 1 < cs.cu.size(); ++s)
      for (int64_t h = 0; h < NH; ++h) {
        const int64_t g = h / (NH / NKV), t0 = cs.cu[s], t1 = cs.cu[s + 1], L = t1 - t0;
        std::vector<double> S(L * L, -INFINITY);  // the full masked score matrix of the sample
        for (int64_t i = 0; i < L; ++i)
          for (int64_t j = 0; j <= i; ++j) {
            double d = 0;
            for (int64_t e = 0; e < D; ++e)
              d += double(a.q[((t0 + i) * NH + h) * D + e]) * a.k[((t0 + j) * NKV + g) * D + e];
            S[i * L + j] = a.scale * d;
          }
        for (int64_t i = 0; i < L; ++i) {
          const double mx = *std::max_element(&S[i * L], &S[i * L] + L);
          double sum = 0;
          for (int64_t j = 0; j < L; ++j) sum += std::exp(S[i * L + j] - mx);
          lse_err = std::max(lse_err, std::abs(a.lse[(t0 + i) * NH + h] - (mx + std::log(sum))));
          for (int64_t e = 0; e < D; ++e) {
            double o = 0;
            for (int64_t j = 0; j < L; ++j)
              o += std::exp(S[i * L + j] - mx) / sum * a.v[((t0 + j) * NKV + g) * D + e];
            const double got = a.out[((t0 + i) * NH + h) * D + e];
            num += (got - o) * (got - o);
            den += o * o;
          }
        }
      }
    EXPECT_LT(num / den, 1e-11) << "NH=" << NH << " NKV=" << NKV << " D=" << D;
    EXPECT_LT(lse_err, 1e-5) << "NH=" << NH << " NKV=" << NKV << " D=" << D;
    (void)T;
  }
}

// Changing every token of sample 2 leaves samples 1 and 3 bit-identical, forward and backward.
TEST(CpuOpsAttention, SamplesAreIsolated) {
  const Case cs = kCases[1];
  Attn a(cs, 2), b(cs, 2);
  std::mt19937 g(99);
  const int64_t t0 = cs.cu[1], t1 = cs.cu[2];
  for (int64_t t = t0; t < t1; ++t) {
    for (int64_t i = 0; i < cs.NH * cs.D; ++i) b.q[t * cs.NH * cs.D + i] = float(g() % 7) - 3;
    for (int64_t i = 0; i < cs.NKV * cs.D; ++i) {
      b.k[t * cs.NKV * cs.D + i] += 1.0f;
      b.v[t * cs.NKV * cs.D + i] *= -2.0f;
    }
  }
  a.forward();
  b.forward();
  Vec dout = random_vec(a.q.size(), g);
  auto backward = [&](Attn& x, Vec& dq, Vec& dk, Vec& dv) {
    dq.resize(x.q.size()), dk.resize(x.k.size()), dv.resize(x.v.size());
    attention_backward(x.t(dq, cs.NH), x.t(dk, cs.NKV), x.t(dv, cs.NKV), x.t(dout, cs.NH),
                       x.t(x.q, cs.NH), x.t(x.k, cs.NKV), x.t(x.v, cs.NKV), x.t(x.out, cs.NH),
                       Tensor(x.lse.data(), DType::kF32, {cs.T(), cs.NH}), x.cu(), x.scale);
  };
  Vec adq, adk, adv, bdq, bdk, bdv;
  backward(a, adq, adk, adv);
  backward(b, bdq, bdk, bdv);
  for (int64_t t = 0; t < cs.T(); ++t) {
    if (t >= t0 && t < t1) continue;
    const int64_t nq = cs.NH * cs.D, nk = cs.NKV * cs.D;
    for (int64_t i = 0; i < nq; ++i) {
      ASSERT_EQ(a.out[t * nq + i], b.out[t * nq + i]) << "token " << t;
      ASSERT_EQ(adq[t * nq + i], bdq[t * nq + i]) << "token " << t;
    }
    for (int64_t i = 0; i < nk; ++i) {
      ASSERT_EQ(adk[t * nk + i], bdk[t * nk + i]) << "token " << t;
      ASSERT_EQ(adv[t * nk + i], bdv[t * nk + i]) << "token " << t;
    }
  }
  EXPECT_NE(a.out[t0 * cs.NH * cs.D], b.out[t0 * cs.NH * cs.D]) << "sample 2 itself changed";
}

double fd_error(Vec& x, const Vec& analytic, const std::function<double()>& loss) {
  // A perturbed key/value moves every later output of its sample in all heads of its group, so
  // the fp32 rounding noise of L is larger than for the other ops: ~8e-4 of the gradient at
  // eps = 1e-3, ~8e-5 at 1e-2 (it scales as 1/eps), while the O(eps²) truncation error stays
  // below 1e-5 for scores of a few units. Hence eps = 1e-2 under the common 1e-3 threshold.
  const float eps = 1e-2f;
  std::mt19937 g(1234);
  std::vector<size_t> idx(x.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::shuffle(idx.begin(), idx.end(), g);
  idx.resize(std::min<size_t>(48, idx.size()));
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

TEST(CpuOpsAttention, GradientsMatchFiniteDifferences) {
  for (const Case& cs : kCases) {
    Attn a(cs, 3);
    std::mt19937 g(5);
    Vec r = random_vec(a.q.size(), g);
    auto loss = [&] {
      a.forward();
      double s = 0;
      for (size_t i = 0; i < r.size(); ++i) s += double(a.out[i]) * r[i];
      return s;
    };
    loss();
    Vec dq(a.q.size()), dk(a.k.size()), dv(a.v.size());
    attention_backward(a.t(dq, cs.NH), a.t(dk, cs.NKV), a.t(dv, cs.NKV), a.t(r, cs.NH),
                       a.t(a.q, cs.NH), a.t(a.k, cs.NKV), a.t(a.v, cs.NKV), a.t(a.out, cs.NH),
                       Tensor(a.lse.data(), DType::kF32, {cs.T(), cs.NH}), a.cu(), a.scale);
    const std::string where = "NH=" + std::to_string(cs.NH) + " NKV=" + std::to_string(cs.NKV) +
                              " D=" + std::to_string(cs.D);
    EXPECT_LT(fd_error(a.q, dq, loss), 1e-3) << "dq " << where;
    EXPECT_LT(fd_error(a.k, dk, loss), 1e-3) << "dk " << where;
    EXPECT_LT(fd_error(a.v, dv, loss), 1e-3) << "dv " << where;
  }
}

TEST(CpuOpsAttention, BadInputsAreErrors) {
  Attn a({4, 2, 16, {0, 5, 9}}, 4);
  auto t9 = [](Vec& x, int64_t heads) { return Tensor(x.data(), DType::kF32, {9, heads, 16}); };
  auto msg = [&](std::vector<int32_t> cu) {
    try {
      attention_forward(t9(a.out, 4), Tensor(a.lse.data(), DType::kF32, {9, 4}), t9(a.q, 4),
                        t9(a.k, 2), t9(a.v, 2),
                        Tensor(cu.data(), DType::kI32, {int64_t(cu.size())}), a.scale);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("<no error>");
  };
  EXPECT_EQ(msg({0, 5, 9}), "<no error>");
  EXPECT_NE(msg({1, 5, 9}).find("must start at 0 and end at T=9"), std::string::npos);
  EXPECT_NE(msg({0, 5, 8}).find("end at T=9"), std::string::npos);
  EXPECT_NE(msg({0, 10, 9}).find("non-decreasing"), std::string::npos);
  EXPECT_NE(msg({0}).find("cu_seqlens"), std::string::npos);
  a.c.cu = {0, 9};
  Vec k3(9 * 3 * 16);
  try {
    attention_forward(a.t(a.out, 4), Tensor(a.lse.data(), DType::kF32, {9, 4}), a.t(a.q, 4),
                      a.t(k3, 3), a.t(k3, 3), a.cu(), a.scale);
    ADD_FAILURE() << "NH=4 with NKV=3 must be an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("NH a multiple of NKV"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sf::cpu
