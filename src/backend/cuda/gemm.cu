// defines: sf::cuda::Gemm (cuBLASLt, or gemm_reference under SF_GEMM=reference),
// gemm_impl_from, gemm_impl_from_env. Row-major Y[M,N] = A[M,K]·B[K,N] is column-major
// Yᵀ[N,M] = Bᵀ[N,K]·Aᵀ[K,M]: the operands swap and each row-major matrix is read as its
// column-major transpose, with no copies.
#include <cublasLt.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/gemm.h"

namespace sf::cuda {
namespace {

const char* lt_status(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "cuBLAS error";
  }
}

#define SF_LT_CHECK(call, ...)                                                                 \
  do {                                                                                         \
    cublasStatus_t sf_st_ = (call);                                                            \
    if (sf_st_ != CUBLAS_STATUS_SUCCESS)                                                       \
      throw ::sf::Error(::sf::str_cat(__VA_ARGS__, ": ", #call, " failed: ", lt_status(sf_st_))); \
  } while (0)

cudaDataType_t lt_type(DType t) {
  switch (t) {
    case DType::kBF16: return CUDA_R_16BF;
    case DType::kF32: return CUDA_R_32F;
    case DType::kF16: return CUDA_R_16F;
    default: SF_FAIL("cuBLASLt: unsupported dtype ", dtype_name(t));
  }
}

// Largest power of two (<= 256) dividing the address: cuBLASLt's heuristic assumes 256-byte
// aligned operands unless told otherwise.
uint32_t alignment(const void* p) {
  uintptr_t a = reinterpret_cast<uintptr_t>(p);
  uint32_t al = 256;
  while (al > 1 && (a % al) != 0) al >>= 1;
  return al;
}

struct Key {
  int64_t m, n, k, lda, ldb, ldc;
  int32_t ta, tb, at, bt, ct, epi;
  uint32_t ala, alb, alc, albias;
  float beta_nonzero;
  bool operator==(const Key& o) const { return std::memcmp(this, &o, sizeof(Key)) == 0; }
};
struct KeyHash {
  size_t operator()(const Key& k) const {
    const unsigned char* p = reinterpret_cast<const unsigned char*>(&k);
    size_t h = 1469598103934665603ull;
    for (size_t i = 0; i < sizeof(Key); ++i) h = (h ^ p[i]) * 1099511628211ull;
    return h;
  }
};

}  // namespace

GemmImpl gemm_impl_from(const char* sf_gemm) {
  if (!sf_gemm || !*sf_gemm || std::strcmp(sf_gemm, "cublaslt") == 0) return GemmImpl::kCublasLt;
  if (std::strcmp(sf_gemm, "reference") == 0) return GemmImpl::kReference;
  SF_FAIL("SF_GEMM=", sf_gemm, ": unknown GEMM implementation; use SF_GEMM=reference (the plain ",
          "CUDA kernel, for verification) or leave SF_GEMM unset (cuBLASLt)");
}

GemmImpl gemm_impl_from_env() {
  static const GemmImpl impl = [] {
    const GemmImpl i = gemm_impl_from(std::getenv("SF_GEMM"));
    if (i == GemmImpl::kReference)  // never a silent slow path
      std::fprintf(stderr,
                   "[sf] SF_GEMM=reference: every GEMM runs the plain reference kernel "
                   "(slow; for verification only)\n");
    return i;
  }();
  return impl;
}

struct Gemm::Impl {
  GemmImpl impl = GemmImpl::kCublasLt;
  cublasLtHandle_t handle = nullptr;
  void* ws = nullptr;
  size_t ws_bytes = 0;
  std::mutex mu;  // the backend may be driven from several host threads
  std::unordered_map<Key, cublasLtMatmulAlgo_t, KeyHash> algos;
};

Gemm::Gemm(void* workspace, size_t workspace_bytes)
    : Gemm(workspace, workspace_bytes, gemm_impl_from_env()) {}

Gemm::Gemm(void* workspace, size_t workspace_bytes, GemmImpl impl)
    : impl_(std::make_unique<Impl>()) {
  impl_->impl = impl;
  if (impl == GemmImpl::kCublasLt) SF_LT_CHECK(cublasLtCreate(&impl_->handle), "Gemm");
  impl_->ws = workspace;
  impl_->ws_bytes = workspace_bytes;
}

GemmImpl Gemm::impl() const { return impl_->impl; }

Gemm::~Gemm() {
  if (impl_ && impl_->handle) cublasLtDestroy(impl_->handle);
}

void Gemm::run(const char* op, Mat y, Mat a, bool a_t, Mat b, bool b_t, float alpha, float beta,
               const void* bias, cudaStream_t stream) {
  if (impl_->impl == GemmImpl::kReference)
    return gemm_reference(op, y, a, a_t, b, b_t, alpha, beta, bias, stream);
  // Row-major shapes: op(a) [M,K], op(b) [K,N], y [M,N].
  const int64_t M = a_t ? a.cols : a.rows, K = a_t ? a.rows : a.cols;
  const int64_t Kb = b_t ? b.cols : b.rows, N = b_t ? b.rows : b.cols;
  auto shapes = [&] {
    return str_cat(op, " (GEMM y[", y.rows, ",", y.cols, "] = a[", a.rows, ",", a.cols, "]",
                   a_t ? "ᵀ" : "", " · b[", b.rows, ",", b.cols, "]", b_t ? "ᵀ" : "", ")");
  };
  SF_CHECK(K == Kb && y.rows == M && y.cols == N, shapes(), ": inner or outer sizes differ");
  if (M == 0 || N == 0) return;
  // Column-major view: Yᵀ[N,M] = op(b)ᵀ[N,K] · op(a)ᵀ[K,M]. A row-major [r,c] matrix is a
  // column-major [c,r] one, so cuBLASLt's A is b (transposed iff b was not) and its B is a.
  const cublasOperation_t opA = b_t ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opB = a_t ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int64_t m = N, n = M, k = K;
  Impl& I = *impl_;

  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  auto cleanup = [&] {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (desc) cublasLtMatmulDescDestroy(desc);
  };
  try {
    SF_LT_CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), shapes());
    SF_LT_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof(opA)),
                shapes());
    SF_LT_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof(opB)),
                shapes());
    cublasLtEpilogue_t epi = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    if (bias) {
      SF_LT_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi,
                                                 sizeof(epi)), shapes());
      SF_LT_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                 sizeof(bias)), shapes());
      cudaDataType_t bt = lt_type(y.dtype);
      SF_LT_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt,
                                                 sizeof(bt)), shapes());
    }
    // Column-major layouts of the stored matrices: cuBLASLt's A = b ([b.cols, b.rows], ld),
    // B = a, C = D = y ([N, M], ld).
    SF_LT_CHECK(cublasLtMatrixLayoutCreate(&la, lt_type(b.dtype), uint64_t(b.cols),
                                           uint64_t(b.rows), b.ld), shapes());
    SF_LT_CHECK(cublasLtMatrixLayoutCreate(&lb, lt_type(a.dtype), uint64_t(a.cols),
                                           uint64_t(a.rows), a.ld), shapes());
    SF_LT_CHECK(cublasLtMatrixLayoutCreate(&lc, lt_type(y.dtype), uint64_t(y.cols),
                                           uint64_t(y.rows), y.ld), shapes());

    Key key{};
    key.m = m, key.n = n, key.k = k, key.lda = b.ld, key.ldb = a.ld, key.ldc = y.ld;
    key.ta = opA, key.tb = opB, key.at = int(b.dtype), key.bt = int(a.dtype), key.ct = int(y.dtype);
    key.epi = int(epi);
    key.ala = alignment(b.data), key.alb = alignment(a.data), key.alc = alignment(y.data);
    key.albias = bias ? alignment(bias) : 0;
    key.beta_nonzero = beta != 0.0f ? 1.0f : 0.0f;

    cublasLtMatmulAlgo_t algo;
    bool have = false;
    {
      std::lock_guard<std::mutex> lk(I.mu);
      auto it = I.algos.find(key);
      if (it != I.algos.end()) algo = it->second, have = true;
    }
    if (!have) {
      SF_LT_CHECK(cublasLtMatmulPreferenceCreate(&pref), shapes());
      SF_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(
                      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &I.ws_bytes,
                      sizeof(I.ws_bytes)), shapes());
      const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> als[] = {
          {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.ala},
          {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.alb},
          {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.alc},
          {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.alc}};
      for (auto [attr, v] : als)
        SF_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &v, sizeof(v)), shapes());
      // Split-K partial sums in fp32 only: for a BF16 y the heuristics otherwise pick schemes that
      // store partials in the output type (bf16) or add them in place, rounding once per split
      // (measured on the H200: 26 splits at M = 7, N = 4097, K = 16384; test_cuda_gemm.cpp).
      const uint32_t reduction = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
      SF_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(
                      pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &reduction,
                      sizeof(reduction)), shapes());
      cublasLtMatmulHeuristicResult_t res{};
      int found = 0;
      SF_LT_CHECK(cublasLtMatmulAlgoGetHeuristic(I.handle, desc, la, lb, lc, lc, pref, 1, &res,
                                                 &found), shapes());
      if (found == 0) {  // none under that restriction (not seen): any scheme beats failing
        const uint32_t any = CUBLASLT_REDUCTION_SCHEME_MASK;
        SF_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(
                        pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &any, sizeof(any)),
                    shapes());
        SF_LT_CHECK(cublasLtMatmulAlgoGetHeuristic(I.handle, desc, la, lb, lc, lc, pref, 1, &res,
                                                   &found), shapes());
      }
      SF_CHECK(found > 0, shapes(), ": cuBLASLt has no algorithm for these types/alignments");
      algo = res.algo;
      std::lock_guard<std::mutex> lk(I.mu);
      I.algos.emplace(key, algo);
    }
    SF_LT_CHECK(cublasLtMatmul(I.handle, desc, &alpha, b.data, la, a.data, lb, &beta, y.data, lc,
                               const_cast<void*>(y.data), lc, &algo, I.ws, I.ws_bytes, stream),
                shapes());
  } catch (...) {
    cleanup();
    throw;
  }
  cleanup();
}

}  // namespace sf::cuda
