// Tests: adamw_step (every SIMD path and thread count) against adamw_step_reference, bit for bit;
// the weights and the moments written apart (the clipped update);
// the reference against torch's AdamW formulas evaluated in double; the fused bf16 copy;
// argument errors; a throughput print on 64M params.
#include "optim/adamw.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "optim/simd.h"

namespace sf {
namespace {

std::vector<OptimIsa> supported_isas() {
  std::vector<OptimIsa> out;
  for (OptimIsa isa : {OptimIsa::kScalar, OptimIsa::kAvx2, OptimIsa::kAvx512})
    if (optim_isa_supported(isa)) out.push_back(isa);
  return out;
}

struct State {
  std::vector<float> p, m, v, g32;
  std::vector<uint16_t> g16, pb;
};

State random_state(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> w(0.0f, 0.02f);
  State s;
  s.p.resize(static_cast<size_t>(n));
  s.m.assign(static_cast<size_t>(n), 0.0f);
  s.v.assign(static_cast<size_t>(n), 0.0f);
  s.pb.assign(static_cast<size_t>(n), 0);
  for (auto& x : s.p) x = w(rng);
  return s;
}

// A fresh gradient per step, magnitudes spread over several decades, some exact zeros.
void fill_grad(State& s, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> gd(0.0f, 1.0f);
  std::uniform_int_distribution<int> dec(-8, 1);
  s.g32.resize(static_cast<size_t>(n));
  s.g16.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    float x = (i % 37 == 5) ? 0.0f : gd(rng) * std::pow(10.0f, float(dec(rng)));
    s.g16[size_t(i)] = f32_to_bf16(x);
    s.g32[size_t(i)] = x;
  }
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

int64_t first_diff(const std::vector<float>& a, const std::vector<float>& b) {
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], 4) != 0) return int64_t(i);
  return -1;
}

TEST(AdamW, EveryPathMatchesReferenceBitExact) {
  // Sizes around the vector widths (8, 16), the tile (16384) and several tiles.
  const int64_t sizes[] = {0,  1,  7,   8,    9,     15,    16,    17,
                           31, 33, 100, 1000, 16383, 16384, 16385, 3 * 16384 + 13};
  ThreadPool pool1(1), pool3(3);
  AdamWParams hps[2];
  hps[0] = AdamWParams{.lr = 1e-3f, .weight_decay = 0.01f};
  hps[1] = AdamWParams{.lr = 3e-4f,
                       .beta1 = 0.3f,
                       .beta2 = 0.95f,
                       .eps = 1e-6f,
                       .weight_decay = 0.1f};  // lerp weight 0.7 >= 0.5: torch's other branch
  for (OptimIsa isa : supported_isas()) {
    for (DType dt : {DType::kF32, DType::kBF16}) {
      for (int h = 0; h < 2; ++h) {
        for (int64_t n : sizes) {
          for (bool with_bf16 : {false, true}) {
            SCOPED_TRACE(testing::Message() << optim_isa_name(isa) << " " << dtype_name(dt) << " hp"
                                            << h << " n=" << n << " bf16=" << with_bf16);
            State fast = random_state(n, uint32_t(n) + 1);
            State ref = fast;
            for (int64_t step = 1; step <= 4; ++step) {
              fill_grad(fast, n, uint32_t(step * 1000 + n));
              ref.g32 = fast.g32;
              ref.g16 = fast.g16;
              const void* g =
                  dt == DType::kBF16 ? (const void*)fast.g16.data() : (const void*)fast.g32.data();
              const void* gr =
                  dt == DType::kBF16 ? (const void*)ref.g16.data() : (const void*)ref.g32.data();
              const float scale = step == 2 ? 1.0f : 0.37f;
              ThreadPool& pool = (step % 2) ? pool3 : pool1;
              adamw_step(isa, pool, fast.p.data(), fast.m.data(), fast.v.data(), g, dt, n, step,
                         hps[h], scale, with_bf16 ? fast.pb.data() : nullptr);
              adamw_step_reference(ref.p.data(), ref.m.data(), ref.v.data(), gr, dt, n, step,
                                   hps[h], scale, with_bf16 ? ref.pb.data() : nullptr);
              ASSERT_TRUE(same_bits(fast.p, ref.p))
                  << "step " << step << " first p diff at " << first_diff(fast.p, ref.p);
              ASSERT_TRUE(same_bits(fast.m, ref.m)) << "step " << step;
              ASSERT_TRUE(same_bits(fast.v, ref.v)) << "step " << step;
              ASSERT_EQ(fast.pb, ref.pb) << "step " << step;
            }
          }
        }
      }
    }
  }
}

// With a Σ g² out, the step stores the same bits and sets the sum to sum_squares's bits, on every
// path, thread count and size (a block's tail, several blocks, a partial last tile), with and
// without the bf16 copy; a gradient with a NaN gives a NaN sum.
TEST(AdamW, SumOfSquaresFromTheStepIsSumSquares) {
  ThreadPool pool1(1), pool3(3);
  const AdamWParams hp{.lr = 1e-3f, .weight_decay = 0.01f};
  for (OptimIsa isa : supported_isas()) {
    for (DType dt : {DType::kF32, DType::kBF16}) {
      for (int64_t n : {int64_t(0), int64_t(1), int64_t(17), int64_t(65536 - 3), int64_t(65536),
                        int64_t(3 * 65536 + 16384 + 77)}) {
        for (bool with_bf16 : {false, true}) {
          SCOPED_TRACE(testing::Message() << optim_isa_name(isa) << " " << dtype_name(dt)
                                          << " n=" << n << " bf16 copy " << with_bf16);
          State plain = random_state(n, uint32_t(n) + 9), fused = plain;
          fill_grad(plain, n, uint32_t(n) + 1);
          const void* g =
              dt == DType::kBF16 ? (const void*)plain.g16.data() : (const void*)plain.g32.data();
          ThreadPool& pool = n % 2 ? pool3 : pool1;
          adamw_step(isa, pool, plain.p.data(), plain.m.data(), plain.v.data(), g, dt, n, 2, hp,
                     0.5f, with_bf16 ? plain.pb.data() : nullptr);
          double ss = -1;
          adamw_step(isa, pool, fused.p.data(), fused.m.data(), fused.v.data(), g, dt, n, 2, hp,
                     0.5f, with_bf16 ? fused.pb.data() : nullptr, AdamWWrite::kAll, &ss);
          ASSERT_TRUE(same_bits(fused.p, plain.p) && same_bits(fused.m, plain.m) &&
                      same_bits(fused.v, plain.v));
          ASSERT_EQ(fused.pb, plain.pb);
          const double want = sum_squares(OptimIsa::kScalar, pool1, g, dt, n);
          ASSERT_EQ(std::memcmp(&ss, &want, sizeof ss), 0) << ss << " vs " << want;
          if (n > 0) {
            EXPECT_GT(ss, 0.0);
          }
        }
      }
    }
  }
  std::vector<float> p(100, 0.5f), m(100, 0.0f), v(100, 0.0f), g(100, 0.25f);
  g[40] = NAN;
  double ss = 0;
  adamw_step(p.data(), m.data(), v.data(), g.data(), DType::kF32, 100, 1, hp, 1.0f, nullptr,
             AdamWWrite::kAll, &ss);
  EXPECT_TRUE(std::isnan(ss));
}

// The clipped update's two halves: the weights alone, then the moments alone (same inputs), are
// the whole step bit for bit on every path; each half leaves the other's arrays as they were.
TEST(AdamW, WeightsThenMomentsIsTheWholeStep) {
  ThreadPool pool3(3);
  const AdamWParams hps[2] = {AdamWParams{.lr = 1e-3f, .weight_decay = 0.01f},
                              AdamWParams{.lr = 3e-4f, .beta1 = 0.3f, .beta2 = 0.95f}};
  for (OptimIsa isa : supported_isas()) {
    for (DType dt : {DType::kF32, DType::kBF16}) {
      for (int h = 0; h < 2; ++h) {
        for (int64_t n : {int64_t(1), int64_t(17), int64_t(3 * 16384 + 13)}) {
          SCOPED_TRACE(testing::Message()
                       << optim_isa_name(isa) << " " << dtype_name(dt) << " hp" << h << " n=" << n);
          State whole = random_state(n, uint32_t(n) + 3), split = whole;
          for (int64_t step = 1; step <= 3; ++step) {
            fill_grad(whole, n, uint32_t(step * 77 + n));
            const void* g =
                dt == DType::kBF16 ? (const void*)whole.g16.data() : (const void*)whole.g32.data();
            const float scale = step == 2 ? 1.0f : 0.37f;
            adamw_step(isa, pool3, whole.p.data(), whole.m.data(), whole.v.data(), g, dt, n, step,
                       hps[h], scale);
            const std::vector<float> m0 = split.m, v0 = split.v;
            adamw_step(isa, pool3, split.p.data(), split.m.data(), split.v.data(), g, dt, n, step,
                       hps[h], scale, nullptr, AdamWWrite::kWeights);
            ASSERT_TRUE(same_bits(split.m, m0) && same_bits(split.v, v0)) << "step " << step;
            ASSERT_TRUE(same_bits(split.p, whole.p)) << "step " << step;
            const std::vector<float> p1 = split.p;
            adamw_step(isa, pool3, split.p.data(), split.m.data(), split.v.data(), g, dt, n, step,
                       hps[h], scale, nullptr, AdamWWrite::kMoments);
            ASSERT_TRUE(same_bits(split.p, p1)) << "step " << step;
            ASSERT_TRUE(same_bits(split.m, whole.m)) << "step " << step;
            ASSERT_TRUE(same_bits(split.v, whole.v)) << "step " << step;
          }
          // The reference's halves too.
          State ref = random_state(n, uint32_t(n) + 3);
          fill_grad(ref, n, 5);
          State ref_split = ref;
          adamw_step_reference(ref.p.data(), ref.m.data(), ref.v.data(), ref.g32.data(),
                               DType::kF32, n, 1, hps[h], 1.0f);
          adamw_step_reference(ref_split.p.data(), ref_split.m.data(), ref_split.v.data(),
                               ref.g32.data(), DType::kF32, n, 1, hps[h], 1.0f, nullptr,
                               AdamWWrite::kWeights);
          adamw_step_reference(ref_split.p.data(), ref_split.m.data(), ref_split.v.data(),
                               ref.g32.data(), DType::kF32, n, 1, hps[h], 1.0f, nullptr,
                               AdamWWrite::kMoments);
          ASSERT_TRUE(same_bits(ref.p, ref_split.p) && same_bits(ref.m, ref_split.m) &&
                      same_bits(ref.v, ref_split.v));
        }
      }
    }
  }
  // A bf16 copy of the weights goes with the whole step only.
  float p = 0, m = 0, v = 0, g = 1;
  uint16_t pb = 0;
  EXPECT_THROW(
      adamw_step(&p, &m, &v, &g, DType::kF32, 1, 1, hps[0], 1.0f, &pb, AdamWWrite::kWeights),
      Error);
}

TEST(AdamW, UnalignedRangesMatchReference) {
  // A layer's range starts anywhere in the flat buffer.
  const int64_t n = 16384 + 77;
  for (OptimIsa isa : supported_isas()) {
    for (int64_t off : {1, 3, 5}) {
      SCOPED_TRACE(testing::Message() << optim_isa_name(isa) << " offset " << off);
      State fast = random_state(n + off, 7), ref = fast;
      fill_grad(fast, n + off, 8);
      AdamWParams hp{.lr = 2e-5f, .weight_decay = 0.05f};
      adamw_step(isa, ThreadPool::global(), fast.p.data() + off, fast.m.data() + off,
                 fast.v.data() + off, fast.g16.data() + off, DType::kBF16, n, 1, hp, 0.5f,
                 fast.pb.data() + off);
      adamw_step_reference(ref.p.data() + off, ref.m.data() + off, ref.v.data() + off,
                           fast.g16.data() + off, DType::kBF16, n, 1, hp, 0.5f,
                           ref.pb.data() + off);
      ASSERT_TRUE(same_bits(fast.p, ref.p));
      ASSERT_TRUE(same_bits(fast.m, ref.m));
      ASSERT_TRUE(same_bits(fast.v, ref.v));
      ASSERT_EQ(fast.pb, ref.pb);
    }
  }
}

// torch.optim.AdamW (decoupled weight decay) written out in double, three steps.
TEST(AdamW, ReferenceMatchesTorchFormulasInDouble) {
  const double lr = 1e-3, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.1, scale = 0.5;
  std::vector<float> p = {0.5f, -0.25f, 1.5f, 0.01f};
  const float grads[3][4] = {
      {0.1f, -0.2f, 0.3f, 0.05f}, {0.12f, 0.2f, -0.1f, 0.04f}, {-0.05f, -0.3f, 0.2f, 0.06f}};
  std::vector<float> m(4, 0.0f), v(4, 0.0f);
  std::vector<double> pd(p.begin(), p.end()), md(4, 0.0), vd(4, 0.0);
  AdamWParams hp{.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.1f};
  for (int step = 1; step <= 3; ++step) {
    adamw_step_reference(p.data(), m.data(), v.data(), grads[step - 1], DType::kF32, 4, step, hp,
                         float(scale));
    const double bc1 = 1 - std::pow(b1, step), bc2 = 1 - std::pow(b2, step);
    for (int i = 0; i < 4; ++i) {
      const double g = double(grads[step - 1][i]) * scale;
      pd[i] *= 1 - lr * wd;
      md[i] = md[i] + (1 - b1) * (g - md[i]);
      vd[i] = vd[i] * b2 + (1 - b2) * g * g;
      pd[i] -= lr / bc1 * md[i] / (std::sqrt(vd[i]) / std::sqrt(bc2) + eps);
      EXPECT_NEAR(p[i], pd[i], 1e-6 * std::fabs(pd[i])) << "step " << step << " i " << i;
      EXPECT_NEAR(m[i], md[i], 1e-6 * std::fabs(md[i])) << "step " << step << " i " << i;
      EXPECT_NEAR(v[i], vd[i], 1e-6 * std::fabs(vd[i])) << "step " << step << " i " << i;
    }
  }
}

// The fused bf16 copy is f32_to_bf16 of the updated p, including ties, overflow to Inf,
// subnormals, signed zeros, Inf and NaN (lr = 0 keeps p as given).
TEST(AdamW, Bf16CopyEqualsRoundedMaster) {
  const uint32_t bits[] = {0x3f808000u, 0x3f818000u, 0x3f80ffffu, 0x7f7fffffu, 0xff7fffffu,
                           0x00000001u, 0x807fffffu, 0x00000000u, 0x80000000u, 0x7f800000u,
                           0xff800000u, 0x7fc00001u, 0xffff0000u, 0x40490fdbu, 0xbf7fff80u,
                           0x3f7fff80u, 0x3f7fff7fu};
  const int64_t n = 3 * 16 + 5;  // full vectors and a tail
  std::vector<float> p0(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) std::memcpy(&p0[size_t(i)], &bits[i % 17], 4);
  for (OptimIsa isa : supported_isas()) {
    std::vector<float> p = p0, m(static_cast<size_t>(n), 0.0f), v(static_cast<size_t>(n), 0.0f),
                       g(static_cast<size_t>(n), 0.0f);
    std::vector<uint16_t> pb(static_cast<size_t>(n), 0);
    adamw_step(isa, ThreadPool::global(), p.data(), m.data(), v.data(), g.data(), DType::kF32, n, 1,
               AdamWParams{.lr = 0.0f}, 1.0f, pb.data());
    for (int64_t i = 0; i < n; ++i) {
      SCOPED_TRACE(testing::Message() << optim_isa_name(isa) << " i=" << i);
      if (!std::isnan(p0[size_t(i)])) {
        EXPECT_EQ(std::memcmp(&p[size_t(i)], &p0[size_t(i)], 4), 0);
      }
      EXPECT_EQ(pb[size_t(i)], f32_to_bf16(p[size_t(i)]));
    }
  }
}

// The scalar path's fma (round-to-odd in double when the build has no FMA) against libm's fmaf,
// including a sum that a plain double sum would round twice: 1 + 2^-11 + 2^-24 (an fp32 tie)
// + 2^-80 must round up.
TEST(AdamW, ScalarFmaIsCorrectlyRounded) {
  const float a = 1.0f + std::ldexp(1.0f, -12), tiny = std::ldexp(1.0f, -80);
  EXPECT_EQ(simd::fma_f32(a, a, tiny), std::fma(a, a, tiny));
  EXPECT_EQ(simd::fma_f32(a, a, tiny), 1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -23));
  EXPECT_EQ(simd::fma_f32(a, a, -tiny), std::fma(a, a, -tiny));
  EXPECT_EQ(simd::fma_f32(-a, a, tiny), std::fma(-a, a, tiny));
  EXPECT_EQ(simd::fma_f32(-a, a, -tiny), std::fma(-a, a, -tiny));
  std::mt19937 rng(3);
  std::uniform_int_distribution<uint32_t> bits;
  int checked = 0;
  for (int i = 0; i < 200000; ++i) {
    uint32_t ua = bits(rng), ub = bits(rng), uc = bits(rng);
    if (i % 2)
      uc = (uc & 0x807fffffu) | (((ua >> 23 & 0xff) + (ub >> 23 & 0xff) - 127) & 0xff) << 23;
    float x, y, z;
    std::memcpy(&x, &ua, 4);
    std::memcpy(&y, &ub, 4);
    std::memcpy(&z, &uc, 4);
    const float want = std::fma(x, y, z), got = simd::fma_f32(x, y, z);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got));
      continue;
    }
    ASSERT_EQ(std::memcmp(&want, &got, 4), 0) << x << " * " << y << " + " << z;
    ++checked;
  }
  EXPECT_GT(checked, 100000);
}

TEST(AdamW, RejectsBadArguments) {
  float p = 0, m = 0, v = 0, g = 0;
  AdamWParams hp{.lr = 1e-3f};
  EXPECT_THROW(adamw_step(&p, &m, &v, &g, DType::kF32, 1, 0, hp, 1.0f), Error);
  EXPECT_THROW(adamw_step(&p, &m, &v, &g, DType::kF16, 1, 1, hp, 1.0f), Error);
  EXPECT_THROW(adamw_step(&p, &m, &v, nullptr, DType::kF32, 1, 1, hp, 1.0f), Error);
  EXPECT_THROW(adamw_step(&p, &m, &v, &g, DType::kF32, 1, 1, AdamWParams{.lr = -1.0f}, 1.0f),
               Error);
  EXPECT_THROW(
      adamw_step(&p, &m, &v, &g, DType::kF32, 1, 1, AdamWParams{.lr = 1e-3f, .beta2 = 1.0f}, 1.0f),
      Error);
  EXPECT_NO_THROW(adamw_step(nullptr, nullptr, nullptr, nullptr, DType::kF32, 0, 1, hp, 1.0f));
}

TEST(AdamW, AdamWThroughput) {
  const int64_t n = int64_t(64) << 20;
  std::vector<float> p(static_cast<size_t>(n)), m(static_cast<size_t>(n), 0.0f),
      v(static_cast<size_t>(n), 0.0f);
  std::vector<uint16_t> g(static_cast<size_t>(n)), pb(static_cast<size_t>(n));
  parallel_for(n, 1 << 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      p[size_t(i)] = float((i * 2654435761u) % 1000) * 1e-4f - 0.05f;
      g[size_t(i)] = f32_to_bf16(float((i * 40503u) % 2001) * 1e-5f - 0.01f);
    }
  });
  AdamWParams hp{.lr = 1e-4f, .weight_decay = 0.01f};
  const float scale = 0.8f;
  adamw_step(p.data(), m.data(), v.data(), g.data(), DType::kBF16, n, 1, hp, scale, pb.data());

  // Sample the state before the timed steps; replay the sample through the reference after.
  const int64_t stride = 4099;
  std::vector<float> sp, sm, sv;
  for (int64_t i = 0; i < n; i += stride) {
    sp.push_back(p[size_t(i)]);
    sm.push_back(m[size_t(i)]);
    sv.push_back(v[size_t(i)]);
  }
  const int reps = 3;
  auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < reps; ++r)
    adamw_step(p.data(), m.data(), v.data(), g.data(), DType::kBF16, n, 2 + r, hp, scale,
               pb.data());
  auto t1 = std::chrono::steady_clock::now();
  const double s = std::chrono::duration<double>(t1 - t0).count() / reps;
  // Bytes moved per param: read p,m,v (12) + bf16 grad (2), write p,m,v (12) + bf16 copy (2).
  std::printf("[ adamw    ] n=%lld isa=%s threads=%d: %.3f s/step, %.1f Mparams/s, %.1f GB/s\n",
              (long long)n, std::string(optim_isa_name(optim_best_isa())).c_str(),
              ThreadPool::global().size(), s, n / s / 1e6, 28.0 * n / s / 1e9);

  auto t2 = std::chrono::steady_clock::now();
  volatile double ss = sum_squares(g.data(), DType::kBF16, n);
  auto t3 = std::chrono::steady_clock::now();
  const double s2 = std::chrono::duration<double>(t3 - t2).count();
  std::printf("[ sumsq    ] n=%lld bf16: %.3f s, %.1f Melems/s (sum %.6g)\n", (long long)n, s2,
              n / s2 / 1e6, double(ss));

  size_t k = 0;
  for (int64_t i = 0; i < n; i += stride, ++k) {
    float rp = sp[k], rm = sm[k], rv = sv[k];
    uint16_t rb = 0;
    for (int r = 0; r < reps; ++r)
      adamw_step_reference(&rp, &rm, &rv, &g[size_t(i)], DType::kBF16, 1, 2 + r, hp, scale, &rb);
    ASSERT_EQ(std::memcmp(&rp, &p[size_t(i)], 4), 0) << "i=" << i;
    ASSERT_EQ(std::memcmp(&rm, &m[size_t(i)], 4), 0) << "i=" << i;
    ASSERT_EQ(std::memcmp(&rv, &v[size_t(i)], 4), 0) << "i=" << i;
    ASSERT_EQ(rb, pb[size_t(i)]) << "i=" << i;
  }

  // Peer in the same run: the portable scalar path, one step over the same arrays.
  auto t4 = std::chrono::steady_clock::now();
  adamw_step(OptimIsa::kScalar, ThreadPool::global(), p.data(), m.data(), v.data(), g.data(),
             DType::kBF16, n, 2 + reps, hp, scale, pb.data());
  const double s4 = std::chrono::duration<double>(std::chrono::steady_clock::now() - t4).count();
  std::printf("[ adamw    ] n=%lld isa=scalar threads=%d: %.3f s/step, %.1f Mparams/s\n",
              (long long)n, ThreadPool::global().size(), s4, n / s4 / 1e6);
}

}  // namespace
}  // namespace sf

namespace sf {
namespace {

// The step counts the weights it leaves non-finite (issue 14: weights finite after every update),
// on every path and thread count, tails included: an overflow to inf (p = 3.4e38 plus a step of
// lr = 1e37) and a NaN gradient; finite updates count nothing.
TEST(AdamW, CountsTheWeightsItLeavesNonFinite) {
  const int64_t n = 1000 + 13;
  AdamWParams hp{1e37f, 0.9f, 0.999f, 1e-8f, 0.0f};
  for (OptimIsa isa : {OptimIsa::kScalar, OptimIsa::kAvx2, OptimIsa::kAvx512}) {
    if (!optim_isa_supported(isa)) continue;
    for (int threads : {1, 3}) {
      ThreadPool pool(threads);
      std::vector<float> p(size_t(n), 0.5f), m(size_t(n), 0.0f), v(size_t(n), 0.0f);
      std::vector<float> g(size_t(n), -1.0f);  // step 1: p += lr
      int64_t want = 0;
      for (int64_t i = 0; i < n; i += 97, ++want) p[size_t(i)] = 3.4e38f;
      g[size_t(n - 1)] = std::numeric_limits<float>::quiet_NaN();
      ++want;
      EXPECT_EQ(adamw_step(isa, pool, p.data(), m.data(), v.data(), g.data(), DType::kF32, n, 1,
                           hp, 1.0f),
                want)
          << optim_isa_name(isa) << " threads " << threads;
      hp.lr = 1e-3f;
      std::fill(p.begin(), p.end(), 0.5f);
      std::fill(m.begin(), m.end(), 0.0f);
      std::fill(v.begin(), v.end(), 0.0f);
      std::fill(g.begin(), g.end(), -1.0f);
      EXPECT_EQ(adamw_step(isa, pool, p.data(), m.data(), v.data(), g.data(), DType::kF32, n, 2,
                           hp, 1.0f),
                0);
      hp.lr = 1e37f;
    }
  }
}

}  // namespace
}  // namespace sf
