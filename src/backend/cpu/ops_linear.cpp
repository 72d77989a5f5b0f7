// defines: sf::cpu::linear_forward, linear_backward_input, linear_backward_weight — and the one
// fp32 GEMM they share (cache-blocked, packed operands, a 4x8 register micro-kernel).
#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/ops.h"
#include "core/thread_pool.h"

namespace sf::cpu {
namespace {

// Micro-kernel tile: MR rows of C by NR columns, held in registers over the whole depth block.
// The loops over MR/NR have fixed trip counts so that GCC/Clang unroll and vectorise them at
// -O2 (the build is not -march=native: plain SSE2 must already be fast).
constexpr int64_t kMR = 4;
constexpr int64_t kNR = 8;
// Cache blocks: an A block MC x KC (64 KB) stays in L2, one packed B panel NR x KC (8 KB) in L1.
constexpr int64_t kMC = 64;
constexpr int64_t kNC = 256;
constexpr int64_t kKC = 256;

// A strided matrix view: element (r, c) = data[r * rs + c * cs]. Lets one GEMM serve x·wᵀ,
// dy·w and dyᵀ·x without materialising any transpose.
struct MatView {
  const float* data;
  int64_t rs, cs;
  float at(int64_t r, int64_t c) const { return data[r * rs + c * cs]; }
};

// acc[MR][NR] = Σ_p ap[p][i] · bp[p][j] over kc packed depth steps.
inline void micro_kernel(int64_t kc, const float* ap, const float* bp, float acc[kMR][kNR]) {
  float c[kMR][kNR] = {};
  for (int64_t p = 0; p < kc; ++p) {
    const float* b = bp + p * kNR;
    for (int64_t i = 0; i < kMR; ++i) {
      const float a = ap[p * kMR + i];
      for (int64_t j = 0; j < kNR; ++j) c[i][j] += a * b[j];
    }
  }
  std::memcpy(acc, c, sizeof(c));
}

// C[M,N] (row-major, ld N) = (accumulate ? C : 0) + A[M,P] · B[P,N].
void gemm(int64_t M, int64_t N, int64_t P, MatView A, MatView B, float* C, bool accumulate) {
  if (M == 0 || N == 0) return;
  if (P == 0) {
    if (!accumulate) std::fill(C, C + M * N, 0.0f);
    return;
  }
  const int64_t mblocks = (M + kMC - 1) / kMC, nblocks = (N + kNC - 1) / kNC;
  // One task per C block: it owns its output, so no two threads ever write the same element,
  // and each packs its own A and B blocks (a copy per 2·MC resp. 2·NC flops: negligible).
  parallel_for(mblocks * nblocks, 1, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> ap, bp;
    ap.resize(kMC * kKC);
    bp.resize(kNC * kKC);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t m0 = (task / nblocks) * kMC, n0 = (task % nblocks) * kNC;
      const int64_t mc = std::min(kMC, M - m0), nc = std::min(kNC, N - n0);
      for (int64_t p0 = 0; p0 < P; p0 += kKC) {
        const int64_t kc = std::min(kKC, P - p0);
        // Pack A into micro-panels [MR rows][kc] stored depth-major, zero-padding the tail rows.
        for (int64_t i0 = 0; i0 < mc; i0 += kMR) {
          float* dst = ap.data() + i0 * kc;
          for (int64_t p = 0; p < kc; ++p)
            for (int64_t i = 0; i < kMR; ++i)
              dst[p * kMR + i] = i0 + i < mc ? A.at(m0 + i0 + i, p0 + p) : 0.0f;
        }
        // Pack B into panels [kc][NR], zero-padding the tail columns.
        for (int64_t j0 = 0; j0 < nc; j0 += kNR) {
          float* dst = bp.data() + j0 * kc;
          for (int64_t j = 0; j < kNR; ++j) {
            if (j0 + j < nc) {
              for (int64_t p = 0; p < kc; ++p) dst[p * kNR + j] = B.at(p0 + p, n0 + j0 + j);
            } else {
              for (int64_t p = 0; p < kc; ++p) dst[p * kNR + j] = 0.0f;
            }
          }
        }
        const bool add = accumulate || p0 > 0;
        for (int64_t j0 = 0; j0 < nc; j0 += kNR) {
          for (int64_t i0 = 0; i0 < mc; i0 += kMR) {
            float acc[kMR][kNR];
            micro_kernel(kc, ap.data() + i0 * kc, bp.data() + j0 * kc, acc);
            const int64_t ni = std::min(kMR, mc - i0), nj = std::min(kNR, nc - j0);
            for (int64_t i = 0; i < ni; ++i) {
              float* c = C + (m0 + i0 + i) * N + n0 + j0;
              for (int64_t j = 0; j < nj; ++j) c[j] = add ? c[j] + acc[i][j] : acc[i][j];
            }
          }
        }
      }
    }
  });
}

void check_f32(const char* op, const char* name, const Tensor& t) {
  SF_CHECK(t.dtype == DType::kF32, op, ": ", name, " must be F32, got ", dtype_name(t.dtype));
}

}  // namespace

void linear_forward(Tensor y, Tensor x, Tensor w, Tensor bias) {
  check_f32("linear_forward", "y", y);
  check_f32("linear_forward", "x", x);
  check_f32("linear_forward", "w", w);
  const int64_t M = x.rows(), K = x.cols(), N = w.dim(0);
  SF_CHECK(w.ndim == 2 && w.dim(1) == K && y.rows() == M && y.cols() == N,
           "linear_forward: shapes do not match y[M,N] = x[M,K]·w[N,K]^T: y ", y.shape_str(),
           ", x ", x.shape_str(), ", w ", w.shape_str());
  gemm(M, N, K, MatView{x.f32(), K, 1}, MatView{w.f32(), 1, K}, y.f32(), false);
  if (bias.empty()) return;
  check_f32("linear_forward", "bias", bias);
  SF_CHECK(bias.numel() == N, "linear_forward: bias ", bias.shape_str(), " must have N=", N,
           " elements (w ", w.shape_str(), ")");
  const float* b = bias.f32();
  float* yp = y.f32();
  parallel_for(M, 64, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t n = 0; n < N; ++n) yp[r * N + n] += b[n];
  });
}

void linear_backward_input(Tensor dx, Tensor dy, Tensor w, bool accumulate) {
  check_f32("linear_backward_input", "dx", dx);
  check_f32("linear_backward_input", "dy", dy);
  check_f32("linear_backward_input", "w", w);
  const int64_t M = dy.rows(), N = dy.cols(), K = w.ndim == 2 ? w.dim(1) : -1;
  SF_CHECK(w.ndim == 2 && w.dim(0) == N && dx.rows() == M && dx.cols() == K,
           "linear_backward_input: shapes do not match dx[M,K] = dy[M,N]·w[N,K]: dx ",
           dx.shape_str(), ", dy ", dy.shape_str(), ", w ", w.shape_str());
  gemm(M, K, N, MatView{dy.f32(), N, 1}, MatView{w.f32(), K, 1}, dx.f32(), accumulate);
}

void linear_backward_weight(Tensor dw, Tensor dbias, Tensor dy, Tensor x) {
  check_f32("linear_backward_weight", "dw", dw);
  check_f32("linear_backward_weight", "dy", dy);
  check_f32("linear_backward_weight", "x", x);
  const int64_t M = dy.rows(), N = dy.cols(), K = x.cols();
  SF_CHECK(x.rows() == M && dw.ndim == 2 && dw.dim(0) == N && dw.dim(1) == K,
           "linear_backward_weight: shapes do not match dw[N,K] += dy[M,N]^T·x[M,K]: dw ",
           dw.shape_str(), ", dy ", dy.shape_str(), ", x ", x.shape_str());
  // dw(n, k) = Σ_m dy(m, n) · x(m, k): A = dyᵀ, read through strides.
  gemm(N, K, M, MatView{dy.f32(), 1, N}, MatView{x.f32(), K, 1}, dw.f32(), true);
  if (dbias.empty()) return;
  check_f32("linear_backward_weight", "dbias", dbias);
  SF_CHECK(dbias.numel() == N, "linear_backward_weight: dbias ", dbias.shape_str(),
           " must have N=", N, " elements (dy ", dy.shape_str(), ")");
  const float* g = dy.f32();
  float* db = dbias.f32();
  // Threads own column ranges; each column is summed over all rows in double, in row order.
  parallel_for(N, 16, [&](int64_t n0, int64_t n1) {
    std::vector<double> acc(size_t(n1 - n0), 0.0);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = n0; n < n1; ++n) acc[size_t(n - n0)] += g[m * N + n];
    for (int64_t n = n0; n < n1; ++n) db[n] += float(acc[size_t(n - n0)]);
  });
}

}  // namespace sf::cpu
