// Data parallel on CUDA where one GPU is all there is: two engines on the same device (two CUDA
// backends, the peer collective — a device cannot be two NCCL ranks) train as one engine whose
// micro-batches are their shares, to fp32 rounding of the regrouped gradient sums (the GEMMs
// accumulate the second micro-batch into the first instead of adding two products), and steps
// allocate nothing. NCCL itself: the library loads and a one-rank communicator reduces. The runs
// over several GPUs need a machine that has them (docs/perf.md).
#include <gtest/gtest.h>

#include <cmath>

#include "backend/collective.h"
#include "backend/cuda/cuda_backend.h"
#include "engine_test_util.h"

namespace sf {
namespace {

using namespace sf::test_engine;

CudaBackendOptions backend_options(const ModelSpec& spec, int64_t tokens) {
  CudaBackendOptions o;
  o.max_tokens = tokens;
  o.hidden = spec.hidden;
  o.vocab = spec.vocab;
  o.max_heads = spec.heads;
  return o;
}

struct Losses {
  std::vector<double> loss, norm;
  std::vector<std::vector<float>> weights;
};

Losses run(const fs::path& dir, int engines, float clip) {
  const ModelSpec spec = load_model_spec(dir);
  const int kLen = 24, kSamples = 4;
  EngineOptions opt = run_options(2, clip);
  opt.max_tokens = kSamples * kLen / engines;
  opt.max_sequences = kSamples / engines;
  opt.micro_tokens = kSamples * kLen / 2;  // one engine: the two engines' shares in turn
  std::vector<std::unique_ptr<Backend>> bes;
  std::vector<Backend*> ptr;
  for (int k = 0; k < engines; ++k) {
    bes.push_back(make_cuda_backend(backend_options(spec, opt.micro_tokens)));
    ptr.push_back(bes.back().get());
  }
  std::unique_ptr<Collective> coll = make_peer_collective(ptr);
  if (engines > 1) {
    opt.data_parallel.assign(ptr.begin() + 1, ptr.end());
    opt.collective = coll.get();
  }
  Engine e(*ptr[0], spec, opt);
  load_model_weights(e, dir);
  Losses r;
  uint64_t before = 0;
  for (int s = 0; s < 4; ++s) {
    if (s == 1) before = backend_allocations();
    const StepResult st =
        e.step(random_batch(uint64_t(s % 2), spec.vocab, std::vector<int>(kSamples, kLen)), 1e-2f);
    r.loss.push_back(st.loss);
    r.norm.push_back(st.grad_norm);
  }
  EXPECT_EQ(backend_allocations(), before) << engines << " engines: a step allocated memory";
  r.weights = all_weights(e);
  return r;
}

TEST(DataParallelCuda, TwoEnginesOnOneGpuTrainAsOne) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "skipped: no CUDA device";
  const fs::path dir = tiny_model("dp_cuda", "llama", false);
  for (float clip : {0.0f, 1.0f}) {
    const Losses one = run(dir, 1, clip), two = run(dir, 2, clip);
    ASSERT_EQ(one.loss.size(), two.loss.size());
    for (size_t s = 0; s < one.loss.size(); ++s) {
      EXPECT_NEAR(two.loss[s], one.loss[s], 2e-3 * one.loss[s]) << "clip " << clip << " step " << s;
      EXPECT_NEAR(two.norm[s], one.norm[s], 2e-3 * one.norm[s]) << "clip " << clip << " step " << s;
    }
    EXPECT_LT(one.loss[2], one.loss[0]);
    double worst = 0, moved = 0;
    const Losses start = [&] {
      Losses z;
      const ModelSpec spec = load_model_spec(dir);
      auto be = make_cuda_backend(backend_options(spec, 96));
      EngineOptions o = run_options(2, clip);
      o.max_tokens = 96;
      o.max_sequences = 4;
      Engine e(*be, spec, o);
      load_model_weights(e, dir);
      z.weights = all_weights(e);
      return z;
    }();
    for (size_t t = 0; t < one.weights.size(); ++t)
      for (size_t i = 0; i < one.weights[t].size(); ++i) {
        worst = std::max(worst, double(std::abs(two.weights[t][i] - one.weights[t][i])));
        moved = std::max(moved, double(std::abs(one.weights[t][i] - start.weights[t][i])));
      }
    // 4 steps of lr 1e-2 move weights by up to ~4e-2; the two runs differ far less.
    EXPECT_GT(moved, 1e-2) << "clip " << clip;
    EXPECT_LT(worst, 0.1 * moved) << "clip " << clip << ": the data-parallel weights drifted";
  }
}

TEST(NcclCollective, LoadsAndReducesOnOneRank) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "skipped: no CUDA device";
  CudaBackendOptions o;
  o.max_tokens = 16;
  o.hidden = 64;
  o.vocab = 64;
  auto be = make_cuda_backend(o);
  std::string why;
  std::unique_ptr<Collective> c = make_nccl_collective({be.get()}, {0}, &why);
  if (!c) GTEST_SKIP() << "skipped: NCCL does not load here (" << why << "; SF_NCCL_LIB names one)";
  EXPECT_NE(c->describe().find("NCCL"), std::string::npos) << c->describe();
  std::vector<float> host(1000);
  for (size_t i = 0; i < host.size(); ++i) host[i] = float(i) * 0.5f;
  Buffer dev = be->alloc(MemoryKind::kDevice, host.size() * 4, "test");
  auto s = be->create_stream("reduce");
  be->copy(dev.data(), host.data(), host.size() * 4, *s);
  c->reduce_sum(0, Tensor(dev.data(), DType::kF32, {1000}), 0, *s);
  std::vector<float> back(host.size());
  be->copy(back.data(), dev.data(), back.size() * 4, *s);
  be->synchronize(*s);
  EXPECT_EQ(back, host);  // the sum over one rank
}

}  // namespace
}  // namespace sf
