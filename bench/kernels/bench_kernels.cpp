// bench_kernels — times every CUDA backend op on the Llama-3.1-8B shapes of
// docs/GPU_MACHINE.md (16384 tokens, hidden 4096, intermediate 14336, 32/8 heads of 128, vocab
// 128256): CUDA events around each launch on the backend's stream, 3 warm-ups, median of 20.
// Prints time, achieved GB/s or TFLOP/s and the percentage of the floor (bytes ÷ 4.1 TB/s or
// FLOPs ÷ 790 TFLOP/s, the copy and GEMM ceilings measured on the H200). Inputs are random bf16.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"

namespace sf {
namespace {

constexpr double kBandwidth = 4.1e12;  // bytes/s, device-to-device copy (read + write)
constexpr double kMatrix = 790e12;     // bf16 FLOP/s, cuBLAS 8192³ on random data

#define CK(x)                                                                       \
  do {                                                                              \
    cudaError_t e_ = (x);                                                           \
    if (e_ != cudaSuccess) SF_FAIL(#x, " failed: ", cudaGetErrorString(e_));        \
  } while (0)

struct Bench {
  Backend& be;
  Stream& s;
  cudaStream_t cs;
  std::vector<uint16_t> pool;  // random bf16 values, reused for every input
  std::vector<Buffer> keep;

  Tensor make(DType dt, std::initializer_list<int64_t> shape) {
    Tensor t(nullptr, dt, shape);
    keep.push_back(be.alloc(MemoryKind::kDevice, std::max<size_t>(t.bytes(), 16), "bench"));
    t.data = keep.back().data();
    return t;
  }
  // Random bf16 (or their fp32 values for F32 tensors).
  Tensor random(DType dt, std::initializer_list<int64_t> shape) {
    Tensor t = make(dt, shape);
    if (dt == DType::kBF16) {
      fill_bf16(t.data, size_t(t.numel()));
    } else {
      Tensor tmp = make(DType::kBF16, {t.numel()});
      fill_bf16(tmp.data, size_t(t.numel()));
      be.convert(t.reshaped({t.numel()}), tmp, s);
      be.synchronize(s);
    }
    return t;
  }
  void fill_bf16(void* dst, size_t n) {
    size_t done = 0;
    while (done < n) {
      const size_t m = std::min(n - done, pool.size());
      CK(cudaMemcpy(static_cast<uint16_t*>(dst) + done, pool.data(), m * 2, cudaMemcpyHostToDevice));
      done += m;
    }
  }
  Tensor ints(std::vector<int32_t> v) {
    Tensor t = make(DType::kI32, {int64_t(v.size())});
    CK(cudaMemcpy(t.data, v.data(), v.size() * 4, cudaMemcpyHostToDevice));
    return t;
  }

  // median milliseconds of fn over `iters` timed launches after `warm` warm-ups
  double time_ms(const std::function<void()>& fn, int warm = 3, int iters = 20) {
    for (int i = 0; i < warm; ++i) fn();
    std::vector<float> ms;
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int i = 0; i < iters; ++i) {
      CK(cudaEventRecord(a, cs));
      fn();
      CK(cudaEventRecord(b, cs));
      CK(cudaEventSynchronize(b));
      float t = 0;
      CK(cudaEventElapsedTime(&t, a, b));
      ms.push_back(t);
    }
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  }

  void report(const char* name, const char* shape, double ms, double bytes, double flops) {
    const double floor_ms = std::max(bytes / kBandwidth, flops / kMatrix) * 1e3;
    if (flops > 0)
      std::printf("%-28s %-30s %9.3f ms %9.1f TFLOP/s  floor %8.3f ms  %5.1f%%\n", name, shape, ms,
                  flops / ms * 1e-9, floor_ms, 100.0 * floor_ms / ms);
    else
      std::printf("%-28s %-30s %9.3f ms %9.1f GB/s     floor %8.3f ms  %5.1f%%\n", name, shape,
                  ms, bytes / ms * 1e-6, floor_ms, 100.0 * floor_ms / ms);
    std::fflush(stdout);
  }
};

void run() {
  CudaBackendOptions o;
  o.max_tokens = 16384;
  o.hidden = 4096;
  o.vocab = 128256;
  o.max_heads = 32;
  auto be = make_cuda_backend(o);
  auto stream = be->create_stream("bench");
  Bench b{*be, *stream, static_cast<cudaStream_t>(cuda_stream_handle(*stream)), {}, {}};
  b.pool.resize(size_t(64) << 20);
  uint32_t x = 12345;
  for (auto& v : b.pool) {  // bf16 of uniform [-2, 2): sign, exponent 126..127, random mantissa
    x = x * 1664525u + 1013904223u;
    v = uint16_t(((x >> 16) & 0x8000u) | (((x >> 8) & 1u) ? 0x3f80u : 0x3f00u) | ((x >> 9) & 0x7fu));
  }
  std::printf("device: %s\n%-28s %-30s %12s %17s %17s %6s\n", be->name().c_str(), "op", "shape",
              "median", "rate", "floor", "%");
  const int64_t T = 16384, C = 4096, I = 14336, V = 128256, NH = 32, NKV = 8, D = 128;
  Stream& s = *stream;
  const double e2 = 2.0;  // bytes per bf16

  {  // RMSNorm
    Tensor xx = b.random(DType::kBF16, {T, C}), r = b.random(DType::kBF16, {T, C});
    Tensor w = b.random(DType::kBF16, {C}), out = b.make(DType::kBF16, {T, C});
    Tensor sum = b.make(DType::kBF16, {T, C}), rstd = b.make(DType::kF32, {T});
    Tensor dw = b.random(DType::kF32, {C}), dx = b.make(DType::kBF16, {T, C});
    const double n = double(T * C);
    b.report("rmsnorm_forward", "16384x4096", b.time_ms([&] { be->rmsnorm_forward(out, rstd, xx, w, 1e-5f, s); }),
             2 * n * e2 + T * 4, 0);
    b.report("add_rmsnorm_forward", "16384x4096",
             b.time_ms([&] { be->add_rmsnorm_forward(sum, out, rstd, xx, r, w, 1e-5f, s); }),
             4 * n * e2 + T * 4, 0);
    b.report("rmsnorm_backward", "16384x4096",
             b.time_ms([&] { be->rmsnorm_backward(dx, dw, r, xx, w, rstd, false, s); }),
             3 * n * e2 + T * 4, 0);
  }
  {  // SwiGLU
    Tensor g = b.random(DType::kBF16, {T, I}), u = b.random(DType::kBF16, {T, I});
    Tensor d = b.random(DType::kBF16, {T, I}), out = b.make(DType::kBF16, {T, I});
    Tensor dg = b.make(DType::kBF16, {T, I}), du = b.make(DType::kBF16, {T, I});
    const double n = double(T * I);
    b.report("swiglu_forward", "16384x14336", b.time_ms([&] { be->swiglu_forward(out, g, u, s); }),
             3 * n * e2, 0);
    b.report("swiglu_backward", "16384x14336",
             b.time_ms([&] { be->swiglu_backward(dg, du, d, g, u, s); }), 5 * n * e2, 0);
  }
  {  // RoPE, embedding, casts
    std::vector<int32_t> pos(T), ids(T);
    uint32_t y = 7;
    for (int64_t t = 0; t < T; ++t) {
      pos[size_t(t)] = int32_t(t % 2048);
      y = y * 1664525u + 1013904223u;
      ids[size_t(t)] = int32_t((y >> 8) % uint32_t(V));
    }
    Tensor tp = b.ints(pos), ti = b.ints(ids);
    std::vector<float> invf(D / 2);
    for (int64_t i = 0; i < D / 2; ++i) invf[size_t(i)] = std::pow(500000.0f, -2.0f * float(i) / D);
    Tensor inv = b.make(DType::kF32, {D / 2});
    CK(cudaMemcpy(inv.data, invf.data(), invf.size() * 4, cudaMemcpyHostToDevice));
    Tensor q = b.random(DType::kBF16, {T, NH, D}), k = b.random(DType::kBF16, {T, NKV, D});
    b.report("rope_forward q", "16384x32x128", b.time_ms([&] { be->rope_forward(q, tp, inv, s); }),
             2.0 * T * NH * D * e2, 0);
    b.report("rope_forward k", "16384x8x128", b.time_ms([&] { be->rope_forward(k, tp, inv, s); }),
             2.0 * T * NKV * D * e2, 0);
    Tensor table = b.random(DType::kBF16, {V, C}), out = b.make(DType::kBF16, {T, C});
    Tensor dtab = b.random(DType::kF32, {V, C}), dout = b.random(DType::kBF16, {T, C});
    b.report("embedding_forward", "16384 of 128256x4096",
             b.time_ms([&] { be->embedding_forward(out, ti, table, s); }), 2.0 * T * C * e2, 0);
    b.report("embedding_backward", "16384 into 128256x4096 F32",
             b.time_ms([&] { be->embedding_backward(dtab, ti, dout, s); }),
             T * C * (e2 + 8.0), 0);
    const int64_t P = 218112000;  // parameters of one Llama-3.1-8B layer
    Tensor f = b.random(DType::kF32, {P}), h = b.make(DType::kBF16, {P});
    b.report("convert F32->BF16", "218M (one 8B layer)", b.time_ms([&] { be->convert(h, f, s); }),
             double(P) * 6, 0);
    b.report("convert BF16->F32", "218M (one 8B layer)", b.time_ms([&] { be->convert(f, h, s); }),
             double(P) * 6, 0);
  }
  {  // attention
    for (auto [B, S] : {std::pair<int64_t, int64_t>{8, 2048}, {2, 8192}}) {
      const int64_t TT = B * S;
      std::vector<int32_t> cu;
      for (int64_t i = 0; i <= B; ++i) cu.push_back(int32_t(i * S));
      Tensor tcu = b.ints(cu);
      Tensor q = b.random(DType::kBF16, {TT, NH, D}), k = b.random(DType::kBF16, {TT, NKV, D});
      Tensor v = b.random(DType::kBF16, {TT, NKV, D}), out = b.make(DType::kBF16, {TT, NH, D});
      Tensor lse = b.make(DType::kF32, {TT, NH}), dout = b.random(DType::kBF16, {TT, NH, D});
      Tensor dq = b.make(DType::kBF16, {TT, NH, D}), dk = b.make(DType::kBF16, {TT, NKV, D});
      Tensor dv = b.make(DType::kBF16, {TT, NKV, D});
      const float sc = 1.0f / std::sqrt(float(D));
      const double fwd = 4.0 * B * S * S * NH * D / 2;  // causal: half of the S×S products
      char shape[64];
      std::snprintf(shape, sizeof shape, "%ldx%ld GQA 32/8 D128", long(B), long(S));
      const double tf = b.time_ms([&] { be->attention_forward(out, lse, q, k, v, tcu, sc, s); });
      b.report("attention_forward", shape, tf, 0, fwd);
      const double tb = b.time_ms(
          [&] { be->attention_backward(dq, dk, dv, dout, q, k, v, out, lse, tcu, sc, s); });
      b.report("attention_backward", shape, tb, 0, 2.5 * fwd);
      b.report("attention fwd+bwd", shape, tf + tb, 0, 3.5 * fwd);
    }
  }
  {  // linear (cuBLASLt) and the fused head
    Tensor xx = b.random(DType::kBF16, {T, C}), w = b.random(DType::kBF16, {I, C});
    Tensor y = b.make(DType::kBF16, {T, I});
    b.report("linear_forward (up)", "16384x4096 -> 14336",
             b.time_ms([&] { be->linear_forward(y, xx, w, Tensor(), s); }), 0, 2.0 * T * C * I);
    Tensor dw = b.random(DType::kF32, {I, C});
    b.report("linear_backward_weight", "dw[14336,4096] F32 +=",
             b.time_ms([&] { be->linear_backward_weight(dw, Tensor(), y, xx, s); }), 0,
             2.0 * T * C * I);
    Tensor hw = b.random(DType::kBF16, {V, C}), hdw = b.random(DType::kF32, {V, C});
    Tensor dx = b.make(DType::kBF16, {T, C}), loss = b.make(DType::kF32, {1});
    std::vector<int32_t> tg(T);
    uint32_t z = 99;
    for (auto& t : tg) {
      z = z * 1664525u + 1013904223u;
      t = (z >> 28) == 0 ? -100 : int32_t((z >> 4) % uint32_t(V));
    }
    Tensor tt = b.ints(tg);
    b.report("linear_cross_entropy", "16384x4096 -> 128256",
             b.time_ms([&] { be->linear_cross_entropy(loss, dx, hdw, xx, hw, tt, 1.0f / T, s); }, 1, 5),
             0, 6.0 * T * C * V);
  }
}

}  // namespace
}  // namespace sf

int main() {
  try {
    if (sf::cuda_device_count() == 0) {
      std::printf("bench_kernels: no CUDA device\n");
      return 0;
    }
    sf::run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_kernels: %s\n", e.what());
    return 1;
  }
  return 0;
}
