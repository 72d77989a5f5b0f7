// The CUDA backend's attention_decode against the CPU reference (sf::cpu::attention_decode) on the
// same bf16-exact inputs, as test_cuda_ops.cpp does: error = max|cuda − ref| / max|ref|. The
// kernel keeps scores, weights and sums in fp32 and rounds only its output to bf16, so the bound
// is one rounding (2^-9 relative, ×2 margin = 4e-3). Swept over one-query decoding and prefill
// chunks, short and long caches (more keys than the block's warps, a partial last round), GQA 1 to
// 8, and head_dims from 8 to 256 (1 to 8 elements a lane). Skips when no CUDA device is visible.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/ops.h"
#include "backend/cuda/cuda_backend.h"
#include "device_tensors.h"

namespace sf {
namespace {

using test::Dev;

constexpr double kOneRounding = 4e-3;

double rel_error(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    num = std::max(num, std::fabs(double(a[i]) - double(b[i])));
    den = std::max(den, std::fabs(double(b[i])));
  }
  return den > 0 ? num / den : num;
}

std::vector<float> randn_bf16(int64_t n, float scale, std::mt19937& g) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = bf16_to_f32(f32_to_bf16(d(g)));
  return v;
}

struct DecodeCase {
  int64_t Tq, Tk, NH, NKV, D;
};

class CudaAttentionDecode : public ::testing::TestWithParam<DecodeCase> {};

TEST_P(CudaAttentionDecode, MatchesTheCpuReference) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "skipped: no CUDA device";
  const DecodeCase c = GetParam();
  CudaBackendOptions o;
  o.max_tokens = 16;
  o.hidden = 256;
  o.vocab = 256;
  auto be = make_cuda_backend(o);
  auto s = be->create_stream("test");
  std::mt19937 g(uint32_t(c.Tq * 131 + c.Tk * 7 + c.D));
  std::vector<float> q = randn_bf16(c.Tq * c.NH * c.D, 1.5f, g);
  std::vector<float> k = randn_bf16(c.Tk * c.NKV * c.D, 1.5f, g);
  std::vector<float> v = randn_bf16(c.Tk * c.NKV * c.D, 1.0f, g);
  Dev dq = test::upload(*be, *s, q, DType::kBF16, {c.Tq, c.NH, c.D});
  Dev dk = test::upload(*be, *s, k, DType::kBF16, {c.Tk, c.NKV, c.D});
  Dev dv = test::upload(*be, *s, v, DType::kBF16, {c.Tk, c.NKV, c.D});
  Dev out =
      test::upload(*be, *s, std::vector<float>(q.size(), NAN), DType::kBF16, {c.Tq, c.NH, c.D});
  const float scale = 1.0f / std::sqrt(float(c.D));
  be->attention_decode(out.t, dq.t, dk.t, dv.t, scale, *s);
  std::vector<float> ref(q.size());
  cpu::attention_decode(test::host(ref, out.t), test::host(q, dq.t), test::host(k, dk.t),
                        test::host(v, dv.t), scale);
  const double e = rel_error(test::download(*be, *s, out.t), ref);
  EXPECT_LT(e, kOneRounding);
  std::printf("[ errors ] attention_decode Tq=%lld Tk=%lld: %.3g\n", (long long)c.Tq,
              (long long)c.Tk, e);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CudaAttentionDecode,
    ::testing::Values(DecodeCase{1, 1, 2, 1, 64}, DecodeCase{1, 7, 4, 4, 16},
                      DecodeCase{1, 37, 8, 2, 8}, DecodeCase{1, 1000, 32, 8, 128},
                      DecodeCase{1, 4099, 8, 1, 128}, DecodeCase{5, 300, 8, 2, 64},
                      DecodeCase{23, 23, 4, 2, 16}, DecodeCase{17, 60, 6, 3, 48},
                      DecodeCase{2, 129, 4, 1, 96}, DecodeCase{3, 50, 4, 2, 256},
                      DecodeCase{1, 70, 2, 2, 200}),
    [](const auto& info) {
      const DecodeCase& c = info.param;
      return "Tq" + std::to_string(c.Tq) + "_Tk" + std::to_string(c.Tk) + "_H" +
             std::to_string(c.NH) + "_KV" + std::to_string(c.NKV) + "_D" + std::to_string(c.D);
    });

TEST(CudaAttentionDecode, ShapeErrorsNameTheOp) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "skipped: no CUDA device";
  CudaBackendOptions o;
  o.max_tokens = 16;
  o.hidden = 256;
  o.vocab = 256;
  auto be = make_cuda_backend(o);
  auto s = be->create_stream("test");
  Buffer b = be->alloc(MemoryKind::kDevice, 1 << 16, "test");
  const Tensor q(b.data(), DType::kBF16, {2, 4, 16}), k(b.data(), DType::kBF16, {1, 2, 16});
  try {
    be->attention_decode(q, q, k, k, 0.25f, *s);
    FAIL() << "more queries than keys was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("attention_decode: shapes do not match"),
              std::string::npos)
        << e.what();
  }
  const Tensor q3(b.data(), DType::kBF16, {1, 4, 512}), k3(b.data(), DType::kBF16, {1, 4, 512});
  try {
    be->attention_decode(q3, q3, k3, k3, 0.25f, *s);
    FAIL() << "head_dim 512 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("head_dim 512"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sf
