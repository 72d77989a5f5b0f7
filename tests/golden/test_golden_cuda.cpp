// The golden fixtures (tests/golden/data, transformers + torch.optim.AdamW in fp32) through the
// real loader and the sliding engine on the CUDA backend, windows 1, 2, 3. Mixed precision: the
// device computes in bf16 (weights are bf16 copies of the fp32 masters, activations bf16, every
// matmul fp32-accumulated, gradients accumulated in fp32 and handed to the host as bf16), while
// master weights and AdamW stay fp32 on the host. The reference is pure fp32, so the tolerances
// are bf16's, stated next to each check:
//   logits     max|Δ|/max|ref| < 3e-2  — weights rounded to bf16 (2^-9 each) and ~10 bf16-stored
//              activations on the path of a 2-layer model: a few 2^-9 roundings, ×4 margin;
//   loss       relative 1e-2           — a mean of log-softmaxes of those logits;
//   grad norm  relative 2e-2; every gradient max|Δ|/max|ref| < 6e-2 — the backward adds as many
//              roundings again, and gradients reach the host as bf16;
//   params after 3 steps: the AdamW update m/(√v+eps) normalises each element, so an element
//              whose gradient is within bf16 noise of zero can move by up to ~lr per step in
//              either direction: checked as ‖p − p_ref‖₂ / ‖p_ref − p_init‖₂ < 0.15 (the update
//              is right to ~15% in L2; measured ≤ 0.082 on the H200) and
//              max|p − p_ref| ≤ 2·lr·steps (no element off by more than the extreme of two
//              opposite full-size updates; measured ≤ 0.021 = 0.35 of that bound).
// Measured on the H200 (2026-12-02): logits ≤ 0.015, worst gradient ≤ 0.040 (qwen3 k_norm).
// Skips when no CUDA device is visible.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <fstream>
#include <nlohmann/json.hpp>

#include "backend/cuda/cuda_backend.h"
#include "engine/engine.h"
#include "io/safetensors.h"
#include "model/spec.h"
#include "golden_case.h"
#include "train/checkpoint.h"

namespace sf {
namespace {

namespace fs = std::filesystem;

using golden::Case;
using golden::load_case;
using golden::read_all;
using golden::rel_error;

// (case, window, mode): mode 0 the whole batch at once, 1 micro-batched (one micro-batch per
// sample), 2 micro-batched with the embedding's and head's optimizer on the device, their state
// loaded and read back in pieces of 1000 elements (a remainder in every tensor), 3 micro-batched
// with every host unit's clipped update in two passes (moments_later: the cases clip).
class CudaGolden : public ::testing::TestWithParam<std::tuple<std::string, int, int>> {};

TEST_P(CudaGolden, MatchesTransformersAtBf16) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "skipped: no CUDA device";
  const auto& [name, window, mode] = GetParam();
  const bool micro = mode >= 1;
  const fs::path dir = golden::data_dir() / name;
  ASSERT_TRUE(fs::exists(dir)) << dir << " is missing: run tests/golden/make_golden.py";
  Case c = load_case(dir);
  SafetensorsReader golden(dir / "golden.safetensors");
  EngineOptions opt = c.options(window, micro);
  if (mode == 2) {
    opt.device_optimizer = DeviceOptimizer::kAll;
    opt.state_piece = 1000;
  }
  if (mode == 3) opt.moments_later_units = 1000;

  CudaBackendOptions bo;
  bo.max_tokens = micro ? opt.micro_tokens : c.batch.tokens();  // workspaces sized by M
  bo.hidden = c.spec.hidden;
  bo.vocab = c.spec.vocab;
  bo.max_heads = c.spec.heads;
  auto backend = make_cuda_backend(bo);
  Engine engine(*backend, c.spec, opt);
  load_model_weights(engine, dir);
  EXPECT_EQ(engine.plan().device_params > 0, mode == 2);
  EXPECT_EQ(engine.plan().moments_later_params > 0, mode == 3);

  const std::map<std::string, std::vector<float>> init = golden::weights_by_name(engine);

  const double e_logits = rel_error(engine.logits(c.batch), read_all(golden, "logits"));
  EXPECT_LT(e_logits, 3e-2) << "logits";
  const std::vector<float> losses = read_all(golden, "step_losses");
  const std::vector<float> norms = read_all(golden, "grad_norms");
  const float lr = c.hp["lr"];
  const int steps = c.hp["steps"];
  double worst_grad = 0;
  std::string worst_grad_name;
  for (int s = 0; s < steps; ++s) {
    StepResult r = engine.step(c.batch, lr);
    EXPECT_NEAR(r.loss, losses[size_t(s)], 1e-2 * std::fabs(losses[size_t(s)])) << "step " << s;
    EXPECT_NEAR(r.grad_norm, norms[size_t(s)], 2e-2 * norms[size_t(s)]) << "step " << s;
    if (s == 0) {
      for (const std::string& n : golden.names()) {
        if (n.rfind("grad.", 0) != 0) continue;
        const double e = rel_error(engine.gradient(n.substr(5)), read_all(golden, n));
        EXPECT_LT(e, 6e-2) << n;
        if (e > worst_grad) worst_grad = e, worst_grad_name = n;
      }
    }
  }
  double worst_l2 = 0, worst_abs = 0;
  int checked = 0;
  for (const auto& [tensor, p] : golden::weights_by_name(engine)) {
    const std::vector<float> ref = read_all(golden, "param_after3." + tensor);
    const std::vector<float>& p0 = init.at(tensor);
    ASSERT_EQ(p.size(), ref.size()) << tensor;
    double num = 0, den = 0, mx = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      num += (double(p[i]) - ref[i]) * (double(p[i]) - ref[i]);
      den += (double(ref[i]) - p0[i]) * (double(ref[i]) - p0[i]);
      mx = std::max(mx, std::fabs(double(p[i]) - ref[i]));
    }
    const double l2 = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
    // k_proj.bias has an exactly zero gradient (it shifts every score of a query by the same
    // q·b, which softmax ignores): both sides update it from rounding noise, so only the
    // max-abs bound applies to it.
    const bool zero_grad = tensor.size() >= 11 && tensor.compare(tensor.size() - 11, 11, "k_proj.bias") == 0;
    if (!zero_grad) {
      EXPECT_LT(l2, 0.15) << tensor << ": update error in L2";
    }
    EXPECT_LE(mx, 2.0 * lr * steps) << tensor;
    if (!zero_grad) worst_l2 = std::max(worst_l2, l2);
    worst_abs = std::max(worst_abs, mx);
    ++checked;
  }
  EXPECT_GT(checked, 0);
  // The measured margins, for tuning the thresholds above from evidence.
  std::printf("[ errors ] %s W%d mode %d: logits %.3g, worst grad %.3g (%s), params L2 %.3g, max %.3g\n",
              name.c_str(), window, mode, e_logits, worst_grad, worst_grad_name.c_str(), worst_l2,
              worst_abs);
}

INSTANTIATE_TEST_SUITE_P(
    AllCases, CudaGolden,
    ::testing::Combine(::testing::ValuesIn(golden::case_names()), ::testing::Values(1, 2, 3),
                       ::testing::Values(0, 1, 2, 3)),
    [](const auto& info) {
      const int mode = std::get<2>(info.param);
      return std::get<0>(info.param) + "_W" + std::to_string(std::get<1>(info.param)) +
             (mode == 0   ? ""
              : mode == 1 ? "_micro"
              : mode == 2 ? "_micro_devopt"
                          : "_micro_later");
    });

}  // namespace
}  // namespace sf
