// bench_attention — our flash kernel (attention.cu) against the cuDNN path (attention_cudnn.*) on
// the shapes of docs/GPU_MACHINE.md: causal GQA 32/8 heads of 128, 8 × 2048 and 2 × 8192 tokens
// packed as samples (cu_seqlens). CUDA events around each call (fwd) or each fwd-then-bwd pair
// (fwd+bwd, as peers.py times torch) on one stream, 3 warm-ups, median of 20; TFLOP/s from the
// causal FLOPs 4·B·S²·NH·D/2 (forward) and 2.5× that (backward). cuDNN is timed several ways:
// lengths given on the host with equal lengths ("dense": the dense graphs, the engine's path),
// read back from the device each call ("read"; one stream sync per call), the ragged graphs
// ("ragged", and "v1" with the GQA partials in our workspace) and planned with S = T ("bound").
// (A "head-major" mode, the dense graph over [B, H, S, D] rows, measured the layout's effect —
// none: docs/perf.md — and was removed after.) Each mode first checks it agrees with our kernel on
// these inputs (max |a − b| / max |b|). SF_CUDNN_LIB=path loads another libcudnn.so.9.
// Usage: bench_attention [--quick | --profile NSEQxS]
//   (peers: python3 bench/kernels/peers.py; bench/kernels/compare_attention.sh alternates both;
//   figures: docs/perf.md)

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/attention_cudnn.h"
#include "backend/cuda/kernels.h"
#include "core/error.h"
#include "timing.h"

namespace sf {
namespace {

#define CK(x) BENCH_CK(x)
using bench::median_ms;

struct DevBuf {
  void* p = nullptr;
  explicit DevBuf(size_t n) { CK(cudaMalloc(&p, std::max<size_t>(n, 16))); }
  ~DevBuf() { cudaFree(p); }
};

std::vector<float> download(const Tensor& t) {
  std::vector<float> out(size_t(t.numel()));
  if (t.dtype == DType::kF32) {
    CK(cudaMemcpy(out.data(), t.data, t.bytes(), cudaMemcpyDeviceToHost));
    return out;
  }
  std::vector<uint16_t> h(out.size());
  CK(cudaMemcpy(h.data(), t.data, t.bytes(), cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < h.size(); ++i) out[i] = bf16_to_f32(h[i]);
  return out;
}

double rel_diff(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = download(a), y = download(b);
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i])) return INFINITY;
    num = std::max(num, std::fabs(double(x[i]) - y[i]));
    den = std::max(den, std::fabs(double(y[i])));
  }
  return den > 0 ? num / den : num;
}

void report(const char* name, const std::string& shape, double ms, double flops) {
  std::printf("%-34s %-26s %9.3f ms %9.1f TFLOP/s\n", name, shape.c_str(), ms,
              flops / (ms * 1e-3) * 1e-12);
  std::fflush(stdout);
}

// kQuick: only the dense graphs ("dense", and "read" = the backend's path), no own kernel
// (compare_attention.sh); kProfile: the "dense" fwd+bwd pair three times, nothing else, no timing
// (for ncu: profile_attention.sh).
enum class Run { kFull, kQuick, kProfile };

void run_shape(int64_t nseq, int64_t S, cuda::CudnnAttention* cudnn, cudaStream_t st, Run run) {
  const bool quick = run != Run::kFull;
  const int64_t NH = 32, NKV = 8, D = 128, T = nseq * S;
  const std::string shape = std::to_string(nseq) + "x" + std::to_string(S) + " GQA 32/8 D128";
  const float scale = 1.0f / std::sqrt(float(D));
  std::vector<int32_t> cu;
  for (int64_t i = 0; i <= nseq; ++i) cu.push_back(int32_t(i * S));

  DevBuf bq(T * NH * D * 2), bk(T * NKV * D * 2), bv(T * NKV * D * 2), bo(T * NH * D * 2),
      bdo(T * NH * D * 2), bl(T * NH * 4), bdq(T * NH * D * 2), bdk(T * NKV * D * 2),
      bdv(T * NKV * D * 2), bcu((nseq + 1) * 4), bdelta(T * NH * 4);
  // second set of outputs, for comparing the two paths
  DevBuf bo2(T * NH * D * 2), bl2(T * NH * 4), bdq2(T * NH * D * 2), bdk2(T * NKV * D * 2),
      bdv2(T * NKV * D * 2);
  std::mt19937 g(7);
  // the distribution peers.py gives torch (rand·4 − 2): tensor-core power, and with it the clock
  // the kernels get, depends on the operands' bits
  std::uniform_real_distribution<float> nd(-2.0f, 2.0f);
  for (auto [p, n] : {std::pair{bq.p, T * NH * D},
                      {bk.p, T * NKV * D},
                      {bv.p, T * NKV * D},
                      {bdo.p, T * NH * D}}) {
    std::vector<uint16_t> h(static_cast<size_t>(n));
    for (auto& x : h) x = f32_to_bf16(nd(g));
    CK(cudaMemcpy(p, h.data(), h.size() * 2, cudaMemcpyHostToDevice));
  }
  CK(cudaMemcpy(bcu.p, cu.data(), cu.size() * 4, cudaMemcpyHostToDevice));
  auto bf = [](void* p, std::initializer_list<int64_t> s) { return Tensor(p, DType::kBF16, s); };
  const Tensor q = bf(bq.p, {T, NH, D}), k = bf(bk.p, {T, NKV, D}), v = bf(bv.p, {T, NKV, D});
  const Tensor o = bf(bo.p, {T, NH, D}), dout = bf(bdo.p, {T, NH, D});
  const Tensor dq = bf(bdq.p, {T, NH, D}), dk = bf(bdk.p, {T, NKV, D}), dv = bf(bdv.p, {T, NKV, D});
  const Tensor o2 = bf(bo2.p, {T, NH, D}), dq2 = bf(bdq2.p, {T, NH, D});
  const Tensor dk2 = bf(bdk2.p, {T, NKV, D}), dv2 = bf(bdv2.p, {T, NKV, D});
  const Tensor lse(bl.p, DType::kF32, {T, NH}), lse2(bl2.p, DType::kF32, {T, NH});
  const Tensor tcu(bcu.p, DType::kI32, {nseq + 1});
  float* delta = static_cast<float*>(bdelta.p);
  const double fwd = 4.0 * double(nseq) * double(S) * double(S) * NH * D / 2;

  auto own_f = [&] { cuda::attention_forward(o, lse, q, k, v, tcu, scale, st); };
  auto own_b = [&] {
    cuda::attention_backward(dq, dk, dv, dout, q, k, v, o, lse, tcu, scale, delta, T * NH, st);
  };
  if (!quick) {
    const double of = median_ms(st, own_f);
    const double ofb = median_ms(st, [&] {
      own_f();
      own_b();
    });
    report("ours fwd", shape, of, fwd);
    report("ours fwd+bwd", shape, ofb, 3.5 * fwd);
  }
  if (!cudnn) return;

  using UL = cuda::CudnnAttention::UnknownLengths;
  struct Mode {
    const char* name;
    const int32_t* host;
    UL unknown;
    bool dense;
    int variant;
  };
  bool checked = false;
  for (const Mode& m : {Mode{"dense", cu.data(), UL::kRead, true, -1},
                        Mode{"ragged", cu.data(), UL::kRead, false, 0},
                        Mode{"ragged v1", cu.data(), UL::kRead, false, 1},
                        Mode{"read", nullptr, UL::kRead, true, -1},
                        Mode{"bound v1", nullptr, UL::kBound, false, 1}}) {
    if (quick && !m.dense) continue;
    if (run == Run::kProfile && std::string(m.name) != "dense") continue;
    cudnn->set_unknown_lengths(m.unknown);
    cudnn->set_dense_when_equal(m.dense);
    cudnn->force_backward_variant(m.variant);
    bool ok = true;
    auto cf = [&] { ok = ok && cudnn->forward(o2, lse2, q, k, v, tcu, m.host, scale, st); };
    auto cb = [&] {
      ok = ok && cudnn->backward(dq2, dk2, dv2, dout, q, k, v, o2, lse2, tcu, m.host, scale, st);
    };
    for (int i = 0; i < (run == Run::kProfile ? 3 : 1); ++i) {
      cf();
      cb();
    }
    CK(cudaStreamSynchronize(st));
    if (run == Run::kProfile) {
      std::printf("profiled: cuDNN dense fwd+bwd %s x3 (%s)\n", shape.c_str(),
                  ok ? "ran" : cudnn->last_refusal().c_str());
      continue;
    }
    if (!ok) {
      std::printf("cuDNN %s %s: refused (%s)\n", m.name, shape.c_str(),
                  cudnn->last_refusal().c_str());
      continue;
    }
    {  // both paths from the same inputs (ours last wrote o/lse/dq/dk/dv)
      if (!checked) {
        own_f();
        own_b();
        CK(cudaStreamSynchronize(st));
        checked = true;
      }
      std::printf("check %s %s: cuDNN vs ours  out %.2e  lse %.2e  dq %.2e  dk %.2e  dv %.2e\n",
                  m.name, shape.c_str(), rel_diff(o2, o), rel_diff(lse2, lse), rel_diff(dq2, dq),
                  rel_diff(dk2, dk), rel_diff(dv2, dv));
    }
    // fwd+bwd is timed as one region, as peers.py times torch (forward, then backward)
    const double tf = median_ms(st, cf), tfb = median_ms(st, [&] {
                                           cf();
                                           cb();
                                         });
    const std::string nf = std::string("cuDNN (") + m.name + ") fwd";
    const std::string nb = std::string("cuDNN (") + m.name + ") fwd+bwd";
    report(nf.c_str(), shape, tf, fwd);
    report(nb.c_str(), shape, tfb, 3.5 * fwd);
  }
}

}  // namespace
}  // namespace sf

int main(int argc, char** argv) {
  using namespace sf;
  try {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
      std::printf("bench_attention: no CUDA device\n");
      return 1;
    }
    cudaDeviceProp prop{};
    CK(cudaGetDeviceProperties(&prop, 0));
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    std::string why;
    // workspace: dQ accumulator (T·NH·D F32 = 256 MiB at 16384 tokens), row sums, GQA partials,
    // plan
    auto cudnn = cuda::CudnnAttention::create(16384, size_t(1) << 30, &why);
    std::printf("device: %s  cuDNN: %s\n", prop.name,
                cudnn ? (std::to_string(cudnn->version()) + " from " + cudnn->library()).c_str()
                      : ("unavailable: " + why).c_str());
    const std::string arg = argc > 1 ? argv[1] : "";
    if (arg == "--profile") {  // one shape: bench_attention --profile 2x8192
      const std::string shape = argc > 2 ? argv[2] : "2x8192";
      const size_t x = shape.find('x');
      SF_CHECK(x != std::string::npos, "bench_attention --profile NSEQxS, e.g. 2x8192: got ",
               shape);
      run_shape(std::stoll(shape.substr(0, x)), std::stoll(shape.substr(x + 1)), cudnn.get(), st,
                Run::kProfile);
    } else {
      const Run run = arg == "--quick" ? Run::kQuick : Run::kFull;
      run_shape(8, 2048, cudnn.get(), st, run);
      run_shape(2, 8192, cudnn.get(), st, run);
    }
    cudnn.reset();
    cudaStreamDestroy(st);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_attention: %s\n", e.what());
    return 1;
  }
  return 0;
}
