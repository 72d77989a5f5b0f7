// bench_kernels — times every CUDA backend op on the Llama-3.1-8B shapes of
// docs/GPU_MACHINE.md (16384 tokens, hidden 4096, intermediate 14336, 32/8 heads of 128, vocab
// 128256): CUDA events around each launch on the backend's stream, 3 warm-ups, median of 20.
// Prints time, achieved GB/s or TFLOP/s and the percentage of the floor (bytes ÷ 4.1 TB/s or
// FLOPs ÷ 790 TFLOP/s, the copy and GEMM ceilings measured on the H200). Inputs are random bf16.
// Also: the extra device memory of the fused head (its workspace, by cudaMemGetInfo) and one whole
// decoder layer (model/layer.h: forward, recompute, backward) at 8 × 2048 packed tokens.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/kernels.h"
#include "model/layer.h"
#include "model/layout.h"
#include "model/spec.h"
#include "timing.h"

namespace sf {
namespace {

constexpr double kBandwidth = 4.1e12;  // bytes/s, device-to-device copy (read + write)
constexpr double kMatrix = 790e12;     // bf16 FLOP/s, cuBLAS 8192³ on random data

#define CK(x) BENCH_CK(x)

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
      CK(cudaMemcpy(static_cast<uint16_t*>(dst) + done, pool.data(), m * 2,
                    cudaMemcpyHostToDevice));
      done += m;
    }
  }
  Tensor ints(std::vector<int32_t> v) {
    Tensor t = make(DType::kI32, {int64_t(v.size())});
    CK(cudaMemcpy(t.data, v.data(), v.size() * 4, cudaMemcpyHostToDevice));
    return t;
  }

  double time_ms(const std::function<void()>& fn, int warm = 3, int iters = 20,
                 const std::function<void()>& pre = nullptr) {
    return bench::median_ms(cs, fn, warm, iters, pre);
  }

  void report(const char* name, const char* shape, double ms, double bytes, double flops) {
    const double floor_ms = std::max(bytes / kBandwidth, flops / kMatrix) * 1e3;
    if (flops > 0)
      std::printf("%-28s %-30s %9.3f ms %9.1f TFLOP/s  floor %8.3f ms  %5.1f%%\n", name, shape, ms,
                  flops / ms * 1e-9, floor_ms, 100.0 * floor_ms / ms);
    else
      std::printf("%-28s %-30s %9.3f ms %9.1f GB/s     floor %8.3f ms  %5.1f%%\n", name, shape, ms,
                  bytes / ms * 1e-6, floor_ms, 100.0 * floor_ms / ms);
    std::fflush(stdout);
  }
};

size_t device_free() {
  size_t free = 0, total = 0;
  CK(cudaMemGetInfo(&free, &total));
  return free;
}

void run() {
  CudaBackendOptions o;
  o.max_tokens = 16384;
  o.hidden = 4096;
  o.vocab = 128256;
  o.max_heads = 32;
  CK(cudaFree(nullptr));  // the context first: its memory is not the backend's
  const size_t free0 = device_free();
  auto be = make_cuda_backend(o);
  const size_t scratch = free0 - device_free();
  // the same backend without the head's workspace (vocab 16): the difference is the CE's extra
  CudaBackendOptions o16 = o;
  o16.vocab = 16;
  const size_t free1 = device_free();
  size_t scratch16 = 0;
  {
    auto small = make_cuda_backend(o16);
    scratch16 = free1 - device_free();
  }
  const double ce_extra_gib = double(scratch - scratch16) / double(1 << 30);
  auto stream = be->create_stream("bench");
  Bench b{*be, *stream, static_cast<cudaStream_t>(cuda_stream_handle(*stream)), {}, {}};
  b.pool.resize(size_t(64) << 20);
  uint32_t x = 12345;
  for (auto& v : b.pool) {  // bf16 of uniform [-2, 2): sign, exponent 126..127, random mantissa
    x = x * 1664525u + 1013904223u;
    v = uint16_t(((x >> 16) & 0x8000u) | (((x >> 8) & 1u) ? 0x3f80u : 0x3f00u) |
                 ((x >> 9) & 0x7fu));
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
    b.report("rmsnorm_forward", "16384x4096",
             b.time_ms([&] { be->rmsnorm_forward(out, rstd, xx, w, 1e-5f, s); }),
             2 * n * e2 + T * 4, 0);
    b.report("add_rmsnorm_forward", "16384x4096",
             b.time_ms([&] { be->add_rmsnorm_forward(sum, out, rstd, xx, r, w, 1e-5f, s); }),
             4 * n * e2 + T * 4, 0);
    const double tb = b.time_ms([&] { be->rmsnorm_backward(dx, dw, r, xx, w, rstd, false, s); });
    b.report("rmsnorm_backward", "16384x4096", tb, 3 * n * e2 + T * 4, 0);
    const double tba = b.time_ms([&] { be->rmsnorm_backward(dx, dw, r, xx, w, rstd, true, s); });
    b.report("rmsnorm_backward dx+=", "16384x4096", tba, 4 * n * e2 + T * 4, 0);
    const double tf = b.time_ms([&] { be->rmsnorm_forward(out, rstd, xx, w, 1e-5f, s); });
    const double taf =
        b.time_ms([&] { be->add_rmsnorm_forward(sum, out, rstd, xx, r, w, 1e-5f, s); });
    for (int mp : {8, 4, 2}) {  // forward variants: packs of 8 bf16 a thread at most
      char name[64];
      std::snprintf(name, sizeof name, "rmsnorm_forward packs<=%d", mp);
      b.report(name, "16384x4096", b.time_ms([&] {
        cuda::rmsnorm_forward(Tensor(), out, rstd, xx, Tensor(), w, 1e-5f, b.cs, mp);
      }),
               2 * n * e2 + T * 4, 0);
      std::snprintf(name, sizeof name, "add_rmsnorm_forward packs<=%d", mp);
      b.report(name, "16384x4096",
               b.time_ms([&] { cuda::rmsnorm_forward(sum, out, rstd, xx, r, w, 1e-5f, b.cs, mp); }),
               4 * n * e2 + T * 4, 0);
    }
    {  // backward variant: 1 pack a thread (512 threads a row, 4 rows in flight); own scratch
      Tensor part = b.make(DType::kF32, {cuda::rmsnorm_partial_rows(), C});
      b.report("rmsnorm_backward packs<=1", "16384x4096", b.time_ms([&] {
        cuda::rmsnorm_backward(dx, dw, r, xx, w, rstd, false, part.f32(),
                               cuda::rmsnorm_partial_rows(), b.cs, 1);
      }),
               3 * n * e2 + T * 4, 0);
    }
    // as the peers count it (Liger 0.79 ms): fwd reads x, writes out; bwd reads x, dout, writes dx
    b.report("rmsnorm fwd+bwd", "16384x4096", tf + tb, 5 * n * e2 + 2 * T * 4, 0);
    b.report("add_rmsnorm fwd+bwd dx+=", "16384x4096", taf + tba, 8 * n * e2 + 2 * T * 4, 0);
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
             b.time_ms([&] { be->embedding_backward(dtab, ti, dout, s); }), T * C * (e2 + 8.0), 0);
    {  // where the time goes (same floor): keys and sort only (the one-block sort at this T),
       // then with the chunk sums; and the device-wide sort (graph) that larger T take, alone
       // and in the whole backward
      auto es = b.make(DType::kBF16, {int64_t(cuda::embedding_scratch_bytes(T, C) / 2)});
      const cuda::EmbeddingScratch sc = cuda::embedding_scratch(es.data, T, C, V);
      cuda::EmbeddingScratch wide = sc;
      wide.tile_sort = false;
      for (int st : {1, 2}) {
        b.report(st == 1 ? "embedding_backward sort" : "embedding_backward sort+chunks",
                 "16384 into 128256x4096 F32",
                 b.time_ms([&] { cuda::embedding_backward(dtab, ti, dout, sc, b.cs, st); }),
                 T * C * (e2 + 8.0), 0);
      }
      for (int st : {1, 3}) {
        b.report(st == 1 ? "embedding_backward wide sort" : "embedding_backward wide all",
                 "16384 into 128256x4096 F32",
                 b.time_ms([&] { cuda::embedding_backward(dtab, ti, dout, wide, b.cs, st); }),
                 T * C * (e2 + 8.0), 0);
      }
    }
    {  // skewed ids: one id (padding-like) takes about half the tokens, the rest uniform; the
       // floor counts the rows actually touched: dout once, each distinct row read and written
      std::vector<int32_t> sk(ids);
      for (int64_t t = 0; t < T; ++t) {
        y = y * 1664525u + 1013904223u;
        if ((y >> 12) & 1u) sk[size_t(t)] = 128004;
      }
      std::vector<int32_t> u(sk);
      std::sort(u.begin(), u.end());
      const double rows = double(std::unique(u.begin(), u.end()) - u.begin());
      Tensor tsk = b.ints(sk);
      b.report("embedding_backward skewed", "16384 (half one id) 128256x4096",
               b.time_ms([&] { be->embedding_backward(dtab, tsk, dout, s); }),
               double(T) * C * e2 + rows * C * 8.0, 0);
    }
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
      be->set_host_cu_seqlens(tcu, cu);  // as the engine does
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
    const size_t before = device_free();
    be->linear_cross_entropy(loss, dx, hdw, xx, hw, tt, 1.0f / T, s);
    be->synchronize(s);
    const double during_gib = (double(before) - double(device_free())) / double(1 << 30);
    b.report(
        "linear_cross_entropy", "16384x4096 -> 128256",
        b.time_ms([&] { be->linear_cross_entropy(loss, dx, hdw, xx, hw, tt, 1.0f / T, s); }, 1, 5),
        0, 6.0 * T * C * V);
    std::printf(
        "linear_cross_entropy extra memory: workspace %.3f GiB (backend scratch %.3f GiB "
        "with the head, %.3f without), %.3f GiB more taken during the call; limit 0.4 GiB "
        "(10%% of the %.2f GiB of bf16 logits)\n",
        ce_extra_gib, double(scratch) / double(1 << 30), double(scratch16) / double(1 << 30),
        during_gib, double(T) * double(V) * 2 / double(1 << 30));
    for (size_t mib : {size_t(752), size_t(1536)}) {  // larger workspaces, for comparison
      CudaBackendOptions ob = o;
      ob.ce_chunk_bytes = mib << 20;
      auto be2 = make_cuda_backend(ob);
      auto s2 = be2->create_stream("bench ce");
      Bench b2{*be2, *s2, static_cast<cudaStream_t>(cuda_stream_handle(*s2)), {}, {}};
      char name[64];
      std::snprintf(name, sizeof name, "linear_cross_entropy %zu MiB", mib);
      b.report(
          name, "16384x4096 -> 128256",
          b2.time_ms([&] { be2->linear_cross_entropy(loss, dx, hdw, xx, hw, tt, 1.0f / T, *s2); },
                     1, 5),
          0, 6.0 * T * C * V);
    }
  }
  {  // one decoder layer: forward, recompute (no down projection), backward — as the engine runs it
    ModelSpec m;
    m.arch = Arch::kLlama;
    m.hidden = C;
    m.layers = 1;
    m.heads = NH;
    m.kv_heads = NKV;
    m.head_dim = D;
    m.intermediate = I;
    m.vocab = V;
    m.rms_norm_eps = 1e-5;
    m.rope_theta = 500000.0;
    const int64_t B = 8, S = T / 8, Q = NH * D, KV = NKV * D;
    const UnitLayout lay = layer_layout(m, 0);
    Tensor pw = b.random(DType::kBF16, {lay.numel}), gw = b.make(DType::kF32, {lay.numel});
    be->fill_zero(gw, s);
    const LayerParams P = LayerParams::view(lay, pw.data, DType::kBF16);
    const LayerParams G = LayerParams::view(lay, gw.data, DType::kF32);
    Tensor wsb =
        b.make(DType::kBF16, {int64_t(LayerWorkspace::bytes_needed(m, T, DType::kBF16) / 2 + 1)});
    LayerWorkspace ws = LayerWorkspace::carve(m, T, DType::kBF16, wsb.data);
    std::vector<int32_t> pos(T), cu;
    for (int64_t t = 0; t < T; ++t) pos[size_t(t)] = int32_t(t % S);
    for (int64_t i = 0; i <= B; ++i) cu.push_back(int32_t(i * S));
    std::vector<float> invf(D / 2);
    for (int64_t i = 0; i < D / 2; ++i) invf[size_t(i)] = std::pow(500000.0f, -2.0f * float(i) / D);
    StepInputs in;
    in.tokens = T;
    in.positions = b.ints(pos);
    in.cu_seqlens = b.ints(cu);
    be->set_host_cu_seqlens(in.cu_seqlens, cu);  // as the engine does
    in.inv_freq = b.make(DType::kF32, {D / 2});
    CK(cudaMemcpy(in.inv_freq.data, invf.data(), invf.size() * 4, cudaMemcpyHostToDevice));
    Tensor lx = b.random(DType::kBF16, {T, C}), ly = b.make(DType::kBF16, {T, C});
    Tensor g0 = b.random(DType::kBF16, {T, C}), lg = b.make(DType::kBF16, {T, C});
    const double tl = b.time_ms(
        [&] {
          layer_forward(*be, m, P, in, ws, lx, ly, s);
          layer_forward(*be, m, P, in, ws, lx, Tensor(), s);  // the recompute of backward
          layer_backward(*be, m, P, G, in, ws, lx, lg, s);
        },
        2, 10, [&] { be->copy(lg.data, g0.data, lg.bytes(), s); });
    // attention's own share, on the layer's tensors
    const float sc = 1.0f / std::sqrt(float(D));
    Tensor q3 = ws.q.reshaped({T, NH, D}), k3 = ws.k.reshaped({T, NKV, D});
    Tensor v3 = ws.v.reshaped({T, NKV, D}), a3 = ws.attn.reshaped({T, NH, D});
    const double taf = b.time_ms(
        [&] { be->attention_forward(a3, ws.lse, q3, k3, v3, in.cu_seqlens, sc, s); }, 2, 10);
    const double tab = b.time_ms(
        [&] {
          be->attention_backward(ws.dq.reshaped({T, NH, D}), ws.dk.reshaped({T, NKV, D}),
                                 ws.dv.reshaped({T, NKV, D}), ws.dattn.reshaped({T, NH, D}), q3, k3,
                                 v3, a3, ws.lse, in.cu_seqlens, sc, s);
        },
        2, 10);
    const double lin = 2.0 * T * (C * (Q + 2 * KV) + Q * C + 3.0 * C * I);  // one forward
    const double down = 2.0 * T * I * C;
    const double att = 4.0 * B * S * S * NH * D / 2;  // causal forward
    const double flops = (lin + att) + (lin - down + att) + (2 * lin + 2.5 * att);
    b.report("decoder layer fwd+recompute+bwd", "8x2048 Llama-3.1-8B", tl, 0, flops);
    std::printf(
        "  matmul FLOPs %.2f TFLOP (linear %.2f + attention %.2f), %.1f%% of 790 TFLOP/s; "
        "attention (2 fwd + bwd, timed alone) %.2f ms = %.1f%% of the layer\n",
        flops * 1e-12, (4 * lin - down) * 1e-12, 4.5 * att * 1e-12,
        100.0 * flops / kMatrix / (tl * 1e-3), 2 * taf + tab, 100.0 * (2 * taf + tab) / tl);
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
