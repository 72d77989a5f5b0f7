// GPU-resident decoder layers on CUDA (the plan's share past the embedding and the head, or the
// embedding alone where the head does not fit): each is updated on the device right after its own
// backward (clipping: after the norm, from the fp32 gradient it kept), into the weights its slot
// holds, and a layer evicted before the next forward is cast again from its master after that
// update (an event on the load stream). Against the same run with every unit on the host: the
// first step's loss is the same bits (same weights, same kernels) and the run tracks it at bf16
// tolerance — the device update reads the fp32 gradient where the CPU AdamW reads its bf16 copy —
// while a load that did not wait for the update would read weights a whole step stale (|Δw| ≈ lr,
// twice the bound).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "backend/cuda/cuda_backend.h"
#include "engine_test_util.h"
#include "model/layout.h"

namespace sf {
namespace {

using namespace sf::test_engine;

// A CUDA backend for the tiny model's steps (64 tokens), with workspaces for micro-batches of
// `micro` tokens where given.
std::unique_ptr<Backend> tiny_backend(const ModelSpec& spec, int64_t micro) {
  CudaBackendOptions bo;
  bo.max_tokens = micro > 0 ? micro : 64;
  bo.hidden = spec.hidden;
  bo.vocab = spec.vocab;
  bo.max_heads = spec.heads;
  return make_cuda_backend(bo);
}

TEST(CudaResidentLayers, TrackTheHostOptimizer) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "skipped: no CUDA device";
  const fs::path dir = tiny_model("resident_layers_cuda", "llama", false);
  const ModelSpec spec = load_model_spec(dir);
  const size_t units = size_t(spec.layers) + 2;
  constexpr int kSteps = 4;
  constexpr float kLr = 1e-2f;
  for (float clip : {0.0f, 1.0f})
    for (int window : {1, 2, 3})
      for (int64_t micro : {int64_t(0), int64_t(24)}) {
        auto be = tiny_backend(spec, micro);
        EngineOptions host_opt = run_options(window, clip);
        host_opt.micro_tokens = micro;
        host_opt.device_optimizer = DeviceOptimizer::kOff;
        auto run = [&](const EngineOptions& opt, std::vector<double>* losses) {
          Engine e(*be, spec, opt);
          load_model_weights(e, dir);
          if (!opt.on_device.empty()) {
            EXPECT_EQ(e.plan().on_device, opt.on_device);
          }
          for (int s = 0; s < kSteps; ++s)
            losses->push_back(
                e.step(random_batch(uint64_t(s % 2), spec.vocab, {13, 21, 7}), kLr).loss);
          return all_weights(e);
        };
        std::vector<double> host_losses;
        const std::vector<std::vector<float>> host_w = run(host_opt, &host_losses);
        // head false: the head on the host, as the plan keeps it where it does not fit beside
        // the embedding (clipping at 24 GiB), and with clipping two host layers' m and v later
        for (const auto& [layers, head] :
             {std::pair{std::vector<int>{0, 1}, true}, std::pair{std::vector<int>{1, 3}, true},
              std::pair{std::vector<int>{0, 1}, false}}) {
          EngineOptions opt = host_opt;
          opt.on_device.assign(units, false);
          opt.on_device.front() = true;
          opt.on_device.back() = head;
          for (int i : layers) opt.on_device[size_t(1 + i)] = true;
          if (!head && clip > 0) opt.moments_later_units = 2;
          std::vector<double> losses;
          const std::vector<std::vector<float>> w = run(opt, &losses);
          const std::string what = "clip " + std::to_string(clip) + " window " +
                                   std::to_string(window) + " M " + std::to_string(micro) +
                                   " layers from " + std::to_string(layers.front()) +
                                   (head ? "" : ", the head on the host");
          EXPECT_EQ(losses.front(), host_losses.front()) << what;
          for (int s = 1; s < kSteps; ++s)
            EXPECT_NEAR(losses[size_t(s)], host_losses[size_t(s)], 1e-2 * host_losses[size_t(s)])
                << what << " step " << s;
          ASSERT_EQ(w.size(), host_w.size());
          double worst = 0;
          for (size_t k = 0; k < w.size(); ++k)
            for (size_t i = 0; i < w[k].size(); ++i)
              worst = std::max(worst, std::fabs(double(w[k][i]) - host_w[k][i]));
          // bf16 noise (0.0023 on the H100, 2026-12-06), not a step's update (a host layer's
          // gradient overwritten in a shared stage by the next one's gave 0.014-0.028)
          EXPECT_LT(worst, 0.5 * kLr) << what;
          std::printf("[ resident ] %s: max |Δw| %.3g\n", what.c_str(), worst);
        }
      }
}

// The slots' gradient and stages inside the outer unit's fp32 gradients (PlanDims::slots_in_outer;
// a vocabulary of 512 makes room for the gradient and both bf16 stages): the engine orders the
// head's gradient leaving that buffer before the first layer's backward, and the last layers'
// stage D2Hs before the embedding's backward overwrites them. Against the same run with memory of
// their own: every op is bitwise repeatable (cuda_backend.cu), so the same losses and weights; a
// D2H that raced the embedding's backward would send a layer the embedding's gradient instead of
// its own (|Δw| ≈ lr a step).
TEST(CudaSlotsInOuter, ChangeNoResult) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "skipped: no CUDA device";
  const fs::path dir = tiny_model("slots_in_outer_cuda", "llama", false, 512);
  const ModelSpec spec = load_model_spec(dir);
  constexpr int kSteps = 4;
  constexpr float kLr = 1e-2f;
  for (float clip : {0.0f, 1.0f})
    for (int window : {1, 2})
      for (DeviceOptimizer dev : {DeviceOptimizer::kOff, DeviceOptimizer::kAll})
        for (int64_t micro : {int64_t(0), int64_t(24)}) {
          auto be = tiny_backend(spec, micro);
          auto run = [&](bool inside, std::vector<double>* losses) {
            EngineOptions opt = run_options(window, clip);
            opt.micro_tokens = micro;
            opt.device_optimizer = dev;
            opt.slots_in_outer = inside;
            Engine e(*be, spec, opt);
            load_model_weights(e, dir);
            for (int s = 0; s < kSteps; ++s)
              losses->push_back(
                  e.step(random_batch(uint64_t(s % 2), spec.vocab, {13, 21, 7}), kLr).loss);
            return std::pair{all_weights(e), e.plan().device.slots};
          };
          std::vector<double> apart_losses, inside_losses;
          const auto [apart, apart_slots] = run(false, &apart_losses);
          const auto [inside, inside_slots] = run(true, &inside_losses);
          const std::string what = "clip " + std::to_string(clip) + " window " +
                                   std::to_string(window) + " M " + std::to_string(micro) +
                                   (dev == DeviceOptimizer::kAll ? ", outer on the device" : "");
          // the gradient and both stages inside: the slots take their weights alone
          const uint64_t n = uint64_t(layer_layout(spec, 0).numel);
          EXPECT_EQ(apart_slots - inside_slots,
                    (n * 4 + 255) / 256 * 256 + 2 * ((n * 2 + 255) / 256 * 256))
              << what;
          EXPECT_EQ(inside_losses, apart_losses) << what;
          ASSERT_EQ(inside.size(), apart.size());
          double worst = 0;
          for (size_t k = 0; k < inside.size(); ++k)
            for (size_t i = 0; i < inside[k].size(); ++i)
              worst = std::max(worst, std::fabs(double(inside[k][i]) - apart[k][i]));
          EXPECT_EQ(worst, 0.0) << what;
          std::printf("[ slots in outer ] %s: max |Δw| %.3g\n", what.c_str(), worst);
        }
}

}  // namespace
}  // namespace sf
