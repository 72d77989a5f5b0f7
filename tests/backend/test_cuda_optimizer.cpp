// The device optimizer (the plan's GPU-resident share) against the CPU's: Backend::adamw on CUDA
// is bit-identical with adamw_step_reference — master, m, v and the bf16 weights, from an fp32 or
// a bf16 gradient — over sizes
// that take the vector and the scalar paths, steps with and without bias correction's early
// values, weight decay, a clip factor and both lerp branches; its count of the weights it leaves
// non-finite equals the CPU's, exactly, on data planted with overflows, NaN and inf, over one
// block, many, and more elements than the grid covers in one pass; sum_squares, of F32 or BF16,
// equals the CPU's double sum to rounding (its order differs). Skips when no CUDA device is
// visible.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "device_tensors.h"
#include "optim/adamw.h"

namespace sf {
namespace {

#define SKIP_WITHOUT_CUDA() \
  if (cuda_device_count() == 0) GTEST_SKIP() << "skipped: no CUDA device"

Backend& backend() {
  static std::unique_ptr<Backend> be = [] {
    CudaBackendOptions o;
    o.max_tokens = 16;
    o.hidden = 64;
    o.vocab = 128;
    o.max_heads = 4;
    return make_cuda_backend(o);
  }();
  return *be;
}

std::vector<float> random(size_t n, float scale, uint32_t seed) {
  std::mt19937 rng{seed};
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// One int64 in device memory, for Backend::adamw's count.
struct DeviceCount {
  Buffer buf;
  explicit DeviceCount(Backend& be) : buf(be.alloc(MemoryKind::kDevice, 16, "adamw count")) {}
  int64_t* ptr() { return static_cast<int64_t*>(buf.data()); }
  int64_t read(Backend& be, Stream& s) {
    int64_t x = -1;
    be.copy(&x, ptr(), sizeof x, s);
    be.synchronize(s);
    return x;
  }
};

bool same_bits(const std::vector<float>& a, const std::vector<float>& b, size_t* where) {
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], 4) != 0) {
      *where = i;
      return false;
    }
  return true;
}

TEST(CudaOptimizer, AdamWIsBitIdenticalWithTheCpuReference) {
  SKIP_WITHOUT_CUDA();
  Backend& be = backend();
  auto s = be.create_stream("test");
  struct Case {
    int64_t n;
    AdamWParams hp;
    float scale;
  };
  const Case cases[] = {
      {4096 * 33, {1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f}, 1.0f},  // vector path
      {1001, {3e-4f, 0.9f, 0.95f, 1e-6f, 0.0f}, 0.37f},       // scalar path (n % 4 != 0)
      {4100, {1e-2f, 0.3f, 0.99f, 1e-8f, 0.01f}, 1.0f},       // 1 - beta1 ≥ 0.5: lerp's 2nd form
  };
  DeviceCount count(be);
  // The gradient in fp32, and in bf16 as a clipped GPU-resident unit keeps it.
  for (DType gdt : {DType::kF32, DType::kBF16})
    for (const Case& c : cases) {
      const size_t n = size_t(c.n);
      std::vector<float> p = random(n, 0.05f, 1), m = random(n, 1e-3f, 2), g = random(n, 1e-2f, 4);
      std::vector<float> v = random(n, 1e-3f, 3);
      for (float& x : v) x = x * x;  // a second moment is never negative
      std::vector<uint16_t> gb(n);   // the bf16 gradient's bits, as the device holds them
      for (size_t i = 0; i < n; ++i) gb[i] = f32_to_bf16(g[i]);
      const void* gref = gdt == DType::kF32 ? static_cast<const void*>(g.data()) : gb.data();
      auto dp = test::upload(be, *s, p, DType::kF32, {c.n});
      auto dm = test::upload(be, *s, m, DType::kF32, {c.n});
      auto dv = test::upload(be, *s, v, DType::kF32, {c.n});
      auto dg = test::upload(be, *s, g, gdt, {c.n});
      auto dw = test::upload(be, *s, std::vector<float>(n, 0.0f), DType::kBF16, {c.n});
      std::vector<uint16_t> w(n);
      for (int64_t step : {1, 2, 3, 1000}) {
        adamw_step_reference(p.data(), m.data(), v.data(), gref, gdt, c.n, step, c.hp, c.scale,
                             w.data());
        be.adamw(dp.t, dm.t, dv.t, dg.t, dw.t, c.hp, step, c.scale, count.ptr(), *s);
        EXPECT_EQ(count.read(be, *s), 0) << "n " << n << " step " << step;
        size_t at = 0;
        ASSERT_TRUE(same_bits(test::download(be, *s, dp.t), p, &at))
            << "master, gradient " << dtype_name(gdt) << ", n " << n << " step " << step
            << " element " << at;
        ASSERT_TRUE(same_bits(test::download(be, *s, dm.t), m, &at)) << "m, element " << at;
        ASSERT_TRUE(same_bits(test::download(be, *s, dv.t), v, &at)) << "v, element " << at;
        const std::vector<float> wd = test::download(be, *s, dw.t);
        for (size_t i = 0; i < n; ++i)
          ASSERT_EQ(wd[i], bf16_to_f32(w[i])) << "bf16 weights, element " << i;
      }
    }
}

// The kernel counts the master weights it leaves NaN or ±inf as the CPU does (adamw_step's
// return, and a count over adamw_step_reference's output), and its finite results keep the
// reference's bits. Planted: weights of ±3.4e38 that the step pushes past the float range (the
// gradient's sign decides), NaN and inf gradients, NaN and inf weights coming in.
TEST(CudaOptimizer, AdamWCountsTheWeightsItLeavesNonFinite) {
  SKIP_WITHOUT_CUDA();
  Backend& be = backend();
  auto s = be.create_stream("test");
  DeviceCount count(be);
  const AdamWParams hp{1e37f, 0.9f, 0.999f, 1e-8f, 0.0f};  // step 1: p -= lr · sign(g)
  // One block; several; the vector path's grid (2112 blocks) more than once over; scalar paths.
  for (int64_t n : {int64_t(1024), int64_t(4096 * 33), int64_t(2112) * 256 * 4 * 2 + 4096,
                    int64_t(1001), int64_t(2112) * 256 + 77}) {
    const size_t N = size_t(n);
    std::vector<float> p = random(N, 0.05f, 5), m(N, 0.0f), v(N, 0.0f), g = random(N, 1e-2f, 6);
    // (weight, gradient) planted; nullopt keeps the random value.
    const std::pair<std::optional<float>, std::optional<float>> plants[] = {
        {3.4e38f, -1.0f},                // overflows to +inf
        {-3.4e38f, 1.0f},                // overflows to -inf
        {3.4e38f, 1.0f},                 // stays finite
        {std::nullopt, std::nanf("")},   // NaN
        {std::nullopt, INFINITY},        // inf / inf: NaN
        {std::nullopt, -INFINITY},       //
        {INFINITY, std::nullopt},        // stays inf
        {std::nanf(""), std::nullopt}};  // stays NaN
    std::mt19937 rng{uint32_t(n)};
    for (int k = 0; k < 320; ++k) {  // some land on one element twice: the count is the result's
      const size_t i = rng() % N;
      const auto& [pw, pg] = plants[k % 8];
      if (pw) p[i] = *pw;
      if (pg) g[i] = *pg;
    }
    std::vector<float> rp = p, rm = m, rv = v, fp = p, fm = m, fv = v;
    adamw_step_reference(rp.data(), rm.data(), rv.data(), g.data(), DType::kF32, n, 1, hp, 1.0f);
    int64_t want = 0;
    for (float x : rp) want += !std::isfinite(x);
    ASSERT_GT(want, 50) << "n " << n;
    EXPECT_EQ(adamw_step(fp.data(), fm.data(), fv.data(), g.data(), DType::kF32, n, 1, hp, 1.0f),
              want)
        << "the CPU's fast path, n " << n;
    auto dp = test::upload(be, *s, p, DType::kF32, {n});
    auto dm = test::upload(be, *s, m, DType::kF32, {n});
    auto dv = test::upload(be, *s, v, DType::kF32, {n});
    auto dg = test::upload(be, *s, g, DType::kF32, {n});
    auto dw = test::upload(be, *s, std::vector<float>(N, 0.0f), DType::kBF16, {n});
    be.adamw(dp.t, dm.t, dv.t, dg.t, dw.t, hp, 1, 1.0f, count.ptr(), *s);
    EXPECT_EQ(count.read(be, *s), want) << "n " << n;
    const std::vector<float> got = test::download(be, *s, dp.t);
    for (size_t i = 0; i < N; ++i) {
      if (std::isnan(rp[i])) {  // NaN payloads differ between the two: NaN is enough
        ASSERT_TRUE(std::isnan(got[i])) << "n " << n << " element " << i;
        continue;
      }
      ASSERT_EQ(std::memcmp(&got[i], &rp[i], 4), 0)
          << "n " << n << " element " << i << ": " << got[i] << " vs " << rp[i];
    }
    // A second update of the same tensor: the count is this update's, not a running total.
    be.adamw(dp.t, dm.t, dv.t, dg.t, Tensor(), hp, 2, 0.0f, count.ptr(), *s);
    int64_t again = 0;
    adamw_step_reference(rp.data(), rm.data(), rv.data(), g.data(), DType::kF32, n, 2, hp, 0.0f);
    for (float x : rp) again += !std::isfinite(x);
    EXPECT_EQ(count.read(be, *s), again) << "n " << n;
  }
}

TEST(CudaOptimizer, SumSquaresMatchesTheCpuAndRepeatsExactly) {
  SKIP_WITHOUT_CUDA();
  Backend& be = backend();
  auto s = be.create_stream("test");
  Buffer scratch = be.alloc(MemoryKind::kDevice,
                            (1 + Backend::kSumSquaresPartials) * sizeof(double), "sum_squares");
  double* out = static_cast<double*>(scratch.data());
  for (DType dt : {DType::kF32, DType::kBF16}) {  // BF16: a clipped host unit's gradient
    for (int64_t n : {int64_t(1), int64_t(1000), int64_t(3) << 20}) {
      std::vector<float> x = random(size_t(n), 0.3f, 9);
      if (dt == DType::kBF16)
        for (float& e : x) e = bf16_to_f32(f32_to_bf16(e));
      auto dx = test::upload(be, *s, x, dt, {n});
      const double ref = sum_squares(x.data(), DType::kF32, n);
      double got[2];
      for (double& r : got) {
        be.sum_squares(out, out + 1, dx.t, *s);
        be.copy(&r, out, sizeof(double), *s);
        be.synchronize(*s);
      }
      EXPECT_NEAR(got[0], ref, 1e-12 * ref) << dtype_name(dt) << " n " << n;
      EXPECT_EQ(std::memcmp(&got[0], &got[1], sizeof(double)), 0)
          << "not deterministic, " << dtype_name(dt) << " n " << n;
    }
  }
}

}  // namespace
}  // namespace sf
