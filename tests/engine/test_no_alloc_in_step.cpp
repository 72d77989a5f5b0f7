// Issue 12 item 9: no cudaMalloc or cudaHostAlloc inside a step. Every allocation of device or
// pinned memory the backends make is counted (backend_allocations); after the engine is built and
// the weights are in, steps (with and without clipping, micro-batched, with the GPU-resident
// share, decoder layers in it too) and evaluations add none, on the CPU backend and on CUDA. On
// CUDA the device memory in use is also unchanged across the steps after the first, so no library
// (cuBLASLt, cuDNN) kept memory it took during one. (The first step may add some — CUDA and the
// libraries set up kernels and handles on first use: 2 MiB on the GPU machine with CUDA's default
// lazy module loading, 56 MiB with CUDA_MODULE_LOADING=EAGER — which the plan's library reserve
// covers.)
#include <gtest/gtest.h>

#include "backend/cuda/cuda_backend.h"
#include "engine_test_util.h"

namespace sf {
namespace {

using namespace sf::test_engine;

void steps_allocate_nothing(Backend& be, const fs::path& dir, EngineOptions opt) {
  const ModelSpec spec = load_model_spec(dir);
  Engine e(be, spec, opt);
  load_model_weights(e, dir);
  const uint64_t before = backend_allocations();
  uint64_t used = 0;
  for (int s = 0; s < 4; ++s) {
    e.step(random_batch(uint64_t(s), spec.vocab, s % 2 ? std::vector<int>{13, 21, 7}
                                                       : std::vector<int>{20, 3, 24}),
           1e-2f);
    if (s == 0) {  // every kernel of a step and an evaluation has run once
      e.evaluate(random_batch(8, spec.vocab, {20, 5}));
      used = be.device_memory().used;
    }
    if (s == 1) e.evaluate(random_batch(9, spec.vocab, {20, 5}));
  }
  e.evaluate(random_batch(10, spec.vocab, {24}));  // waits for the last updates it reads
  EXPECT_EQ(backend_allocations(), before)
      << "a step allocated device or pinned memory (window " << opt.window << ", clip "
      << opt.max_grad_norm << ", M " << opt.micro_tokens << ")";
  EXPECT_EQ(be.device_memory().used, used)
      << "device memory in use grew during the steps (window " << opt.window << ", clip "
      << opt.max_grad_norm << ", M " << opt.micro_tokens << ")";
  // The count sees the engine's allocations: logits() takes its buffer per call (not a step).
  e.logits(random_batch(11, spec.vocab, {8}));
  EXPECT_GT(backend_allocations(), before);
}

std::vector<EngineOptions> variants() {
  std::vector<EngineOptions> out;
  for (float clip : {0.0f, 1.0f})
    for (int64_t micro : {int64_t(0), int64_t(24)})
      for (DeviceOptimizer d : {DeviceOptimizer::kOff, DeviceOptimizer::kAll}) {
        EngineOptions o = run_options(2, clip);
        o.micro_tokens = micro;
        o.device_optimizer = d;
        out.push_back(o);
        if (d == DeviceOptimizer::kOff) continue;
        o.on_device.assign(7, true);  // every unit of the 5-layer model: the layers too
        out.push_back(o);
      }
  return out;
}

TEST(NoAllocationInStep, CpuBackend) {
  const fs::path dir = tiny_model("no_alloc", "llama", false);
  auto be = make_cpu_backend();
  for (const EngineOptions& o : variants()) steps_allocate_nothing(*be, dir, o);
}

TEST(NoAllocationInStep, CudaBackend) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "skipped: no CUDA device";
  const fs::path dir = tiny_model("no_alloc_cuda", "qwen3", false);
  const ModelSpec spec = load_model_spec(dir);
  for (const EngineOptions& o : variants()) {
    CudaBackendOptions bo;
    bo.max_tokens = o.micro_tokens > 0 ? o.micro_tokens : o.max_tokens;
    bo.hidden = spec.hidden;
    bo.vocab = spec.vocab;
    bo.max_heads = spec.heads;
    auto be = make_cuda_backend(bo);
    steps_allocate_nothing(*be, dir, o);
  }
}

}  // namespace
}  // namespace sf
