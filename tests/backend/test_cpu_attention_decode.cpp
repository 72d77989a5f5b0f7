// Attention of new queries against a KV cache (sf::cpu::attention_decode): against an explicit
// double softmax over each query's visible keys; equal, bit for bit, to the last rows of the
// full causal attention_forward over the same keys (what makes a KV-cache decoder give the full
// forward's logits); shape errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/ops.h"

namespace sf::cpu {
namespace {

using Vec = std::vector<float>;

Vec random_vec(size_t n, std::mt19937& g, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  Vec v(n);
  for (float& x : v) x = u(g);
  return v;
}

struct DecodeCase {
  int64_t Tq, Tk, NH, NKV, D;
};

const std::vector<DecodeCase> kCases = {
    {1, 1, 2, 1, 16},    // the first token: one key
    {1, 23, 4, 4, 16},   // one query, MHA
    {1, 40, 8, 2, 32},   // one query, GQA 4
    {5, 17, 4, 1, 16},   // a prefill chunk after 12 cached tokens, GQA 4
    {9, 9, 3, 3, 20},    // no cache: plain causal attention, head_dim not a multiple of 8
    {3, 300, 8, 2, 64},  // a long cache
};

struct Inputs {
  DecodeCase c;
  Vec q_all, k, v;  // q of all Tk tokens (the decode op takes the last Tq rows)
  float scale;
  Inputs(const DecodeCase& cs, uint32_t seed) : c(cs) {
    std::mt19937 g(seed);
    q_all = random_vec(size_t(c.Tk * c.NH * c.D), g, -2, 2);
    k = random_vec(size_t(c.Tk * c.NKV * c.D), g, -2, 2);
    v = random_vec(size_t(c.Tk * c.NKV * c.D), g, -1, 1);
    scale = 1.0f / std::sqrt(float(c.D));
  }
  float* q_last() { return q_all.data() + (c.Tk - c.Tq) * c.NH * c.D; }
  Vec decode() {
    Vec out(size_t(c.Tq * c.NH * c.D));
    attention_decode(Tensor(out.data(), DType::kF32, {c.Tq, c.NH, c.D}),
                     Tensor(q_last(), DType::kF32, {c.Tq, c.NH, c.D}),
                     Tensor(k.data(), DType::kF32, {c.Tk, c.NKV, c.D}),
                     Tensor(v.data(), DType::kF32, {c.Tk, c.NKV, c.D}), scale);
    return out;
  }
};

std::string name(const DecodeCase& c) {
  return "Tq=" + std::to_string(c.Tq) + " Tk=" + std::to_string(c.Tk) +
         " NH=" + std::to_string(c.NH) + " NKV=" + std::to_string(c.NKV) +
         " D=" + std::to_string(c.D);
}

TEST(CpuAttentionDecode, MatchesExplicitSoftmax) {
  for (const DecodeCase& c : kCases) {
    Inputs in(c, 7);
    const Vec out = in.decode();
    double num = 0, den = 0;
    for (int64_t i = 0; i < c.Tq; ++i)
      for (int64_t h = 0; h < c.NH; ++h) {
        const int64_t g = h / (c.NH / c.NKV), n = c.Tk - c.Tq + i + 1;  // visible keys
        const float* qr = in.q_last() + (i * c.NH + h) * c.D;
        std::vector<double> p(static_cast<size_t>(n));
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < n; ++j) {
          double d = 0;
          for (int64_t e = 0; e < c.D; ++e)
            d += double(qr[e]) * in.k[size_t((j * c.NKV + g) * c.D + e)];
          p[size_t(j)] = in.scale * d;
          mx = std::max(mx, p[size_t(j)]);
        }
        for (double& x : p) sum += x = std::exp(x - mx);
        for (int64_t e = 0; e < c.D; ++e) {
          double ref = 0;
          for (int64_t j = 0; j < n; ++j)
            ref += p[size_t(j)] / sum * in.v[size_t((j * c.NKV + g) * c.D + e)];
          num = std::max(num, std::fabs(out[size_t((i * c.NH + h) * c.D + e)] - ref));
          den = std::max(den, std::fabs(ref));
        }
      }
    // fp32 scores and weights against double: a few ulps of the dot products
    EXPECT_LT(num / den, 1e-5) << name(c);
  }
}

TEST(CpuAttentionDecode, EqualsTheLastRowsOfTheFullForward) {
  for (const DecodeCase& c : kCases) {
    Inputs in(c, 11);
    Vec full(in.q_all.size()), lse(size_t(c.Tk * c.NH));
    std::vector<int32_t> cu = {0, int32_t(c.Tk)};
    attention_forward(Tensor(full.data(), DType::kF32, {c.Tk, c.NH, c.D}),
                      Tensor(lse.data(), DType::kF32, {c.Tk, c.NH}),
                      Tensor(in.q_all.data(), DType::kF32, {c.Tk, c.NH, c.D}),
                      Tensor(in.k.data(), DType::kF32, {c.Tk, c.NKV, c.D}),
                      Tensor(in.v.data(), DType::kF32, {c.Tk, c.NKV, c.D}),
                      Tensor(cu.data(), DType::kI32, {2}), in.scale);
    const Vec out = in.decode();
    EXPECT_EQ(std::memcmp(out.data(), full.data() + (c.Tk - c.Tq) * c.NH * c.D,
                          out.size() * sizeof(float)),
              0)
        << name(c);
  }
}

TEST(CpuAttentionDecode, ShapeErrorsNameTheOp) {
  Vec q(2 * 4 * 16), k(3 * 2 * 16), v(3 * 2 * 16), out(q.size());
  const auto call = [&](int64_t Tq, int64_t Tk, int64_t NKV) {
    try {
      attention_decode(Tensor(out.data(), DType::kF32, {Tq, 4, 16}),
                       Tensor(q.data(), DType::kF32, {Tq, 4, 16}),
                       Tensor(k.data(), DType::kF32, {Tk, NKV, 16}),
                       Tensor(v.data(), DType::kF32, {Tk, NKV, 16}), 0.25f);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(call(2, 3, 2), "(no error)");
  EXPECT_NE(call(2, 1, 2).find("attention_decode: shapes do not match"), std::string::npos)
      << "more queries than keys";
  EXPECT_NE(call(2, 2, 3).find("NH a multiple of NKV"), std::string::npos) << "4 heads over 3";
}

}  // namespace
}  // namespace sf::cpu
