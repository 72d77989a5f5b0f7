// The engine hands attention its sample boundaries on the host (set_host_cu_seqlens) so the CUDA
// backend need not read them back in every call: with the hint the results must be the same bits
// as without it, for equal and unequal packed lengths.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "core/dtype.h"

namespace sf {
namespace {

TEST(CudaSeqlensHint, SameResultsWithAndWithoutTheHint) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "skipped: no CUDA device";
  const int64_t NH = 8, NKV = 2, D = 128;
  for (std::vector<int32_t> cu : {std::vector<int32_t>{0, 256, 512}, {0, 100, 357, 512}}) {
    const int64_t T = cu.back();
    CudaBackendOptions o;
    o.max_tokens = T;
    o.hidden = NH * D;
    o.vocab = 16;
    o.max_heads = NH;
    auto be = make_cuda_backend(o);
    auto s = be->create_stream("test");
    const size_t qn = size_t(T * NH * D), kn = size_t(T * NKV * D);
    Buffer dev = be->alloc(MemoryKind::kDevice, (2 * qn + 2 * kn) * 2 + size_t(T * NH) * 4 + 64 * 4,
                           "test");
    char* p = static_cast<char*>(dev.data());
    Tensor q(p, DType::kBF16, {T, NH, D}), k(p + qn * 2, DType::kBF16, {T, NKV, D}),
        v(p + qn * 2 + kn * 2, DType::kBF16, {T, NKV, D}),
        out(p + qn * 2 + kn * 4, DType::kBF16, {T, NH, D}),
        lse(p + qn * 4 + kn * 4, DType::kF32, {T, NH}),
        tcu(p + qn * 4 + kn * 4 + size_t(T * NH) * 4, DType::kI32, {int64_t(cu.size())});
    std::mt19937 rng(7);
    std::normal_distribution<float> nd;
    std::vector<uint16_t> h(qn + 2 * kn);
    for (auto& x : h) x = f32_to_bf16(nd(rng));
    be->copy(q.data, h.data(), qn * 2, *s);
    be->copy(k.data, h.data() + qn, kn * 2, *s);
    be->copy(v.data, h.data() + qn + kn, kn * 2, *s);
    be->copy(tcu.data, cu.data(), cu.size() * 4, *s);
    auto run = [&] {
      be->attention_forward(out, lse, q, k, v, tcu, 0.088f, *s);
      std::vector<uint16_t> r(qn);
      be->copy(r.data(), out.data, qn * 2, *s);
      be->synchronize(*s);
      return r;
    };
    const std::vector<uint16_t> without = run();
    be->set_host_cu_seqlens(tcu, cu);
    const std::vector<uint16_t> with = run();
    EXPECT_EQ(with, without) << "boundaries of " << cu.size() - 1 << " samples";
  }
}

}  // namespace
}  // namespace sf
