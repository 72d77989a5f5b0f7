// Greedy decoding with the KV cache on the CUDA backend (bf16) against transformers' fp32 greedy
// decoding of the golden fixtures (tests/golden/data/generate.json). These random tiny models
// have flat logits (a top-2 margin under 1 % of max|logit| is common), so bf16 cannot reproduce
// every fp32 argmax, and a fixed worst-case bound (2 · 3e-2 · max|logit|) would leave only 24 of
// the 480 steps to compare. The bound is measured instead, per step, on the same prefix:
//   logits: the CUDA decoder is fed the reference sequence (prompt in one pass, then one token a
//           pass, as generate runs it) and compared with the CPU decoder fed the same (which
//           equals transformers to fp32: test_generate_golden.cpp): max|Δ|/max|ref| < 3e-2 over
//           all positions (CudaGolden's bound for these models: weights rounded to bf16 and ~10
//           bf16-stored activations on a 2-layer path; measured ≤ 0.015 on the H200);
//   argmax: at step k, with δ_k = max|Δ| of that step's logits (plus 1e-5·max|logit| for the
//           CPU-vs-transformers difference), the fp32 choice cannot be overturned when its top-2
//           margin exceeds 2·δ_k: there the CUDA argmax must be the reference id. Such decidable
//           steps must be at least half of all (the bf16 logits are close, not merely bounded);
//   ids:    generate_tokens on CUDA gives the reference ids up to the first step where the CUDA
//           argmax differs (only at an undecidable step, by the check above), and that step's
//           CUDA argmax — the loop feeds back what it picked, at the right positions;
//   the layers streaming through the ring give the resident decoder's bits (the same kernels on
//           the same shapes; every op the decoder uses is deterministic).
// Skips when no CUDA device is visible.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "generate_fixture.h"
#include "train/generate.h"

namespace sf {
namespace {

using golden::GenerateCase;

constexpr double kLogitsBound = 3e-2;
constexpr double kCpuVsTransformers = 1e-5;  // of max|logit|: fp32 against fp32

std::unique_ptr<Backend> cuda_backend_for(const ModelSpec& spec, int64_t tokens) {
  CudaBackendOptions o;
  o.max_tokens = tokens;
  o.hidden = spec.hidden;
  o.vocab = spec.vocab;
  o.max_heads = spec.heads;
  return make_cuda_backend(o);
}

// The logits [new tokens, V] that choose each reference id: the prompt in one pass, then the
// reference ids one a pass (teacher forcing), as generate_tokens runs while it agrees.
std::vector<float> forced_logits(Decoder& d, const GenerateCase& c) {
  d.reset();
  std::vector<float> out = d.forward(c.prompt);
  for (size_t k = 0; k + 1 < c.new_ids.size(); ++k) {
    const std::vector<float> l = d.forward({c.new_ids[k]});
    out.insert(out.end(), l.begin(), l.end());
  }
  return out;
}

TEST(GenerateGoldenCuda, GreedyMatchesTransformersWhereBf16CanDecide) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "skipped: no CUDA device";
  size_t decidable = 0, total = 0, equal_prefix = 0;
  double worst_logits = 0;
  auto cpu = make_cpu_backend();
  for (const GenerateCase& c : golden::generate_cases()) {
    const auto dir = golden::data_dir() / c.model;
    const ModelSpec spec = load_model_spec(dir);
    const int64_t V = spec.vocab;
    DecoderOptions d;
    d.max_tokens = int64_t(c.prompt.size()) + c.max_new_tokens;
    auto be = cuda_backend_for(spec, d.max_tokens);
    auto decoder = load_decoder(*be, dir, d);
    const std::vector<float> dev = forced_logits(*decoder, c);
    const std::vector<float> ref = forced_logits(*load_decoder(*cpu, dir, d), c);
    const double e = golden::rel_error(dev, ref);
    EXPECT_LT(e, kLogitsBound) << c.model << ": logits";
    worst_logits = std::max(worst_logits, e);

    size_t first_diff = c.new_ids.size(), here = 0;
    std::vector<int32_t> dev_argmax;
    for (size_t k = 0; k < c.new_ids.size(); ++k) {
      const float *a = dev.data() + k * size_t(V), *b = ref.data() + k * size_t(V);
      double delta = 0;
      for (int64_t i = 0; i < V; ++i) delta = std::max(delta, std::fabs(double(a[i]) - b[i]));
      delta += kCpuVsTransformers * c.max_abs_logits[k];
      dev_argmax.push_back(int32_t(std::max_element(a, a + V) - a));
      const bool decides = c.margins[k] > 2 * delta;
      if (decides) {
        ++here;
        EXPECT_EQ(dev_argmax[k], c.new_ids[k])
            << c.model << " prompt " << c.prompt.size() << ", step " << k << ": margin "
            << c.margins[k] << " > 2·" << delta;
      }
      if (dev_argmax[k] != c.new_ids[k] && first_diff == c.new_ids.size()) first_diff = k;
    }
    decidable += here;
    total += c.new_ids.size();

    GenerateOptions o;
    o.max_new_tokens = c.max_new_tokens;
    o.eos_ids = eos_token_ids(dir);
    const std::vector<int32_t> got = generate_tokens(*decoder, c.prompt, o);
    std::vector<int32_t> want(c.new_ids.begin(), c.new_ids.begin() + long(first_diff));
    if (first_diff < c.new_ids.size()) want.push_back(dev_argmax[first_diff]);
    ASSERT_GE(got.size(), want.size()) << c.model;
    EXPECT_EQ(std::vector<int32_t>(got.begin(), got.begin() + long(want.size())), want)
        << c.model << " prompt " << c.prompt.size();
    equal_prefix += first_diff;
    std::printf(
        "[ errors ] %s prompt %zu: logits %.3g; %zu of %zu steps decidable in bf16; "
        "equal to transformers for %zu ids\n",
        c.model.c_str(), c.prompt.size(), e, here, c.new_ids.size(), first_diff);
  }
  EXPECT_GE(2 * decidable, total) << "bf16 decides too few steps: the logits are too far off";
  std::printf(
      "[ errors ] %zu of %zu steps decidable; %zu ids equal before a divergence; worst "
      "logits %.3g\n",
      decidable, total, equal_prefix, worst_logits);
}

TEST(GenerateGoldenCuda, StreamedLayersGiveTheResidentBits) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "skipped: no CUDA device";
  const GenerateCase c = golden::generate_cases().at(0);
  const auto dir = golden::data_dir() / c.model;
  const ModelSpec spec = load_model_spec(dir);
  DecoderOptions d;
  d.max_tokens = int64_t(c.prompt.size()) + c.max_new_tokens;
  auto be = cuda_backend_for(spec, d.max_tokens);
  auto resident = load_decoder(*be, dir, d);
  // A ring of fewer slots than layers, and a budget that holds it but not every layer: the
  // layers must stream (with as many slots as layers the ring is the resident layout).
  DecoderOptions s = d;
  s.ring = int(std::max<int64_t>(1, spec.layers - 1));
  s.device_budget = Decoder::device_bytes(spec, s, DType::kBF16, /*streaming=*/true);
  ASSERT_LT(s.device_budget, Decoder::device_bytes(spec, s, DType::kBF16, /*streaming=*/false));
  auto streamed = load_decoder(*be, dir, s);
  ASSERT_FALSE(resident->streaming()) << resident->summary();
  ASSERT_TRUE(streamed->streaming()) << streamed->summary();
  std::vector<int32_t> seq = c.prompt;
  seq.insert(seq.end(), c.new_ids.begin(), c.new_ids.end());
  for (size_t t = 0; t < seq.size(); ++t) {
    const std::vector<float> a = resident->forward({seq[t]}), b = streamed->forward({seq[t]});
    ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "position " << t;
  }
}

}  // namespace
}  // namespace sf
