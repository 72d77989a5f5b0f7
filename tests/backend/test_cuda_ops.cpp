// Every op of the CUDA backend against the CPU reference (sf::cpu, fp32) on the same inputs:
// random values rounded to bf16 once, uploaded as BF16, and given to the reference as the fp32
// copies of those same bf16 values, so the only differences are the device's own roundings.
// Error = max|cuda − ref| / max|ref| (normalised, as the golden test). Thresholds, next to each
// test, are derived from what the CUDA op rounds: a value stored as bf16 carries ≤ 2^-9 relative
// error (round to nearest, 8 significant bits), so one rounding ≤ 2e-3 of max|ref|; fp32
// accumulation adds ~1e-6. Skips when no CUDA device is visible (CI builds these tests too).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backend/cpu/ops.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/kernels.h"
#include "device_tensors.h"

namespace sf {
namespace {

constexpr double kOneRounding = 4e-3;  // 2^-8: one bf16 rounding of the output, with margin ×2

#define SKIP_WITHOUT_CUDA() \
  if (cuda_device_count() == 0) GTEST_SKIP() << "skipped: no CUDA device"

double rel_error(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;  // NaN never passes
    num = std::max(num, std::fabs(double(a[i]) - double(b[i])));
    den = std::max(den, std::fabs(double(b[i])));
  }
  return den > 0 ? num / den : num;
}

// One backend for the whole suite: its workspaces are sized for the largest case below.
Backend& backend() {
  static std::unique_ptr<Backend> be = [] {
    CudaBackendOptions o;
    o.max_tokens = 4096;
    o.hidden = 16384;  // RMSNorm rows up to 16384
    o.vocab = 151936;
    o.max_heads = 64;
    // 55 dlogits rows a chunk in 14-row F32 sub-chunks at V=151936: several chunks and sub-chunks
    o.ce_chunk_bytes = size_t(24) << 20;
    return make_cuda_backend(o);
  }();
  return *be;
}
Stream& stream() {
  static std::unique_ptr<Stream> s = backend().create_stream("test");
  return *s;
}

std::mt19937& rng() {
  static std::mt19937 g(1234);
  return g;
}

std::vector<float> randn(int64_t n, float scale = 1.0f) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng());
  return v;
}

std::vector<float> round_bf16(std::vector<float> v) {
  for (auto& x : v) x = bf16_to_f32(f32_to_bf16(x));
  return v;
}

using test::Dev;
using test::host;
Dev upload_raw(const void* src, DType dt, std::initializer_list<int64_t> shape) {
  return test::upload_raw(backend(), stream(), src, dt, shape);
}
Dev upload(const std::vector<float>& v, DType dt, std::initializer_list<int64_t> shape) {
  return test::upload(backend(), stream(), v, dt, shape);
}
Dev upload_i32(const std::vector<int32_t>& v, std::initializer_list<int64_t> shape) {
  return upload_raw(v.data(), DType::kI32, shape);
}
std::vector<float> download(const Tensor& t) { return test::download(backend(), stream(), t); }
Tensor host_i32(std::vector<int32_t>& v, const Tensor& like) {
  Tensor r = like;
  r.data = v.data();
  return r;
}

// ---------------------------------------------------------------- memory

// More device memory than the GPU has: an sf::Error naming the request, the buffer and the free
// memory, and the backend still usable afterwards (the failure does not stick).
TEST(CudaOps, DeviceAllocationTooLargeIsNamed) {
  SKIP_WITHOUT_CUDA();
  const size_t too_much = size_t(1) << 50;  // 1 PiB
  try {
    Buffer b = backend().alloc(MemoryKind::kDevice, too_much, "a test buffer");
    FAIL() << "1 PiB of device memory was granted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("1048576.0 GiB"), std::string::npos) << m;
    EXPECT_NE(m.find("a test buffer"), std::string::npos) << m;
    EXPECT_NE(m.find("free of"), std::string::npos) << m;
    EXPECT_NE(m.find("--window"), std::string::npos) << m;
  }
  Dev ok = upload(std::vector<float>(1024, 1.0f), DType::kF32, {1024});
  EXPECT_EQ(download(ok.t)[1023], 1.0f);
}

// ---------------------------------------------------------------- elementwise

TEST(CudaOps, ConvertRoundsLikeTheHost) {
  SKIP_WITHOUT_CUDA();
  // the last size is past 4 grid-strides of the vector path (its unrolled loop)
  for (int64_t n : {int64_t(1), int64_t(7), int64_t(8), int64_t(1000), int64_t(65543),
                    (int64_t(1) << 24) + (int64_t(1) << 21) + 8}) {
    std::vector<float> x = randn(n, 3.0f);
    Dev src = upload(x, DType::kF32, {n});
    Dev bf = upload(std::vector<float>(size_t(n), 0.0f), DType::kBF16, {n});
    Dev back = upload(std::vector<float>(size_t(n), -1.0f), DType::kF32, {n});
    backend().convert(bf.t, src.t, stream());
    backend().convert(back.t, bf.t, stream());
    // exact: both sides round to nearest even
    EXPECT_EQ(rel_error(download(back.t), round_bf16(x)), 0.0) << "n=" << n;
  }
}

TEST(CudaOps, AddAndSwiglu) {
  SKIP_WITHOUT_CUDA();
  for (int64_t n : {5, 64, 4099, 1 << 16}) {
    std::vector<float> a = round_bf16(randn(n, 2.0f)), b = round_bf16(randn(n, 2.0f));
    std::vector<float> d = round_bf16(randn(n));
    Dev da = upload(a, DType::kBF16, {n}), db = upload(b, DType::kBF16, {n});
    Dev dd = upload(d, DType::kBF16, {n}), out = upload(a, DType::kBF16, {n});
    Dev dg = upload(a, DType::kBF16, {n}), du = upload(a, DType::kBF16, {n});
    std::vector<float> ref(static_cast<size_t>(n)), rg(static_cast<size_t>(n)),
        ru(static_cast<size_t>(n));
    Tensor hr = host(ref, da.t);

    backend().add(out.t, da.t, db.t, stream());
    cpu::add(hr, host(a, da.t), host(b, db.t));
    EXPECT_LT(rel_error(download(out.t), ref), kOneRounding) << "add n=" << n;

    // silu(gate) is rounded to bf16 before the product (transformers in bf16): two roundings.
    backend().swiglu_forward(out.t, da.t, db.t, stream());
    cpu::swiglu_forward(hr, host(a, da.t), host(b, db.t));
    EXPECT_LT(rel_error(download(out.t), ref), 2 * kOneRounding) << "swiglu fwd n=" << n;

    // dup = dout·silu(gate) uses the bf16-rounded silu: two roundings; dgate: one.
    backend().swiglu_backward(dg.t, du.t, dd.t, da.t, db.t, stream());
    cpu::swiglu_backward(host(rg, dg.t), host(ru, du.t), host(d, dd.t), host(a, da.t),
                         host(b, db.t));
    EXPECT_LT(rel_error(download(dg.t), rg), 2 * kOneRounding) << "swiglu dgate n=" << n;
    EXPECT_LT(rel_error(download(du.t), ru), 2 * kOneRounding) << "swiglu dup n=" << n;
  }
}

TEST(CudaOps, Embedding) {
  SKIP_WITHOUT_CUDA();
  for (auto [T, V, C] : {std::tuple<int64_t, int64_t, int64_t>{1, 3, 2},
                         {37, 50, 64},
                         {500, 1000, 4096},
                         {300, 129, 130}}) {
    std::vector<float> table = round_bf16(randn(V * C)), g = round_bf16(randn(T * C));
    std::vector<int32_t> ids(static_cast<size_t>(T));
    std::uniform_int_distribution<int32_t> pick(0, int32_t(std::min<int64_t>(V, 17) - 1));
    for (auto& id : ids) id = pick(rng());  // few distinct ids: many repeats in the backward
    Dev dt = upload(table, DType::kBF16, {V, C}), di = upload_i32(ids, {T});
    Dev out = upload(std::vector<float>(size_t(T * C), 7.0f), DType::kBF16, {T, C});
    std::vector<float> acc0 = randn(V * C);
    Dev dtab = upload(acc0, DType::kF32, {V, C}), dg = upload(g, DType::kBF16, {T, C});
    std::vector<float> ref(static_cast<size_t>(T * C));
    backend().embedding_forward(out.t, di.t, dt.t, stream());
    cpu::embedding_forward(host(ref, out.t), host_i32(ids, di.t), host(table, dt.t));
    EXPECT_EQ(rel_error(download(out.t), ref), 0.0) << "forward is a copy";
    backend().embedding_backward(dtab.t, di.t, dg.t, stream());
    cpu::embedding_backward(host(acc0, dtab.t), host_i32(ids, di.t), host(g, dg.t));
    // fp32 sums of the same values in another order (see EmbeddingBackward below): ~1e-7
    EXPECT_LT(rel_error(download(dtab.t), acc0), 1e-5) << "T=" << T << " C=" << C;
  }
}

// The embedding backward on `be`: ids (any values; those outside [0, V) contribute nothing) and
// random bf16 dout [T, C] into a non-zero F32 table [V, C], run twice from the same table. The
// two results must be the same bits; against the reference (which adds each token's row to the
// table in token order, fp32), the CUDA op sums each id's rows — in token order, a long run in
// pieces of 32 rows whose sums are added in a fixed order — and adds that sum to the row once:
// the same values in another order. Each fp32 addition rounds by <= 2^-24 of its result; n
// N(0,1) terms give partial sums ~√n and a rounding error ~n·2^-24 in a random walk (1e-4 at
// n = 2000), against a largest |ref| of ~3√n (130): ~1e-6 relative, hence 1e-5.
void check_embedding_backward(Backend& be, Stream& s, const std::vector<int32_t>& ids, int64_t V,
                              int64_t C, const std::string& what) {
  const int64_t T = int64_t(ids.size());
  std::vector<float> g = round_bf16(randn(T * C));
  std::vector<float> pool = randn(4099), acc0(size_t(V * C));  // non-zero, cheap to make
  for (size_t i = 0; i < acc0.size(); ++i) acc0[i] = pool[i % pool.size()];
  Dev di = test::upload_raw(be, s, ids.data(), DType::kI32, {T});
  Dev dg = test::upload(be, s, g, DType::kBF16, {T, C});
  std::vector<float> first;
  for (int run = 0; run < 2; ++run) {
    Dev dtab = test::upload(be, s, acc0, DType::kF32, {V, C});
    be.embedding_backward(dtab.t, di.t, dg.t, s);
    std::vector<float> got = test::download(be, s, dtab.t);
    if (run == 0) {
      first = std::move(got);
      continue;
    }
    EXPECT_EQ(std::memcmp(first.data(), got.data(), got.size() * sizeof(float)), 0)
        << what << ": two runs differ";
  }
  // the reference on the tokens whose ids are in range
  std::vector<int32_t> kept;
  std::vector<float> kept_g;
  for (int64_t t = 0; t < T; ++t) {
    if (ids[size_t(t)] < 0 || ids[size_t(t)] >= V) continue;
    kept.push_back(ids[size_t(t)]);
    kept_g.insert(kept_g.end(), g.begin() + t * C, g.begin() + (t + 1) * C);
  }
  const int64_t K = int64_t(kept.size());
  Tensor rt(acc0.data(), DType::kF32, {V, C}), ri(kept.data(), DType::kI32, {K});
  cpu::embedding_backward(rt, ri, Tensor(kept_g.data(), DType::kF32, {K, C}));
  EXPECT_LT(rel_error(first, acc0), 1e-5) << what;
}

// Ids as real batches have them: one id (padding, a frequent token) takes about half the tokens —
// a run hundreds of chunks long — another repeats 40 times (just over a chunk), the rest are
// spread over the Llama-3 (128256) or Qwen (151936) vocabulary, with ids 0 and V-1 present; T a
// multiple of no tile; C on the 16-byte path (C % 8 == 0) and not (130).
TEST(CudaOps, EmbeddingBackwardSkewedIdsAreRepeatable) {
  SKIP_WITHOUT_CUDA();
  for (auto [T, V, C, hot] :
       {std::tuple<int64_t, int64_t, int64_t, int32_t>{4093, 128256, 264, 128000},
        {4096, 151936, 136, 0},
        {3001, 151936, 130, 151935},
        {777, 5003, 4096, 17}}) {
    std::vector<int32_t> ids(static_cast<size_t>(T));
    std::uniform_int_distribution<int32_t> any(0, int32_t(V - 1));
    std::bernoulli_distribution half(0.5);
    for (auto& id : ids) id = half(rng()) ? hot : any(rng());
    for (int64_t i = 0; i < 40; ++i) ids[size_t((i * 97 + 5) % T)] = 7;
    ids[0] = 0;
    ids[size_t(T / 3)] = 0;
    ids[size_t(T / 2)] = int32_t(V - 1);
    ids[size_t(T - 1)] = int32_t(V - 1);
    check_embedding_backward(
        backend(), stream(), ids, V, C,
        "T=" + std::to_string(T) + " V=" + std::to_string(V) + " C=" + std::to_string(C));
  }
}

// More tokens than one pass of the long-run kernel's scans (256 chunks of 32): T = 20000 with a
// run of ~10000 tokens (313 chunks); also ids outside [0, V), which must add nothing, and a table
// larger than the backend's vocab.
TEST(CudaOps, EmbeddingBackwardLongRunsAndOutOfRangeIds) {
  SKIP_WITHOUT_CUDA();
  const int64_t T = 20000, V = 128256, C = 72;
  CudaBackendOptions o;
  o.max_tokens = T;
  o.hidden = C;
  o.vocab = V;
  o.max_heads = 1;
  o.ce_chunk_bytes = size_t(8) << 20;
  auto be = make_cuda_backend(o);
  auto s = be->create_stream("test");
  std::vector<int32_t> ids(static_cast<size_t>(T));
  std::uniform_int_distribution<int32_t> any(0, int32_t(V - 1));
  std::bernoulli_distribution half(0.5);
  for (auto& id : ids) id = half(rng()) ? 128001 : any(rng());
  check_embedding_backward(*be, *s, ids, V, C, "T=20000");
  for (int64_t t = 0; t < T; t += 101) ids[size_t(t)] = t % 2 ? -1 : int32_t(V + t);
  check_embedding_backward(*be, *s, ids, V, C, "T=20000, some ids outside [0, V)");
  // a table with more rows than the backend's vocab needs a key bit more than its captured sort
  // has: the op sorts without the graph
  check_embedding_backward(*be, *s, ids, 151936, C, "T=20000, V=151936 > vocab");
}

// The one-block sort (T <= 16384, tables < 2^18 rows) and the device-wide sorts (the captured
// graph, and CUB called directly) must leave every id's tokens in the same (token) order, so the
// whole backward gives the same bits by each: a full tile, a tile but one token on the 18 key
// bits of a 151936-row table, a short one; half the tokens on one id, some ids outside [0, V).
// It drives embedding.cu's launchers directly: built only with the CUDA sources (the CPU-only
// build links cuda_fallback.cpp, which has the backend entry points but no kernels).
#ifdef SF_HAVE_CUDA
TEST(CudaOps, EmbeddingBackwardTileSortMatchesDeviceWideSort) {
  SKIP_WITHOUT_CUDA();
  const int64_t max_tokens = 16384, C = 72;
  Buffer buf = backend().alloc(MemoryKind::kDevice, cuda::embedding_scratch_bytes(max_tokens, C),
                               "embedding scratch");
  cuda::EmbeddingScratch tile = cuda::embedding_scratch(buf.data(), max_tokens, C, 151936);
  ASSERT_TRUE(tile.tile_sort) << "the device did not grant the one-block sort's shared memory";
  cuda::EmbeddingScratch graph = tile, direct = tile;
  graph.tile_sort = direct.tile_sort = false;
  direct.sort_graph = nullptr;
  ASSERT_TRUE(graph.sort_graph) << "the device-wide sort was not captured";
  const auto cs = static_cast<cudaStream_t>(cuda_stream_handle(stream()));
  for (auto [T, V] : {std::pair<int64_t, int64_t>{16384, 128256}, {16383, 151936}, {1000, 5003}}) {
    std::vector<int32_t> ids(static_cast<size_t>(T));
    std::uniform_int_distribution<int32_t> any(0, int32_t(V - 1));
    std::bernoulli_distribution half(0.5);
    for (auto& id : ids) id = half(rng()) ? int32_t(V / 2) : any(rng());
    for (int64_t t = 0; t < T; t += 101) ids[size_t(t)] = t % 2 ? -1 : int32_t(V + t);
    ids[1] = 0;
    ids[size_t(T - 1)] = int32_t(V - 1);
    std::vector<float> pool = randn(4099), acc0(size_t(V * C));
    for (size_t i = 0; i < acc0.size(); ++i) acc0[i] = pool[i % pool.size()];
    Dev di = upload_i32(ids, {T}), dg = upload(round_bf16(randn(T * C)), DType::kBF16, {T, C});
    std::vector<std::vector<float>> got;
    for (const cuda::EmbeddingScratch* sc : {&tile, &graph, &direct}) {
      Dev dtab = upload(acc0, DType::kF32, {V, C});
      cuda::embedding_backward(dtab.t, di.t, dg.t, *sc, cs);
      got.push_back(download(dtab.t));
    }
    const size_t bytes = got[0].size() * sizeof(float);
    EXPECT_EQ(std::memcmp(got[0].data(), got[1].data(), bytes), 0) << "T=" << T << ": vs graph";
    EXPECT_EQ(std::memcmp(got[0].data(), got[2].data(), bytes), 0) << "T=" << T << ": vs CUB";
    EXPECT_NE(std::memcmp(got[0].data(), acc0.data(), bytes), 0) << "T=" << T << ": no change";
  }
}
#else
TEST(CudaOps, EmbeddingBackwardTileSortMatchesDeviceWideSort) {
  GTEST_SKIP() << "skipped: built without CUDA";
}
#endif

TEST(CudaOps, RmsNorm) {
  SKIP_WITHOUT_CUDA();
  // warp-slot rows (C <= 256: several rows a warp, R not a multiple of the block's rows),
  // block-wide rows (4096, 5120, 8192; 12288 and 16384: four 8-packs a backward thread), the
  // 2-bf16 path (C % 8 != 0: 4094, 2)
  for (auto [R, C] : {std::pair<int64_t, int64_t>{1, 2},
                      {7, 64},
                      {33, 128},
                      {300, 1000},
                      {64, 4096},
                      {5, 8192},
                      {1000, 96},
                      {4099, 128},
                      {37, 5120},
                      {19, 4094},
                      {3000, 4096},
                      {9, 12288},
                      {300, 16384}}) {
    const float eps = 1e-6f;
    std::vector<float> x = round_bf16(randn(R * C, 1.5f)), b = round_bf16(randn(R * C));
    std::vector<float> w = round_bf16(randn(C, 0.5f)), g = round_bf16(randn(R * C));
    for (auto& v : w) v = bf16_to_f32(f32_to_bf16(v + 1.0f));
    Dev dx_ = upload(x, DType::kBF16, {R, C}), db = upload(b, DType::kBF16, {R, C});
    Dev dw_ = upload(w, DType::kBF16, {C}), dg = upload(g, DType::kBF16, {R, C});
    Dev out = upload(x, DType::kBF16, {R, C}), sum = upload(x, DType::kBF16, {R, C});
    Dev rstd = upload(std::vector<float>(size_t(R)), DType::kF32, {R});
    std::vector<float> ro(static_cast<size_t>(R * C)), rr(static_cast<size_t>(R)),
        rs(static_cast<size_t>(R * C));

    // out = bf16(w·bf16(x·rstd)): two roundings; rstd in fp32 (sum order only).
    backend().rmsnorm_forward(out.t, rstd.t, dx_.t, dw_.t, eps, stream());
    cpu::rmsnorm_forward(host(ro, out.t), host(rr, rstd.t), host(x, dx_.t), host(w, dw_.t), eps);
    EXPECT_LT(rel_error(download(out.t), ro), 2 * kOneRounding) << R << "x" << C;
    EXPECT_LT(rel_error(download(rstd.t), rr), 1e-5) << R << "x" << C;

    // fused residual add: the sum is rounded to bf16 (one rounding) and the device normalises the
    // rounded sum, the reference the exact one: ≤ 3 roundings on out.
    backend().add_rmsnorm_forward(sum.t, out.t, rstd.t, dx_.t, db.t, dw_.t, eps, stream());
    cpu::add_rmsnorm_forward(host(rs, sum.t), host(ro, out.t), host(rr, rstd.t), host(x, dx_.t),
                             host(b, db.t), host(w, dw_.t), eps);
    EXPECT_LT(rel_error(download(sum.t), rs), kOneRounding);
    EXPECT_LT(rel_error(download(out.t), ro), 3 * kOneRounding);
    EXPECT_LT(rel_error(download(rstd.t), rr), 4e-3);

    // backward from the plain forward's rstd, dx accumulated onto an existing value (2 roundings),
    // dw += in fp32 over bf16(x·rstd) (≤ 1 rounding per term).
    backend().rmsnorm_forward(out.t, rstd.t, dx_.t, dw_.t, eps, stream());
    cpu::rmsnorm_forward(host(ro, out.t), host(rr, rstd.t), host(x, dx_.t), host(w, dw_.t), eps);
    std::vector<float> dx0 = round_bf16(randn(R * C)), dw0 = randn(C);
    Dev ddx = upload(dx0, DType::kBF16, {R, C}), ddw = upload(dw0, DType::kF32, {C});
    backend().rmsnorm_backward(ddx.t, ddw.t, dg.t, dx_.t, dw_.t, rstd.t, true, stream());
    cpu::rmsnorm_backward(host(dx0, ddx.t), host(dw0, ddw.t), host(g, dg.t), host(x, dx_.t),
                          host(w, dw_.t), host(rr, rstd.t), true);
    EXPECT_LT(rel_error(download(ddx.t), dx0), 3 * kOneRounding) << "dx " << R << "x" << C;
    EXPECT_LT(rel_error(download(ddw.t), dw0), 2 * kOneRounding) << "dw " << R << "x" << C;

    // dx overwritten (no accumulation): one rounding of the output plus the dot's order
    std::vector<float> dx1(static_cast<size_t>(R * C), 0.0f), dw1 = randn(C);
    Dev edx = upload(std::vector<float>(size_t(R * C), NAN), DType::kBF16, {R, C});
    Dev edw = upload(dw1, DType::kF32, {C});
    backend().rmsnorm_backward(edx.t, edw.t, dg.t, dx_.t, dw_.t, rstd.t, false, stream());
    cpu::rmsnorm_backward(host(dx1, edx.t), host(dw1, edw.t), host(g, dg.t), host(x, dx_.t),
                          host(w, dw_.t), host(rr, rstd.t), false);
    EXPECT_LT(rel_error(download(edx.t), dx1), 2 * kOneRounding) << "dx= " << R << "x" << C;
    EXPECT_LT(rel_error(download(edw.t), dw1), 2 * kOneRounding) << "dw= " << R << "x" << C;
  }
}

TEST(CudaOps, Rope) {
  SKIP_WITHOUT_CUDA();
  for (auto [T, H, D] : {std::tuple<int64_t, int64_t, int64_t>{5, 1, 2},
                         {37, 4, 64},
                         {100, 8, 128},
                         {64, 32, 128},
                         {9, 3, 96},
                         {20, 2, 8},
                         {33, 8, 128}}) {
    std::vector<float> x = round_bf16(randn(T * H * D)), inv(static_cast<size_t>(D / 2));
    for (int64_t i = 0; i < D / 2; ++i) inv[size_t(i)] = std::pow(500000.0f, -2.0f * i / D);
    std::vector<int32_t> pos(static_cast<size_t>(T));
    std::uniform_int_distribution<int32_t> pick(0, 131071);  // long-context angles
    for (auto& p : pos) p = pick(rng());
    pos[0] = 0;
    Dev dx_ = upload(x, DType::kBF16, {T, H, D}), dp = upload_i32(pos, {T});
    Dev di = upload(inv, DType::kF32, {D / 2});
    std::vector<float> ref = x;
    // one rounding of the rotated value; cos/sin in fp32 on both sides
    backend().rope_forward(dx_.t, dp.t, di.t, stream());
    cpu::rope_forward(host(ref, dx_.t), host_i32(pos, dp.t), host(inv, di.t));
    EXPECT_LT(rel_error(download(dx_.t), ref), kOneRounding) << T << "," << H << "," << D;
    std::vector<float> back = round_bf16(ref);
    Dev db = upload(back, DType::kBF16, {T, H, D});
    backend().rope_backward(db.t, dp.t, di.t, stream());
    cpu::rope_backward(host(back, db.t), host_i32(pos, dp.t), host(inv, di.t));
    EXPECT_LT(rel_error(download(db.t), back), kOneRounding) << "backward";
  }
}

// ---------------------------------------------------------------- linear (cuBLASLt)

TEST(CudaOps, Linear) {
  SKIP_WITHOUT_CUDA();
  for (auto [M, K, N, bias] : {std::tuple<int64_t, int64_t, int64_t, bool>{1, 8, 8, false},
                               {37, 64, 96, true},
                               {300, 1000, 130, true},
                               {512, 4096, 1024, false},
                               {129, 250, 77, true}}) {
    std::vector<float> x = round_bf16(randn(M * K)), w = round_bf16(randn(N * K, 0.05f));
    std::vector<float> b = round_bf16(randn(N)), dy = round_bf16(randn(M * N));
    Dev dx_ = upload(x, DType::kBF16, {M, K}), dw_ = upload(w, DType::kBF16, {N, K});
    Dev db = upload(b, DType::kBF16, {N}), ddy = upload(dy, DType::kBF16, {M, N});
    Dev y = upload(std::vector<float>(size_t(M * N), 9.0f), DType::kBF16, {M, N});
    std::vector<float> ry(static_cast<size_t>(M * N));
    Tensor bt = bias ? db.t : Tensor(), hb = bias ? host(b, db.t) : Tensor();
    // bf16 output of an fp32 accumulation: one rounding, plus one more where cuBLASLt's bias
    // epilogue / split-K reduction passes through the output type (measured on the H200:
    // 4.9e-3 at 300x1000->130 with bias, above one rounding's 2^-8): 2 roundings.
    backend().linear_forward(y.t, dx_.t, dw_.t, bt, stream());
    cpu::linear_forward(host(ry, y.t), host(x, dx_.t), host(w, dw_.t), hb);
    EXPECT_LT(rel_error(download(y.t), ry), 2 * kOneRounding) << M << "x" << K << "->" << N;

    // dx = dy·w, then accumulated once more onto itself (beta = 1 reads the bf16 dx: 2 roundings)
    std::vector<float> rdx(static_cast<size_t>(M * K));
    Dev gdx = upload(std::vector<float>(size_t(M * K), 5.0f), DType::kBF16, {M, K});
    backend().linear_backward_input(gdx.t, ddy.t, dw_.t, false, stream());
    cpu::linear_backward_input(host(rdx, gdx.t), host(dy, ddy.t), host(w, dw_.t), false);
    EXPECT_LT(rel_error(download(gdx.t), rdx), kOneRounding) << "dx";
    rdx = download(gdx.t);  // continue from the device's rounded value
    backend().linear_backward_input(gdx.t, ddy.t, dw_.t, true, stream());
    cpu::linear_backward_input(host(rdx, gdx.t), host(dy, ddy.t), host(w, dw_.t), true);
    EXPECT_LT(rel_error(download(gdx.t), rdx), kOneRounding) << "dx accumulate";

    // dw += dyᵀ·x in F32 (C/D F32): fp32 accumulation order only; dbias likewise
    std::vector<float> rdw = randn(N * K), rdb = randn(N);
    Dev gdw = upload(rdw, DType::kF32, {N, K}), gdb = upload(rdb, DType::kF32, {N});
    backend().linear_backward_weight(gdw.t, bias ? gdb.t : Tensor(), ddy.t, dx_.t, stream());
    cpu::linear_backward_weight(host(rdw, gdw.t), bias ? host(rdb, gdb.t) : Tensor(),
                                host(dy, ddy.t), host(x, dx_.t));
    EXPECT_LT(rel_error(download(gdw.t), rdw), 1e-5) << "dw";
    if (bias) {
      EXPECT_LT(rel_error(download(gdb.t), rdb), 1e-5) << "dbias";
    }
  }
}

// ---------------------------------------------------------------- attention

struct AttnCase {
  std::vector<int32_t> seqlens;
  int64_t NH, NKV, D;
};

class CudaAttention : public ::testing::TestWithParam<AttnCase> {};

TEST_P(CudaAttention, MatchesReference) {
  SKIP_WITHOUT_CUDA();
  const AttnCase& c = GetParam();
  std::vector<int32_t> cu{0};
  for (int32_t n : c.seqlens) cu.push_back(cu.back() + n);
  const int64_t T = cu.back(), NH = c.NH, NKV = c.NKV, D = c.D, nseq = int64_t(c.seqlens.size());
  const float scale = 1.0f / std::sqrt(float(D));
  std::vector<float> q = round_bf16(randn(T * NH * D, 1.5f)),
                     k = round_bf16(randn(T * NKV * D, 1.5f));
  std::vector<float> v = round_bf16(randn(T * NKV * D)), go = round_bf16(randn(T * NH * D));
  Dev dq_ = upload(q, DType::kBF16, {T, NH, D}), dk_ = upload(k, DType::kBF16, {T, NKV, D});
  Dev dv_ = upload(v, DType::kBF16, {T, NKV, D}), dgo = upload(go, DType::kBF16, {T, NH, D});
  Dev dcu = upload_i32(cu, {nseq + 1});
  Dev out = upload(std::vector<float>(size_t(T * NH * D), NAN), DType::kBF16, {T, NH, D});
  Dev lse = upload(std::vector<float>(size_t(T * NH), NAN), DType::kF32, {T, NH});
  std::vector<float> ro(static_cast<size_t>(T * NH * D)), rl(static_cast<size_t>(T * NH));
  backend().attention_forward(out.t, lse.t, dq_.t, dk_.t, dv_.t, dcu.t, scale, stream());
  cpu::attention_forward(host(ro, out.t), host(rl, lse.t), host(q, dq_.t), host(k, dk_.t),
                         host(v, dv_.t), host_i32(cu, dcu.t), scale);
  // out: P is rounded to bf16 for the tensor-core P·V (≤ 2^-9 per weight) plus the output
  // rounding: 2 roundings. lse: fp32 scores of the same bf16 operands, exp2/log2: ~1e-6.
  std::vector<float> o = download(out.t);
  EXPECT_LT(rel_error(o, ro), 2 * kOneRounding) << "out";
  EXPECT_LT(rel_error(download(lse.t), rl), 1e-4) << "lse";

  // The backward runs from the device's own (bf16) out and lse, the reference from the same.
  std::vector<float> l = download(lse.t);
  Dev gq = upload(std::vector<float>(size_t(T * NH * D), NAN), DType::kBF16, {T, NH, D});
  Dev gk = upload(std::vector<float>(size_t(T * NKV * D), NAN), DType::kBF16, {T, NKV, D});
  Dev gv = upload(std::vector<float>(size_t(T * NKV * D), NAN), DType::kBF16, {T, NKV, D});
  backend().attention_backward(gq.t, gk.t, gv.t, dgo.t, dq_.t, dk_.t, dv_.t, out.t, lse.t, dcu.t,
                               scale, stream());
  std::vector<float> rq(static_cast<size_t>(T * NH * D)), rk(static_cast<size_t>(T * NKV * D)),
      rv(static_cast<size_t>(T * NKV * D));
  cpu::attention_backward(host(rq, gq.t), host(rk, gk.t), host(rv, gv.t), host(go, dgo.t),
                          host(q, dq_.t), host(k, dk_.t), host(v, dv_.t), host(o, out.t),
                          host(l, lse.t), host_i32(cu, dcu.t), scale);
  // P and dS enter the tensor cores as bf16 (one rounding each, relative to the term), then the
  // output rounding; dK/dV sum group·S terms: 3 roundings of margin.
  EXPECT_LT(rel_error(download(gq.t), rq), 3 * kOneRounding) << "dq";
  EXPECT_LT(rel_error(download(gk.t), rk), 3 * kOneRounding) << "dk";
  EXPECT_LT(rel_error(download(gv.t), rv), 3 * kOneRounding) << "dv";
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CudaAttention,
    ::testing::Values(
        // unpacked, one sample; GQA 1 (MHA), 4, 8; head_dim 64 and 128 (tensor cores)
        AttnCase{{200}, 4, 4, 64}, AttnCase{{300}, 8, 2, 128}, AttnCase{{257}, 16, 2, 64},
        AttnCase{{1000}, 32, 8, 128}, AttnCase{{64}, 4, 1, 128}, AttnCase{{1}, 2, 1, 64},
        // packed samples, boundaries inside tiles, an empty sample
        AttnCase{{100, 1, 63, 64, 130}, 8, 2, 128}, AttnCase{{37, 0, 300, 5}, 8, 1, 64},
        AttnCase{{500, 500, 24}, 32, 8, 128},
        // head_dims of small models: 16/32 on tensor cores, 8/48/96 on the generic path
        AttnCase{{70, 50}, 4, 2, 16}, AttnCase{{90}, 4, 2, 32}, AttnCase{{33, 40}, 8, 2, 8},
        AttnCase{{77}, 6, 3, 48}, AttnCase{{150, 20}, 4, 1, 96}),
    [](const auto& info) {
      const AttnCase& c = info.param;
      int64_t T = 0;
      for (int32_t n : c.seqlens) T += n;
      return "T" + std::to_string(T) + "_seq" + std::to_string(c.seqlens.size()) + "_H" +
             std::to_string(c.NH) + "_KV" + std::to_string(c.NKV) + "_D" + std::to_string(c.D);
    });

// ---------------------------------------------------------------- fused linear + cross-entropy

TEST(CudaOps, LinearCrossEntropy) {
  SKIP_WITHOUT_CUDA();
  for (auto [T, C, V] : {std::tuple<int64_t, int64_t, int64_t>{5, 64, 300},
                         {200, 96, 1001},
                         {40, 256, 128256},
                         {100, 128, 151936}}) {
    std::vector<float> x = round_bf16(randn(T * C)), w = round_bf16(randn(V * C, 0.2f));
    std::vector<int32_t> tg(static_cast<size_t>(T));
    std::uniform_int_distribution<int32_t> pick(0, int32_t(V - 1));
    for (size_t i = 0; i < tg.size(); ++i) tg[i] = i % 5 == 3 ? -100 : pick(rng());
    const float grad_scale = 1.0f / float(T);
    Dev dx_ = upload(x, DType::kBF16, {T, C}), dw_ = upload(w, DType::kBF16, {V, C});
    Dev dt = upload_i32(tg, {T});
    std::vector<float> loss0{1.5f}, gw0 = randn(V * C, 1e-3f);
    Dev loss = upload(loss0, DType::kF32, {1}), gw = upload(gw0, DType::kF32, {V, C});
    Dev gx = upload(std::vector<float>(size_t(T * C), NAN), DType::kBF16, {T, C});
    backend().linear_cross_entropy(loss.t, gx.t, gw.t, dx_.t, dw_.t, dt.t, grad_scale, stream());
    std::vector<float> rx(static_cast<size_t>(T * C));
    cpu::linear_cross_entropy(host(loss0, loss.t), host(rx, gx.t), host(gw0, gw.t), host(x, dx_.t),
                              host(w, dw_.t), host_i32(tg, dt.t), grad_scale);
    // loss: fp32 logits of bf16 operands, fp32 softmax: ~1e-6 relative
    EXPECT_NEAR(download(loss.t)[0], loss0[0], 1e-4 * std::fabs(loss0[0])) << "V=" << V;
    // dlogits are rounded to bf16 before both GEMMs (one rounding per term), dx is rounded once
    // more; dW is accumulated in fp32.
    EXPECT_LT(rel_error(download(gx.t), rx), 2 * kOneRounding) << "dx V=" << V;
    EXPECT_LT(rel_error(download(gw.t), gw0), 2 * kOneRounding) << "dw V=" << V;
  }
}

// ---------------------------------------------------------------- errors

TEST(CudaOps, ErrorsNameTheOpAndShapes) {
  SKIP_WITHOUT_CUDA();
  Dev a = upload(std::vector<float>(16, 1.0f), DType::kF32, {4, 4});
  Dev w = upload(std::vector<float>(16, 1.0f), DType::kBF16, {4, 4});
  try {
    backend().linear_forward(a.t, a.t, w.t, Tensor(), stream());
    FAIL() << "an F32 activation must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("linear_forward"), std::string::npos) << e.what();
  }
  Dev y = upload(std::vector<float>(12, 1.0f), DType::kBF16, {4, 3});
  EXPECT_THROW(backend().linear_forward(y.t, w.t, w.t, Tensor(), stream()), Error);
}

TEST(CudaOps, DeviceCountNeverThrows) {
  EXPECT_GE(cuda_device_count(), 0);
  if (cuda_device_count() == 0) {
    EXPECT_THROW(make_cuda_backend(CudaBackendOptions{}), Error);
  }
}

}  // namespace
}  // namespace sf
