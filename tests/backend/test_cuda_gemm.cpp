// sf::cuda::Gemm: the cuBLASLt path against gemm_reference (the plain one-thread-per-element
// kernel), and that reference against a double-precision loop on the host. Swept: M, N, K that are
// multiples of no tile (1 … 4097, K up to 16384 as in the dW products), the four transpose
// combinations, leading dimensions > cols (odd ones too), beta 0 (y poisoned with NaN: it must not
// be read) and 1 (accumulating into an existing y, as the dW and dx paths do), alpha ≠ 1, bias on
// and off, BF16 and F32 outputs. Operands are random bf16 values, so every product is exact in
// fp32 and the two paths differ only by the order of their fp32 sums and by where the BF16
// output rounds (cuBLASLt's bias epilogue rounds twice there: see kCublasBf16Extra). The padding
// past each row of y must come back untouched. Skips without a CUDA device (CI builds these tests
// too).
#include <gtest/gtest.h>

#ifdef SF_HAVE_CUDA
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/gemm.h"
#include "core/error.h"
#include "device_tensors.h"
#endif

namespace sf {
namespace {

#ifndef SF_HAVE_CUDA

TEST(CudaGemm, CublasLtMatchesReference) { GTEST_SKIP() << "skipped: no CUDA device"; }

#else

using cuda::GemmImpl;
using cuda::Mat;

#define SKIP_WITHOUT_CUDA() \
  if (cuda_device_count() == 0) GTEST_SKIP() << "skipped: no CUDA device"

// Thresholds, as a fraction of max|y| (plus, for BF16 outputs, one unit in the last place of the
// element itself: two fp32 values a hair apart can round to neighbouring bf16 values).
//
// cuBLASLt vs the reference: both sum exact products in fp32, in different orders (the tensor
// cores in k-steps of 16, maybe split over K; the reference one k at a time). The difference of
// two such sums is a random walk of roundings, ~√K·2⁻²⁴ of the partial sums' size (√K for unit
// operands) against max|y| ≈ 4√K: ~1e-6 at K = 16384. Even if every k-step of the tensor cores
// truncated instead of rounding (a bias that adds up linearly: (K/16)·2⁻²³·√K / 4√K ≤ 3e-5 at
// K = 16384), 2e-4 holds with margin ×6, and it stays 20× under one bf16 rounding (4e-3): a lost
// or doubled rounding, a missing beta·y or a wrong operand cannot pass.
constexpr double kCublasVsReference = 2e-4;
// cuBLASLt's BF16 outputs depart from "fp32 sums, one rounding" in one way, measured on the H200
// (2026-12-02, CUDA 13.0; bench/kernels/h200_2026-12-02_racecheck_ce.log): the bias epilogue
// rounds twice, every element equals bf16(bf16(alpha·a·op(b) + beta·y) + bias) (an F32 bias with
// a BF16 y is refused). Allowed on top: one ulp of that pre-bias value (the element itself can
// cancel to far below it). (Split-K partial sums stored in bf16 were the other, 0.83 off at
// max|y| 552 for M = 7, N = 4097, K = 16384: gemm.cu now asks for fp32 reductions only, and this
// sweep holds it to one rounding.) F32 outputs get no allowance.
constexpr double kCublasBf16Extra = 0.0;
// The reference vs an exact (double) sum: one fp32 sum in order, K ≤ 1000 here: ~√K·2⁻²⁴·√K /
// 4√K ≈ 5e-7; 1e-5 is margin ×20.
constexpr double kReferenceVsExact = 1e-5;

struct Env {
  std::unique_ptr<Backend> be;
  std::unique_ptr<Stream> s;
  Buffer ws;  // cuBLASLt's workspace
};

Env& env() {
  static Env e = [] {
    Env r;
    CudaBackendOptions o;  // only memory and a stream are used: small workspaces
    o.max_tokens = 16;
    o.hidden = 64;
    o.vocab = 16;
    o.max_heads = 1;
    o.ce_chunk_bytes = size_t(1) << 20;
    o.cublaslt_workspace_bytes = size_t(1) << 20;
    r.be = make_cuda_backend(o);
    r.s = r.be->create_stream("test");
    r.ws = r.be->alloc(MemoryKind::kDevice, size_t(32) << 20, "gemm test workspace");
    return r;
  }();
  return e;
}
cudaStream_t raw_stream() { return static_cast<cudaStream_t>(cuda_stream_handle(*env().s)); }

using test::Dev;
Dev upload(const std::vector<float>& v, DType dt) {
  return test::upload(*env().be, *env().s, v, dt, {int64_t(v.size())});
}
std::vector<float> download(const Tensor& t) { return test::download(*env().be, *env().s, t); }

std::mt19937& rng() {
  static std::mt19937 g(4321);
  return g;
}
// Normal values of the given scale, rounded to bf16 when `bf16` (then exact on both sides).
std::vector<float> randn(int64_t n, float scale, bool bf16) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = bf16 ? bf16_to_f32(f32_to_bf16(d(rng()))) : d(rng());
  return v;
}

// One unit in the last place of a bf16 value of magnitude |v| (8 significant bits).
double bf16_ulp(double v) {
  int e = 0;
  std::frexp(std::max(std::fabs(v), 1e-30), &e);  // |v| in [2^(e-1), 2^e)
  return std::ldexp(1.0, e - 8);
}

// What a comparison allows, per element: tol·max|y|, plus for a BF16 output one ulp of the element
// and extra·max|y|, plus (with `bias`) one ulp of the pre-bias value want − bias[col].
struct Allow {
  double tol;
  bool bf16_out;
  double extra = 0;
  const std::vector<float>* bias = nullptr;
};

// Compares y[rows, cols] (stride ld) of `got` with `want`: returns the worst ratio of
// |got − want| to what is allowed (≤ 1 passes; NaN or Inf on either side = infinity) and sets
// *norm to max|got − want| / max|y|; checks that `got`'s padding past each row still equals
// `init`'s (NaN = NaN).
double worst_ratio(const std::vector<float>& got, const std::vector<double>& want,
                   const std::vector<float>& init, int64_t rows, int64_t cols, int64_t ld,
                   const Allow& allow, double* norm, std::string* why) {
  double scale = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) scale = std::max(scale, std::fabs(want[r * ld + c]));
  double worst = 0, max_diff = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < ld; ++c) {
      const size_t i = size_t(r * ld + c);
      if (c >= cols) {
        const bool same = got[i] == init[i] || (std::isnan(got[i]) && std::isnan(init[i]));
        if (!same) {
          *why = "padding of row " + std::to_string(r) + " written";
          return INFINITY;
        }
        continue;
      }
      if (!std::isfinite(got[i]) || !std::isfinite(want[i])) {
        *why = "non-finite y[" + std::to_string(r) + "," + std::to_string(c) +
               "]: " + std::to_string(got[i]) + " vs " + std::to_string(want[i]);
        return INFINITY;
      }
      const double d = std::fabs(double(got[i]) - want[i]);
      max_diff = std::max(max_diff, d);
      double allowed = allow.tol * scale + 1e-30;
      if (allow.bf16_out)
        allowed +=
            bf16_ulp(std::max(std::fabs(double(got[i])), std::fabs(want[i]))) + allow.extra * scale;
      if (allow.bias) allowed += bf16_ulp(want[i] - (*allow.bias)[size_t(c)]);
      if (d / allowed > worst) {
        worst = d / allowed;
        *why = "y[" + std::to_string(r) + "," + std::to_string(c) +
               "] = " + std::to_string(got[i]) + " vs " + std::to_string(want[i]) + " (max|y| " +
               std::to_string(scale) + ")";
      }
    }
  }
  *norm = scale > 0 ? max_diff / scale : max_diff;
  return worst;
}

// The parts of one product that vary besides the shape.
struct Variant {
  float alpha, beta;
  bool bias;
  int64_t pad;  // ld = cols + pad for a, b and y
};
// beta 0/1 × bias off/on, alpha 1 and not, dense rows, rows padded to 16 bytes and odd padding
// (rows that are only 2-byte aligned).
constexpr Variant kVariants[] = {
    {1.0f, 0.0f, false, 0}, {1.0f, 1.0f, false, 8}, {-0.5f, 0.0f, true, 3}, {0.75f, 1.0f, true, 1}};

struct Shape {
  int64_t M, N, K;
};

std::string describe(const Shape& s, bool ta, bool tb, DType yt, const Variant& v) {
  return str_cat("M=", s.M, " N=", s.N, " K=", s.K, ta ? " aT" : " a", tb ? " bT" : " b", " y ",
                 dtype_name(yt), " alpha=", v.alpha, " beta=", v.beta, v.bias ? " bias" : "",
                 " pad=", v.pad);
}

// One product of `shape` in every transpose/dtype/variant combination: `check` gets the device
// results and the inputs. a and b are views into one random pool each (big enough for every
// layout), so all combinations of a shape share their uploads.
template <typename Check>
void sweep(const Shape& s, Check check) {
  const int64_t max_pad = 8;
  const int64_t a_elems = std::max(s.M * (s.K + max_pad), s.K * (s.M + max_pad));
  const int64_t b_elems = std::max(s.K * (s.N + max_pad), s.N * (s.K + max_pad));
  const std::vector<float> ha = randn(a_elems, 1.0f, true), hb = randn(b_elems, 1.0f, true);
  Dev da = upload(ha, DType::kBF16), db = upload(hb, DType::kBF16);
  const float y_scale = std::sqrt(float(std::max<int64_t>(s.K, 1)));  // about |a·b|
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (DType yt : {DType::kBF16, DType::kF32}) {
        for (const Variant& v : kVariants) {
          const bool bf16_out = yt == DType::kBF16;
          const Mat a{da.t.data, DType::kBF16, ta ? s.K : s.M, ta ? s.M : s.K,
                      (ta ? s.M : s.K) + v.pad};
          const Mat b{db.t.data, DType::kBF16, tb ? s.N : s.K, tb ? s.K : s.N,
                      (tb ? s.K : s.N) + v.pad};
          const int64_t ldy = s.N + v.pad;
          // beta = 0: y is NaN garbage that must not be read; else values to accumulate onto.
          const std::vector<float> y0 = v.beta == 0.0f ? std::vector<float>(size_t(s.M * ldy), NAN)
                                                       : randn(s.M * ldy, y_scale, bf16_out);
          const std::vector<float> bias = randn(s.N, y_scale, bf16_out);
          Dev dbias = upload(bias, yt);
          const std::string what = describe(s, ta, tb, yt, v);
          check(what, a, ta, b, tb, yt, ldy, y0, v, v.bias ? dbias.t.data : nullptr, ha, hb, bias);
        }
      }
    }
  }
}

// Runs `gemm` into a fresh copy of y0 and returns the result.
std::vector<float> run(cuda::Gemm& gemm, const std::string& what, Mat a, bool ta, Mat b, bool tb,
                       DType yt, int64_t M, int64_t N, int64_t ldy, const std::vector<float>& y0,
                       const Variant& v, const void* bias) {
  Dev dy = upload(y0, yt);
  gemm.run(what.c_str(), Mat{dy.t.data, yt, M, N, ldy}, a, ta, b, tb, v.alpha, v.beta, bias,
           raw_stream());
  return download(dy.t);
}

TEST(CudaGemm, SfGemmSelectsTheImplementation) {
  EXPECT_EQ(cuda::gemm_impl_from(nullptr), GemmImpl::kCublasLt);
  EXPECT_EQ(cuda::gemm_impl_from(""), GemmImpl::kCublasLt);
  EXPECT_EQ(cuda::gemm_impl_from("cublaslt"), GemmImpl::kCublasLt);
  EXPECT_EQ(cuda::gemm_impl_from("reference"), GemmImpl::kReference);
  try {
    cuda::gemm_impl_from("naive");
    FAIL() << "an unknown SF_GEMM must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("SF_GEMM=naive"), std::string::npos) << e.what();
  }
}

// The reference itself, against a double-precision sum on the host (small shapes: the host loop
// is M·N·K).
TEST(CudaGemm, ReferenceMatchesHost) {
  SKIP_WITHOUT_CUDA();
  cuda::Gemm ref(env().ws.data(), env().ws.size(), GemmImpl::kReference);
  ASSERT_EQ(ref.impl(), GemmImpl::kReference);
  double overall = 0;
  std::string overall_what;
  for (Shape s : {Shape{1, 1, 1}, Shape{7, 33, 129}, Shape{33, 7, 1000}, Shape{129, 65, 33}}) {
    sweep(s, [&](const std::string& what, Mat a, bool ta, Mat b, bool tb, DType yt, int64_t ldy,
                 const std::vector<float>& y0, const Variant& v, const void* dbias,
                 const std::vector<float>& ha, const std::vector<float>& hb,
                 const std::vector<float>& bias) {
      const std::vector<float> got = run(ref, what, a, ta, b, tb, yt, s.M, s.N, ldy, y0, v, dbias);
      std::vector<double> want(y0.size(), 0.0);
      for (int64_t m = 0; m < s.M; ++m) {
        for (int64_t n = 0; n < s.N; ++n) {
          double acc = 0;
          for (int64_t k = 0; k < s.K; ++k) {
            const double x = ha[size_t(ta ? k * a.ld + m : m * a.ld + k)];
            const double w = hb[size_t(tb ? n * b.ld + k : k * b.ld + n)];
            acc += x * w;
          }
          double r = double(v.alpha) * acc;
          if (v.beta != 0.0f) r += double(v.beta) * y0[size_t(m * ldy + n)];
          if (v.bias) r += bias[size_t(n)];
          want[size_t(m * ldy + n)] = r;
        }
      }
      std::string why;
      double norm = 0;
      const double worst = worst_ratio(got, want, y0, s.M, s.N, ldy,
                                       Allow{kReferenceVsExact, yt == DType::kBF16}, &norm, &why);
      EXPECT_LE(worst, 1.0) << what << ": " << why;
      if (worst > overall) overall = worst, overall_what = what + ": " + why;
    });
  }
  std::printf("[ worst    ] %.3g of the threshold, at %s\n", overall, overall_what.c_str());
}

// cuBLASLt against the reference over the swept shapes.
TEST(CudaGemm, CublasLtMatchesReference) {
  SKIP_WITHOUT_CUDA();
  cuda::Gemm lt(env().ws.data(), env().ws.size(), GemmImpl::kCublasLt);
  cuda::Gemm ref(env().ws.data(), env().ws.size(), GemmImpl::kReference);
  double overall = 0, worst_norm[3] = {0, 0, 0};
  std::string overall_what, worst_norm_what[3];
  // M·N·K stays ≤ 2.1e9 so that the reference (a few hundred GFLOP/s) keeps the sweep short.
  const Shape shapes[] = {{1, 1, 1},         {1, 4097, 7},       {4097, 1, 33},
                          {7, 33, 129},      {33, 129, 1000},    {129, 1000, 33},
                          {1000, 129, 4097}, {4097, 1000, 7},    {1000, 4097, 129},
                          {33, 129, 16384},  {129, 1000, 16384}, {7, 4097, 16384}};
  for (const Shape& s : shapes) {
    sweep(s, [&](const std::string& what, Mat a, bool ta, Mat b, bool tb, DType yt, int64_t ldy,
                 const std::vector<float>& y0, const Variant& v, const void* dbias,
                 const std::vector<float>&, const std::vector<float>&,
                 const std::vector<float>& bias) {
      const std::vector<float> want_f =
          run(ref, what, a, ta, b, tb, yt, s.M, s.N, ldy, y0, v, dbias);
      const std::vector<float> got = run(lt, what, a, ta, b, tb, yt, s.M, s.N, ldy, y0, v, dbias);
      const std::vector<double> want(want_f.begin(), want_f.end());
      const bool bf16_out = yt == DType::kBF16;
      const Allow allow{kCublasVsReference, bf16_out, bf16_out ? kCublasBf16Extra : 0.0,
                        bf16_out && v.bias ? &bias : nullptr};
      std::string why;
      double norm = 0;
      const double worst = worst_ratio(got, want, y0, s.M, s.N, ldy, allow, &norm, &why);
      EXPECT_LE(worst, 1.0) << what << ": " << why;
      if (worst > overall) overall = worst, overall_what = what + ": " + why;
      // the largest normalised difference of each kind of output, for the record
      const int kind = !bf16_out ? 0 : v.bias ? 2 : 1;
      if (norm > worst_norm[kind]) worst_norm[kind] = norm, worst_norm_what[kind] = what;
    });
  }
  std::printf("[ worst    ] %.3g of the threshold, at %s\n", overall, overall_what.c_str());
  const char* kinds[] = {"F32", "BF16", "BF16 + bias"};
  for (int k = 0; k < 3; ++k)
    std::printf("[ max diff ] %s outputs: %.3g of max|y|, at %s\n", kinds[k], worst_norm[k],
                worst_norm_what[k].c_str());
}

#endif

}  // namespace
}  // namespace sf
