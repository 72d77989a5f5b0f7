// The cuDNN attention path (sf::cuda::CudnnAttention) against the CPU reference, as
// test_cuda_ops.cpp's CudaAttention test does for our own kernel: random bf16 inputs, the
// reference on their fp32 copies, error = max|cuda − ref| / max|ref|, the same thresholds (P and
// dS enter the tensor cores as bf16). GQA 1/4/8, head_dim 64/128, one sample or several packed
// ones of lengths that are not multiples of 64 (an empty one too), equal ones (the dense graphs).
// Outputs are poisoned with NaN first, so an unwritten element fails. Skips without a CUDA device
// or without libcudnn.so.9.
#include <gtest/gtest.h>

#ifdef SF_HAVE_CUDA
#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/ops.h"
#include "backend/cuda/attention_cudnn.h"
#include "backend/cuda/cuda_backend.h"
#include "device_tensors.h"
#endif

namespace sf {
namespace {

#ifndef SF_HAVE_CUDA

TEST(CudaCudnnAttention, MatchesReference) { GTEST_SKIP() << "skipped: no CUDA device"; }
TEST(CudaCudnnStatsLayout, TransposesBothWays) { GTEST_SKIP() << "skipped: no CUDA device"; }

#else

constexpr double kOneRounding = 4e-3;  // 2^-8: one bf16 rounding of the output, with margin ×2

double rel_error(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;  // NaN (an unwritten element) never passes
    num = std::max(num, std::fabs(double(a[i]) - double(b[i])));
    den = std::max(den, std::fabs(double(b[i])));
  }
  return den > 0 ? num / den : num;
}

struct Env {
  std::unique_ptr<Backend> be;
  std::unique_ptr<Stream> s;
  std::unique_ptr<cuda::CudnnAttention> attn;
  std::string why;
};

// One backend (memory, copies) and one cuDNN attention for the suite.
Env& env() {
  static Env e = [] {
    Env r;
    CudaBackendOptions o;
    o.max_tokens = 4096;
    o.hidden = 4096;
    o.vocab = 16;
    o.max_heads = 32;
    r.be = make_cuda_backend(o);
    r.s = r.be->create_stream("test");
    r.attn = cuda::CudnnAttention::create(o.max_tokens, size_t(256) << 20, &r.why);
    return r;
  }();
  return e;
}

using test::Dev;
using test::host;
Dev upload_raw(const void* src, DType dt, std::initializer_list<int64_t> shape) {
  return test::upload_raw(*env().be, *env().s, src, dt, shape);
}
Dev upload(const std::vector<float>& v, DType dt, std::initializer_list<int64_t> shape) {
  return test::upload(*env().be, *env().s, v, dt, shape);
}
std::vector<float> download(const Tensor& t) { return test::download(*env().be, *env().s, t); }

std::vector<float> randn_bf16(int64_t n, float scale, std::mt19937& g) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = bf16_to_f32(f32_to_bf16(d(g)));
  return v;
}

// How the call learns the sample lengths: given on the host, read back, or bounded by T.
enum class Lengths { kHost, kRead, kBound };

std::string lengths_name(Lengths l) {
  return l == Lengths::kHost ? "host" : l == Lengths::kRead ? "read" : "bound";
}

struct CudnnCase {
  std::vector<int32_t> seqlens;
  int64_t NH, NKV, D;
  Lengths lengths;
};

class CudaCudnnAttention : public ::testing::TestWithParam<CudnnCase> {};

TEST_P(CudaCudnnAttention, MatchesReference) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "skipped: no CUDA device";
  if (!env().attn) GTEST_SKIP() << "skipped: cuDNN not available (" << env().why << ")";
  const CudnnCase& c = GetParam();
  cuda::CudnnAttention& attn = *env().attn;
  attn.set_unknown_lengths(c.lengths == Lengths::kBound
                               ? cuda::CudnnAttention::UnknownLengths::kBound
                               : cuda::CudnnAttention::UnknownLengths::kRead);
  std::vector<int32_t> cu{0};
  for (int32_t n : c.seqlens) cu.push_back(cu.back() + n);
  const int32_t* host_cu = c.lengths == Lengths::kHost ? cu.data() : nullptr;
  const int64_t T = cu.back(), NH = c.NH, NKV = c.NKV, D = c.D, nseq = int64_t(c.seqlens.size());
  const float scale = 1.0f / std::sqrt(float(D));
  std::mt19937 g(uint32_t(T * 131 + NH * 7 + D));  // fresh inputs per case
  std::vector<float> q = randn_bf16(T * NH * D, 1.5f, g), k = randn_bf16(T * NKV * D, 1.5f, g);
  std::vector<float> v = randn_bf16(T * NKV * D, 1.0f, g), go = randn_bf16(T * NH * D, 1.0f, g);
  Dev dq_ = upload(q, DType::kBF16, {T, NH, D}), dk_ = upload(k, DType::kBF16, {T, NKV, D});
  Dev dv_ = upload(v, DType::kBF16, {T, NKV, D}), dgo = upload(go, DType::kBF16, {T, NH, D});
  Dev dcu = upload_raw(cu.data(), DType::kI32, {nseq + 1});
  Dev out = upload(std::vector<float>(size_t(T * NH * D), NAN), DType::kBF16, {T, NH, D});
  Dev lse = upload(std::vector<float>(size_t(T * NH), NAN), DType::kF32, {T, NH});
  const cudaStream_t st = static_cast<cudaStream_t>(cuda_stream_handle(*env().s));

  ASSERT_TRUE(attn.forward(out.t, lse.t, dq_.t, dk_.t, dv_.t, dcu.t, host_cu, scale, st))
      << "cuDNN refused the forward: " << attn.last_refusal();
  std::vector<float> ro(size_t(T * NH * D)), rl(size_t(T * NH));
  Tensor hcu = dcu.t;
  hcu.data = cu.data();
  cpu::attention_forward(host(ro, out.t), host(rl, lse.t), host(q, dq_.t), host(k, dk_.t),
                         host(v, dv_.t), hcu, scale);
  std::vector<float> o = download(out.t), l = download(lse.t);
  EXPECT_LT(rel_error(o, ro), 2 * kOneRounding) << "out";
  // lse: cuDNN's stats must be the natural-log log-sum-exp of the scaled scores, like ours.
  EXPECT_LT(rel_error(l, rl), 1e-4) << "lse";

  std::vector<float> rq(size_t(T * NH * D)), rk(size_t(T * NKV * D)), rv(size_t(T * NKV * D));
  cpu::attention_backward(host(rq, dq_.t), host(rk, dk_.t), host(rv, dv_.t), host(go, dgo.t),
                          host(q, dq_.t), host(k, dk_.t), host(v, dv_.t), host(o, out.t),
                          host(l, lse.t), hcu, scale);
  // Twice: the second call must not see the first one's dQ accumulator (cuDNN clears it).
  for (int rep = 0; rep < 2; ++rep) {
    Dev gq = upload(std::vector<float>(size_t(T * NH * D), NAN), DType::kBF16, {T, NH, D});
    Dev gk = upload(std::vector<float>(size_t(T * NKV * D), NAN), DType::kBF16, {T, NKV, D});
    Dev gv = upload(std::vector<float>(size_t(T * NKV * D), NAN), DType::kBF16, {T, NKV, D});
    ASSERT_TRUE(attn.backward(gq.t, gk.t, gv.t, dgo.t, dq_.t, dk_.t, dv_.t, out.t, lse.t, dcu.t,
                              host_cu, scale, st))
        << "cuDNN refused the backward: " << attn.last_refusal();
    EXPECT_LT(rel_error(download(gq.t), rq), 3 * kOneRounding) << "dq, call " << rep + 1;
    EXPECT_LT(rel_error(download(gk.t), rk), 3 * kOneRounding) << "dk, call " << rep + 1;
    EXPECT_LT(rel_error(download(gv.t), rv), 3 * kOneRounding) << "dv, call " << rep + 1;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CudaCudnnAttention,
    ::testing::Values(
        // unpacked: GQA 1, 4, 8; head_dim 64 and 128
        CudnnCase{{200}, 4, 4, 64, Lengths::kHost}, CudnnCase{{300}, 8, 2, 128, Lengths::kRead},
        CudnnCase{{1000}, 32, 4, 128, Lengths::kHost}, CudnnCase{{257}, 16, 2, 64, Lengths::kBound},
        // packed: 3 samples of lengths not multiples of 64 (B rounds up to 4: one empty slot)
        CudnnCase{{100, 257, 37}, 8, 8, 128, Lengths::kRead},
        CudnnCase{{130, 77, 301}, 8, 2, 64, Lengths::kHost},
        CudnnCase{{500, 333, 190}, 32, 4, 128, Lengths::kRead},
        CudnnCase{{70, 150, 45}, 16, 2, 64, Lengths::kBound},
        // equal lengths: the dense graphs (no offsets, no padding mask) where S % 128 == 0 or
        // cuDNN > 9.15, the ragged ones otherwise
        CudnnCase{{300, 300, 300}, 8, 2, 128, Lengths::kRead},
        CudnnCase{{128, 128}, 16, 16, 64, Lengths::kHost},
        CudnnCase{{256, 256, 256, 256}, 32, 8, 128, Lengths::kRead},
        // an empty sample and a one-token sample
        CudnnCase{{37, 0, 300, 1, 5}, 8, 1, 128, Lengths::kRead}),
    [](const auto& info) {
      const CudnnCase& c = info.param;
      int64_t T = 0;
      for (int32_t n : c.seqlens) T += n;
      return "T" + std::to_string(T) + "_seq" + std::to_string(c.seqlens.size()) + "_H" +
             std::to_string(c.NH) + "_KV" + std::to_string(c.NKV) + "_D" + std::to_string(c.D) +
             "_" + lengths_name(c.lengths);
    });

// The dense graphs' stats layout change, against a host transpose, both ways, on sizes that are
// not multiples of its 32×32 tile (and NH above one tile). Exact: it only moves floats.
TEST(CudaCudnnStatsLayout, TransposesBothWays) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "skipped: no CUDA device";
  auto* stream = static_cast<cudaStream_t>(cuda_stream_handle(*env().s));
  for (auto [B, NH, S] :
       {std::array<int64_t, 3>{1, 1, 1}, {3, 40, 100}, {2, 7, 33}, {1, 32, 256}}) {
    const int64_t n = B * NH * S;
    std::vector<float> lse(static_cast<size_t>(n)), want(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) lse[size_t(i)] = float(i) + 0.5f;  // every value distinct
    for (int64_t b = 0; b < B; ++b)
      for (int64_t s = 0; s < S; ++s)
        for (int64_t h = 0; h < NH; ++h)
          want[size_t((b * NH + h) * S + s)] = lse[size_t((b * S + s) * NH + h)];
    Dev src = upload(lse, DType::kF32, {n}), bhs = upload(lse, DType::kF32, {n}),
        back = upload(lse, DType::kF32, {n});
    cuda::cudnn_stats_layout(src.t.f32(), bhs.t.f32(), B, NH, S, true, stream);
    cuda::cudnn_stats_layout(bhs.t.f32(), back.t.f32(), B, NH, S, false, stream);
    EXPECT_EQ(download(bhs.t), want) << "lse -> stats, B " << B << " NH " << NH << " S " << S;
    EXPECT_EQ(download(back.t), lse) << "stats -> lse, B " << B << " NH " << NH << " S " << S;
  }
}

#endif  // SF_HAVE_CUDA

}  // namespace
}  // namespace sf
