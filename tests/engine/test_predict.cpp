// The step-time prediction (engine/predict.h) against cases whose answer is known — one resource
// far slower than the others makes the step that resource's time, and no prediction is ever
// faster than its slowest resource or slower than all of them in a row — and the machine
// constants' cache (engine/machine.h), and `slideformer plan` / `train` printing them.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../train/train_test_util.h"
#include "backend/cpu/cpu_backend.h"
#include "engine/host_check.h"
#include "engine/machine.h"
#include "engine/plan.h"
#include "engine/predict.h"
#include "engine/unit_state.h"
#include "engine/weigh.h"
#include "io/nvme_store.h"
#include "model/layout.h"
#include "model/spec.h"
#include "train/run_setup.h"

namespace sf {
namespace {

namespace fs = std::filesystem;

// Llama-3.1-8B's config.json (no weights: the plan needs only the shapes).
ModelSpec llama_8b() {
  const fs::path d = fs::temp_directory_path() / "sf_predict_8b";
  fs::create_directories(d);
  std::ofstream(d / "config.json") << R"({"architectures": ["LlamaForCausalLM"],
    "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "head_dim": 128, "vocab_size": 128256, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
    "max_position_embeddings": 131072, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
    "hidden_act": "silu", "bos_token_id": 128000, "eos_token_id": 128001})";
  return load_model_spec(d);
}

PlanRequest request_8b(const ModelSpec& spec, int64_t tokens, bool clipping, DeviceOptimizer devopt,
                       int held_units = -1) {
  PlanRequest r;
  r.held_units = held_units;
  r.spec = spec;
  r.dtype = DType::kBF16;
  r.max_tokens = tokens;
  r.max_sequences = tokens / 1024;
  r.max_sample_tokens = 1024;
  r.gpu_budget = uint64_t(24) << 30;
  r.clipping = clipping;
  r.device_optimizer = devopt;
  return r;
}

EnginePlan plan_8b(const ModelSpec& spec, int64_t tokens, bool clipping, DeviceOptimizer devopt,
                   int held_units = -1) {
  return make_plan(request_8b(spec, tokens, clipping, devopt, held_units));
}

// Rates of the GPU machine's order (docs/perf.md).
MachineConstants h200_like() {
  MachineConstants m;
  m.h2d_gbps = 50;
  m.d2h_gbps = 50;
  m.host_gbps = 100;
  m.adam_params_per_s = 4e9;
  m.adam_copy_params_per_s = 3e9;
  // 18 of the whole update's 26 B/param each (bf16 gradients), where the host memory binds
  m.adam_master_params_per_s = m.adam_moments_params_per_s = 4e9 * 26 / 18;
  m.layer_forward_s = 0.436e9 / 600e12;  // 2·P_layer FLOPs a token at 600 TFLOP/s
  m.layer_backward_s = 3 * m.layer_forward_s;
  m.layer_tflops = 600;
  return m;
}

double sum_of_floors(const StepPrediction& p) { return p.compute_s + p.h2d_s + p.d2h_s + p.adam_s; }

TEST(PredictStep, OneSlowResourceMakesTheStep) {
  const ModelSpec spec = llama_8b();
  const int64_t T = 8192;
  const EnginePlan plan = plan_8b(spec, T, false, DeviceOptimizer::kOff);
  {  // compute: PCIe and the CPU a thousand times faster
    MachineConstants m = h200_like();
    m.h2d_gbps = m.d2h_gbps = 5e4;
    m.adam_params_per_s = m.adam_copy_params_per_s = 4e12;
    const StepPrediction p = predict_step(plan, spec, m, T, false);
    EXPECT_EQ(p.bound, "the GPU's compute");
    EXPECT_NEAR(p.step_s, p.compute_s, 0.01 * p.compute_s) << p.describe(T);
  }
  {  // the CPU AdamW: 100× slower than the machine's; the step is the updates, after the head
    // (every gradient through the ring: the updates end the step) ...
    MachineConstants m = h200_like();
    m.adam_params_per_s = m.adam_copy_params_per_s = 4e7;
    const EnginePlan ring = plan_8b(spec, T, false, DeviceOptimizer::kOff, 0);
    const StepPrediction p = predict_step(ring, spec, m, T, false);
    EXPECT_EQ(p.bound, "the CPU AdamW");
    EXPECT_GT(p.step_s, p.adam_s);
    EXPECT_LT(p.step_s, p.adam_s + p.forward_s + p.head_s + 0.01 * p.adam_s) << p.describe(T);
    EXPECT_GT(p.tail_s, 0.9 * p.adam_s - p.backward_s);
    // ... or with the plan's held share, whose updates run on into the next forward: the step
    // is the updates alone
    const StepPrediction h = predict_step(plan, spec, m, T, false);
    EXPECT_EQ(h.bound, "the CPU AdamW");
    EXPECT_GE(h.step_s, 0.999 * h.adam_s);
    EXPECT_LT(h.step_s, 1.01 * h.adam_s) << h.describe(T);
  }
  {  // H2D: every byte up at 0.5 GB/s
    MachineConstants m = h200_like();
    m.h2d_gbps = 0.5;
    const StepPrediction p = predict_step(plan, spec, m, T, false);
    EXPECT_EQ(p.bound, "H2D copies (PCIe)");
    EXPECT_GE(p.step_s, p.h2d_s);
    EXPECT_LT(p.step_s, 1.05 * p.h2d_s) << p.describe(T);
    // uploads: every layer in the forward, all but the window's W again in the backward, and
    // the embedding and head once, in fp32; restores of L - 1 checkpoints in bf16
    const double P = double(parameter_count(spec)), layer = double(layer_layout(spec, 0).numel);
    const double want = 4 * (P + (32 - plan.window) * layer) + 31.0 * T * 4096 * 2;
    EXPECT_NEAR(p.h2d_bytes, want, 1e-9 * want);
  }
}

TEST(PredictStep, NeverFasterThanTheSlowestResourceNorSlowerThanAllInARow) {
  const ModelSpec spec = llama_8b();
  for (int64_t T : {int64_t(8192), int64_t(65536)})
    for (bool clip : {false, true})
      for (DeviceOptimizer d : {DeviceOptimizer::kOff, DeviceOptimizer::kAuto}) {
        const EnginePlan plan = plan_8b(spec, T, clip, d);
        for (double h2d : {5.0, 50.0, 500.0})
          for (double adam : {1e8, 4e9, 1e11})
            for (double tf : {60.0, 600.0}) {
              MachineConstants m = h200_like();
              m.h2d_gbps = m.d2h_gbps = h2d;
              m.adam_params_per_s = adam;
              m.adam_copy_params_per_s = 0.75 * adam;
              m.layer_forward_s *= 600 / tf;
              m.layer_backward_s *= 600 / tf;
              m.layer_tflops = tf;
              const StepPrediction p = predict_step(plan, spec, m, T, clip);
              const double slowest = std::max({p.compute_s, p.h2d_s, p.d2h_s,
                                               p.host_params / adam});
              EXPECT_GE(p.step_s, 0.999 * slowest) << p.describe(T);
              EXPECT_LE(p.step_s, 1.001 * sum_of_floors(p)) << p.describe(T);
              EXPECT_NEAR(p.forward_s + p.head_s + p.backward_s + p.tail_s, p.step_s,
                          1e-9 + 0.25 * p.step_s * clip)
                  << p.describe(T);
            }
      }
}

TEST(PredictStep, TheGpuResidentShareLeavesTheHostAndPcie) {
  const ModelSpec spec = llama_8b();
  const int64_t T = 8192;
  const EnginePlan off = plan_8b(spec, T, false, DeviceOptimizer::kOff);
  const EnginePlan on = plan_8b(spec, T, false, DeviceOptimizer::kAuto);
  ASSERT_TRUE(on.on_device.front()) << on.describe();  // the embedding fits at 24 GiB
  const MachineConstants m = h200_like();
  const StepPrediction a = predict_step(off, spec, m, T, false);
  const StepPrediction b = predict_step(on, spec, m, T, false);
  EXPECT_EQ(a.host_params - b.host_params, double(on.device_params));
  EXPECT_LT(b.h2d_bytes, a.h2d_bytes);
  EXPECT_LT(b.step_s, a.step_s);  // the CPU AdamW binds at 8k tokens
}

// Decoder layers in the GPU-resident share (a 70 GiB budget: layers 0-18 besides the embedding
// and the head) leave the CPU AdamW and PCIe: the step is predicted from the host layers alone —
// above each floor, below their sum, and well under the same budget's plan without them (the
// first version charged their updates to the CPU: 2.02 s predicted, 1.38 s measured on the H100).
TEST(PredictStep, ResidentLayersLeaveTheCpuAdamW) {
  const ModelSpec spec = llama_8b();
  const MachineConstants m = h200_like();
  const int64_t T = 8192;
  PlanRequest r = request_8b(spec, T, false, DeviceOptimizer::kAuto);
  r.gpu_budget = uint64_t(70) << 30;
  const EnginePlan on = make_plan(r);
  r.device_optimizer = DeviceOptimizer::kAll;  // the embedding and the head only
  const EnginePlan outer = make_plan(r);
  ASSERT_GT(on.device_params, outer.device_params + 4 * int64_t(218) * 1000 * 1000)
      << on.describe();
  const StepPrediction a = predict_step(on, spec, m, T, false);
  const StepPrediction b = predict_step(outer, spec, m, T, false);
  EXPECT_EQ(b.host_params - a.host_params, double(on.device_params - outer.device_params));
  EXPECT_GE(a.step_s, 0.999 * std::max({a.compute_s, a.h2d_s, a.host_params / m.adam_params_per_s}))
      << a.describe(T);
  EXPECT_LE(a.step_s, 1.001 * sum_of_floors(a)) << a.describe(T);
  EXPECT_LT(a.step_s, 0.75 * b.step_s) << a.describe(T) << "\n" << b.describe(T);
}

// The gradient ring has a few slots: a piece's D2H waits for the update of the piece `slots`
// before it, and the next layer's gradient waits for its slot's stage, so where the CPU is slower
// than the GPU (8k tokens) the AdamW paces the backward, which then lasts about as long as the
// ring's updates at the rate under copies — the GPU's end is not long before the updates' (the
// first predictor let the backward run at the GPU's pace and left a backlog that it updated at
// the uncontended rate after the GPU's end: 2.03 s predicted, 2.38 s measured on the H200). With
// room for every piece the backward is the GPU's own.
TEST(PredictStep, TheRingPacesTheBackwardWhereTheCpuIsSlower) {
  const ModelSpec spec = llama_8b();
  const MachineConstants m = h200_like();
  const int64_t T = 8192;
  const EnginePlan ring = plan_8b(spec, T, false, DeviceOptimizer::kAuto, 0);
  ASSERT_EQ(ring.held_params, 0);
  ASSERT_GT(ring.grad_ring_slots, 0);
  const StepPrediction paced = predict_step(ring, spec, m, T, false);
  double ring_params = 0;
  for (size_t u = 0; u < ring.on_device.size(); ++u)
    if (!ring.on_device[u] && !ring.held[u]) ring_params += double(unit_layouts(spec)[u].numel);
  const double last = double(ring.grad_ring_slots + 1) * double(ring.grad_piece);
  EXPECT_GE(paced.backward_s, (ring_params - last) / m.adam_copy_params_per_s) << paced.describe(T);
  EXPECT_LE(paced.tail_s, 1.001 * last / m.adam_copy_params_per_s) << paced.describe(T);
  EnginePlan roomy = ring;
  roomy.grad_ring_slots = 1 << 20;
  const StepPrediction free_running = predict_step(roomy, spec, m, T, false);
  EXPECT_LT(free_running.backward_s, 0.5 * paced.backward_s) << free_running.describe(T);
  EXPECT_GT(free_running.tail_s, 0.5 * free_running.step_s) << free_running.describe(T);
}

// At 8k tokens the CPU AdamW is the step. With every gradient through the ring it idles through
// the forward and the head (nothing is left to update there); holding the head's and the top
// layers' gradients gives it that work (at least 40 % of the forward and head back; 47 % with
// layer 0's state on the device as the 24 GiB plan takes it), so the step comes close to the
// AdamW alone. At 64k tokens, where the GPU binds, holding changes little.
TEST(PredictStep, HeldGradientsKeepTheCpuAdamWBusyThroughTheForward) {
  const ModelSpec spec = llama_8b();
  const MachineConstants m = h200_like();
  const int64_t small = 8192, large = 65536;
  const StepPrediction ring = predict_step(plan_8b(spec, small, false, DeviceOptimizer::kAuto, 0),
                                           spec, m, small, false);
  const EnginePlan held_plan = plan_8b(spec, small, false, DeviceOptimizer::kAuto);
  ASSERT_GT(held_plan.held_params, 0) << held_plan.describe();
  const StepPrediction held = predict_step(held_plan, spec, m, small, false);
  EXPECT_EQ(ring.bound, "the CPU AdamW");
  EXPECT_LT(held.step_s, ring.step_s - 0.4 * (ring.forward_s + ring.head_s))
      << ring.describe(small) << "\n" << held.describe(small);
  // never faster than every update at the CPU's uncontended rate
  EXPECT_GE(held.step_s, 0.999 * held.host_params / m.adam_params_per_s) << held.describe(small);
  const StepPrediction ring_l = predict_step(plan_8b(spec, large, false, DeviceOptimizer::kAuto, 0),
                                             spec, m, large, false);
  const StepPrediction held_l =
      predict_step(plan_8b(spec, large, false, DeviceOptimizer::kAuto), spec, m, large, false);
  EXPECT_LE(held_l.step_s, 1.001 * ring_l.step_s);
  EXPECT_GE(held_l.step_s, 0.999 * held_l.compute_s);
}

// The plan keeps its own held share where the prediction says it pays (8k tokens: the CPU AdamW
// binds and the share keeps it busy through the forward) or where the AdamW fills most of the
// backward (32k: the prediction's gain is 0 there, the GPU machine measured 1.25×), and drops it
// where neither holds (64k: the GPU binds, the AdamW takes half the backward), freeing its host
// memory; a share asked for, or clipping, is never weighed.
TEST(PredictStep, TheHeldShareIsKeptOnlyWhereThePredictionSaysItPays) {
  const ModelSpec spec = llama_8b();
  const MachineConstants m = h200_like();
  std::string note;
  const PlanRequest small = request_8b(spec, 8192, false, DeviceOptimizer::kAuto);
  const EnginePlan kept = weigh_held_share(small, make_plan(small), m, &note);
  EXPECT_GT(kept.held_params, 0);
  EXPECT_NE(note.find("; taken"), std::string::npos) << note;
  const PlanRequest mid = request_8b(spec, 32768, false, DeviceOptimizer::kAuto);
  EXPECT_GT(weigh_held_share(mid, make_plan(mid), m, &note).held_params, 0);
  EXPECT_NE(note.find("; taken"), std::string::npos) << note;
  const PlanRequest large = request_8b(spec, 65536, false, DeviceOptimizer::kAuto);
  const EnginePlan held = make_plan(large);
  ASSERT_GT(held.held_params, 0);
  const EnginePlan dropped = weigh_held_share(large, held, m, &note);
  EXPECT_EQ(dropped.held_params, 0);
  EXPECT_EQ(held.host.total() - dropped.host.total(), held.host.grads - dropped.host.grads);
  EXPECT_GE(held.host.grads - dropped.host.grads, uint64_t(held.held_params) * 2);
  EXPECT_NE(note.find("not taken: the gain below 3.0 %"), std::string::npos) << note;
  EXPECT_EQ(dropped.micro_tokens, held.micro_tokens);  // the device side is the same plan
  EXPECT_EQ(dropped.device_total(), held.device_total());
  const double with = predict_step(held, spec, m, 65536, false).step_s;
  const double without = predict_step(dropped, spec, m, 65536, false).step_s;
  EXPECT_LT(without / with - 1, kHeldMinGain);
  for (const PlanRequest& r : {request_8b(spec, 65536, false, DeviceOptimizer::kAuto, 4),
                               request_8b(spec, 65536, true, DeviceOptimizer::kAuto)}) {
    const EnginePlan p = make_plan(r);
    EXPECT_EQ(weigh_held_share(r, p, m, &note).held_params, p.held_params);
    EXPECT_TRUE(note.empty()) << note;
  }
}

// A micro-batch below the saturating size costs kSmallMicroBatchCost a halving, counted from the
// M the layer was measured at where that is smaller; nothing where that M is not known.
TEST(PredictStep, SmallerMicroBatchesRunTheLayerSlower) {
  MachineConstants m = h200_like();
  EXPECT_EQ(micro_batch_cost(m, 1024), 1.0);  // measured at an unknown M
  m.micro_tokens = 8192;
  EXPECT_EQ(micro_batch_cost(m, 8192), 1.0);
  EXPECT_EQ(micro_batch_cost(m, 16384), 1.0);
  EXPECT_NEAR(micro_batch_cost(m, 4096), 1 + kSmallMicroBatchCost, 1e-12);
  EXPECT_NEAR(micro_batch_cost(m, 2048), std::pow(1 + kSmallMicroBatchCost, 2), 1e-12);
  m.micro_tokens = 32768;  // above the saturating size: counted from there
  EXPECT_EQ(micro_batch_cost(m, 8192), 1.0);
  EXPECT_NEAR(micro_batch_cost(m, 4096), 1 + kSmallMicroBatchCost, 1e-12);
  m.micro_tokens = 2048;
  EXPECT_NEAR(micro_batch_cost(m, 1024), 1 + kSmallMicroBatchCost, 1e-12);
  // the prediction's compute at M 4096 with constants measured at 8192
  const ModelSpec spec = llama_8b();
  PlanRequest r = request_8b(spec, 8192, false, DeviceOptimizer::kOff);
  r.micro_tokens = 8192;
  const StepPrediction at8k = predict_step(make_plan(r), spec, m, 8192, false);
  r.micro_tokens = 4096;
  m.micro_tokens = 8192;
  const StepPrediction at4k = predict_step(make_plan(r), spec, m, 8192, false);
  const double head = 6.0 * 8192 * double(spec.hidden) * double(spec.vocab) / 600e12;
  EXPECT_NEAR(at4k.compute_s - head, (at8k.compute_s - head) * (1 + kSmallMicroBatchCost), 1e-9);
}

// The host `plan` would hold with its decoder layers' state on the host: the weighing's cap.
uint64_t host_with_layers_apart(const PlanRequest& r, const EnginePlan& plan) {
  PlanRequest apart = r;
  apart.micro_tokens = plan.micro_tokens;
  apart.on_device = plan.on_device;
  for (size_t k = 1; k + 1 < apart.on_device.size(); ++k) apart.on_device[k] = false;
  return make_plan(apart).host.total();
}

// 8B under 24 GiB as the GPU machine plans it (the context and libraries outside the engine, the
// CUDA backend's scratch by M): at 8k and 16k tokens the CPU AdamW binds, and smaller
// micro-batches take layer 0 onto the device beside the embedding and the head; the host bytes its
// state frees hold more gradients. Taken, in no more host than the plan would hold with its layers'
// state on the host; at 64k, where the GPU binds, not. Not weighed where M or the share were given.
TEST(PredictStep, SmallerMicroBatchesAreTakenWhereTheyMakeRoomAndTheCpuBinds) {
  const ModelSpec spec = llama_8b();
  MachineConstants m = h200_like();
  m.micro_tokens = 8192;
  auto request = [&](int64_t tokens) {
    PlanRequest r = request_8b(spec, tokens, false, DeviceOptimizer::kAuto);
    r.device_outside = (uint64_t(1280) << 20) + (uint64_t(768) << 20);
    r.backend_scratch = [](int64_t M) { return (uint64_t(512) << 20) + uint64_t(M) * 49600; };
    return r;
  };
  std::string note;
  for (int64_t tokens : {8192, 16384}) {
    const PlanRequest r = request(tokens);
    const EnginePlan plan = weigh_held_share(r, make_plan(r), m, &note);
    ASSERT_GT(plan.next_layer_bytes, 0u) << plan.describe();
    const EnginePlan w = weigh_micro_batch(r, plan, m, &note);
    EXPECT_NE(note.find("; taken"), std::string::npos) << note;
    EXPECT_LT(w.micro_tokens, plan.micro_tokens) << w.describe();
    EXPECT_GE(w.micro_tokens, r.max_sample_tokens);
    EXPECT_TRUE(w.on_device[1]) << w.describe();  // layer 0
    EXPECT_GT(w.device_params, plan.device_params);
    EXPECT_LE(w.device_total(), r.gpu_budget);
    // no more host than the plan would hold with its decoder layers' state on the host
    EXPECT_LE(w.host.total(), std::max(plan.host.total(), host_with_layers_apart(r, plan)));
    EXPECT_GT(w.held_params, plan.held_params) << w.describe();
    const double before = predict_step(plan, spec, m, tokens, false).step_s;
    const double after = predict_step(w, spec, m, tokens, false).step_s;
    EXPECT_GE(before / after - 1, kHeldMinGain) << note;
    // the plan the engine makes from the run's options (train's path) is the weighed plan
    RunSetup setup;
    setup.plan = w;
    setup.request = r;
    TrainConfig c;
    c.max_grad_norm = 0;
    const EngineOptions opt = engine_options(c, setup);
    // (the backend exists by then: its scratch is in what the device holds)
    const EnginePlan e = make_plan(
        engine_plan_request(opt, spec, DType::kBF16, r.device_outside + w.backend_scratch));
    EXPECT_EQ(e.micro_tokens, w.micro_tokens);
    EXPECT_EQ(e.on_device, w.on_device);
    EXPECT_EQ(e.held, w.held);
    EXPECT_EQ(e.device_total(), w.device_total());
    EXPECT_EQ(e.host.total(), w.host.total());
  }
  {  // the device as the engine sees it (1.65 GiB outside, its scratch included): the plan puts
     // layer 0 there itself, and the held gradients fill what its state freed on the host
    PlanRequest r = request(16384);
    r.device_outside = uint64_t(1.65 * double(uint64_t(1) << 30));
    r.backend_scratch = nullptr;
    const EnginePlan plan = weigh_held_share(r, make_plan(r), m, &note);
    ASSERT_TRUE(plan.on_device[1]) << plan.describe();
    const uint64_t cap = host_with_layers_apart(r, plan);
    ASSERT_GT(cap, plan.host.total());
    const EnginePlan w = weigh_micro_batch(r, plan, m, &note);
    EXPECT_NE(note.find("; taken"), std::string::npos) << note;
    EXPECT_GT(w.host.total(), plan.host.total()) << note;
    EXPECT_LE(w.host.total(), cap) << note;
    EXPECT_GT(w.held_params, plan.held_params) << note;
    // a host limit between the plan's and the cap: the held share stops within it and its margin
    PlanRequest tight = r;
    tight.host_limit = plan.host.total() + host_margin(plan.host.total()) + (uint64_t(1) << 30);
    const EnginePlan wt = weigh_micro_batch(tight, plan, m, &note);
    EXPECT_LE(wt.host.total() + host_margin(wt.host.total()), tight.host_limit) << note;
    EXPECT_LT(wt.held_params, w.held_params) << note;
  }
  const PlanRequest large = request(65536);
  const EnginePlan plan = make_plan(large);
  const EnginePlan kept = weigh_micro_batch(large, plan, m, &note);
  EXPECT_EQ(kept.micro_tokens, plan.micro_tokens) << note;
  EXPECT_EQ(kept.describe(), plan.describe());
  // A held share asked for stays as asked.
  PlanRequest asked = request(8192);
  asked.held_units = 3;
  const EnginePlan w3 = weigh_micro_batch(asked, make_plan(asked), m, &note);
  EXPECT_EQ(std::count(w3.held.begin(), w3.held.end(), true), 3) << w3.describe();
  // Nothing to weigh where M or the share were given.
  PlanRequest given_m = request(8192), off = request(8192), given_share = request(8192);
  given_m.micro_tokens = 8192;
  off.device_optimizer = DeviceOptimizer::kOff;
  given_share.on_device = make_plan(given_share).on_device;
  for (const PlanRequest& r : {given_m, off, given_share}) {
    const EnginePlan p = make_plan(r);
    EXPECT_EQ(weigh_micro_batch(r, p, m, &note).describe(), p.describe());
    EXPECT_TRUE(note.empty()) << note;
  }
}

// The AdamW probe's parameters and no warm-up of the layer, for CI's time.
const ProbeSize kSmall{int64_t(1) << 20, 0.0};

// The host's memory is a floor under the step where the probe measured what it carries at once:
// the split units' m, v and gradient are read twice (10 B/param more with bf16 gradients). Its
// ceiling is the most a pass alone carried in the probe: what the copies moved beside the AdamW
// does not raise it (a step's traffic never reached that sum). With a low ceiling the floor is the
// whole split's step and fewer units are split; with a high one nothing changes; without the
// measurement there is no floor.
TEST(PredictStep, TheHostsMemoryIsAFloorWhereItsBytesBind) {
  const ModelSpec spec = llama_8b();
  const int64_t T = 16384;
  const PlanRequest r = request_8b(spec, T, true, DeviceOptimizer::kAuto);
  const EnginePlan plan = make_plan(r);
  EnginePlan split = plan;
  split.set_moments_later(unit_layouts(spec), 1000, true);
  ASSERT_GT(split.moments_later_params, 0);
  MachineConstants m = h200_like();
  const StepPrediction none0 = predict_step(plan, spec, m, T, true);
  const StepPrediction split0 = predict_step(split, spec, m, T, true);
  EXPECT_EQ(split0.host_s, 0.0);  // not measured: no floor
  EXPECT_NEAR(split0.host_bytes - none0.host_bytes, 10.0 * double(split.moments_later_params),
              1e-9 * split0.host_bytes);
  std::string note;
  const int64_t taken_unbound = weigh_moments_later(r, plan, m, &note).moments_later_params;
  EXPECT_GT(taken_unbound, 0) << note;
  {  // passes alone that carry ten times the step's traffic: the host's bytes do not bind (the
    // post-norm master passes only share the ceiling with their uploads, 4 of 22 B/param)
    MachineConstants fast = m;
    fast.adam_params_per_s *= 10;
    fast.adam_master_params_per_s *= 10;
    fast.adam_moments_params_per_s *= 10;
    const double unmeasured = predict_step(split, spec, fast, T, true).step_s;
    fast.copy_beside_adam_gbps = 50;
    const StepPrediction p = predict_step(split, spec, fast, T, true);
    EXPECT_NE(p.bound, "the host's memory") << p.describe(T);
    EXPECT_LT(p.host_s, 0.5 * p.step_s) << p.describe(T);
    EXPECT_NEAR(p.step_s, unmeasured, 0.01 * unmeasured) << p.describe(T);
  }
  // This host's passes carry 104 GB/s alone (26 B/param at 4 G params/s, 18 at 5.8): the host's
  // bytes are the split's step, however much the copies beside the AdamW moved
  m.copy_beside_adam_gbps = 1;
  const StepPrediction low = predict_step(split, spec, m, T, true);
  const double ceiling = m.adam_params_per_s * 26;
  EXPECT_NEAR(low.step_s, low.host_bytes / ceiling, 1e-9 * low.step_s) << low.describe(T);
  EXPECT_EQ(low.bound, "the host's memory") << low.describe(T);
  m.copy_beside_adam_gbps = 1000;
  EXPECT_EQ(predict_step(split, spec, m, T, true).step_s, low.step_s);
  // Without the split the post-norm updates pace the next forward, each beside its master's fp32
  // upload: they share the ceiling at 26 + 4 B/param, and the step grows by the 4 B's share of
  // those updates against no ceiling (their rate alone).
  MachineConstants unmeasured = m;
  unmeasured.copy_beside_adam_gbps = 0;
  const double host_params = double(plan.params - plan.device_params);
  const StepPrediction none_low = predict_step(plan, spec, m, T, true);
  EXPECT_NEAR(none_low.step_s - predict_step(plan, spec, unmeasured, T, true).step_s,
              host_params / m.adam_params_per_s * 4 / 26, 0.02 * none_low.step_s)
      << none_low.describe(T);
  // fewer units split: only as many as the host's bytes leave room for
  EXPECT_LT(weigh_moments_later(r, plan, m, &note).moments_later_params, taken_unbound) << note;
}

// With clipping the next forward waits for every master after the norm; writing some units' m and
// v later shortens that pass, and the backward (where the CPU is idle, clipping) takes the
// moments: at 32k tokens the prediction takes units from the bottom up and the step is shorter
// by about the master pass's saving. Where the moments pass is slow the gradients' D2H would wait
// for it: the prediction then takes fewer units, and none when it is very slow; without clipping,
// or where the request names a count, nothing is weighed.
TEST(PredictStep, MomentsLaterShortenTheClippedStepWhereTheBackwardHasRoom) {
  const ModelSpec spec = llama_8b();
  const int64_t T = 32768;
  const PlanRequest r = request_8b(spec, T, true, DeviceOptimizer::kAuto);
  const EnginePlan plan = make_plan(r);
  ASSERT_EQ(plan.moments_later_params, 0);
  const MachineConstants m = h200_like();
  std::string note;
  const EnginePlan later = weigh_moments_later(r, plan, m, &note);
  const StepPrediction before = predict_step(plan, spec, m, T, true);
  const StepPrediction after = predict_step(later, spec, m, T, true);
  EXPECT_GT(later.moments_later_params, 0) << note;
  EXPECT_NE(note.find("taken"), std::string::npos) << note;
  EXPECT_EQ(note.find("not taken"), std::string::npos) << note;
  EXPECT_LT(after.step_s, before.step_s / (1 + kHeldMinGain)) << note;
  // never below the master pass alone: what the next forward waits for
  EXPECT_GT(after.step_s, double(plan.params - plan.device_params) / m.adam_master_params_per_s)
      << note;
  for (size_t k = 1; k < later.moments_later.size(); ++k)  // from the bottom up
    EXPECT_TRUE(later.moments_later[k - 1] || !later.moments_later[k] || plan.on_device[k - 1]);
  EXPECT_NE(later.describe().find("written after every master"), std::string::npos);
  // a slow moments pass: fewer units, none at all where it is very slow
  MachineConstants slow = m;
  slow.adam_moments_params_per_s = m.adam_params_per_s / 4;
  const EnginePlan fewer = weigh_moments_later(r, plan, slow, &note);
  EXPECT_LT(fewer.moments_later_params, later.moments_later_params) << note;
  slow.adam_moments_params_per_s = 1e7;
  EXPECT_EQ(weigh_moments_later(r, plan, slow, &note).moments_later_params, 0) << note;
  // every unit later with that rate: the backward waits for the moments
  EnginePlan all = plan;
  all.set_moments_later(unit_layouts(spec), 1000, true);
  EXPECT_GT(predict_step(all, spec, slow, T, true).step_s, 2 * before.step_s);
  // not weighed without clipping, nor where the request names a count
  const PlanRequest unclipped = request_8b(spec, T, false, DeviceOptimizer::kAuto);
  EXPECT_EQ(weigh_moments_later(unclipped, make_plan(unclipped), m, &note).moments_later_params, 0);
  EXPECT_TRUE(note.empty());
  PlanRequest asked = r;
  asked.moments_later_units = 2;
  const EnginePlan two = make_plan(asked);
  EXPECT_EQ(weigh_moments_later(asked, two, m, &note).moments_later_params,
            two.moments_later_params);
  EXPECT_EQ(std::count(two.moments_later.begin(), two.moments_later.end(), true), 2);
}

TEST(MachineConstants, MeasuredOnceThenReadFromTheCache) {
  const fs::path d = fs::temp_directory_path() / "sf_machine_cache";
  fs::remove_all(d);
  const fs::path model = testing::tiny_model(d / "m");
  const ModelSpec spec = load_model_spec(model);
  auto be = make_cpu_backend();
  const fs::path file = d / "cache" / "machine.json";
  EXPECT_FALSE(cached_machine_constants(*be, spec, 64, 32, file));
  std::string note;
  const MachineConstants a = machine_constants(*be, spec, 64, 32, file, false, &note, kSmall);
  EXPECT_NE(note.find("measured now, cached in " + file.string()), std::string::npos) << note;
  for (double v : {a.h2d_gbps, a.d2h_gbps, a.host_gbps, a.adam_params_per_s,
                   a.adam_copy_params_per_s, a.layer_forward_s, a.layer_backward_s,
                   a.layer_tflops})
    EXPECT_GT(v, 0) << describe(a);
  const MachineConstants b = machine_constants(*be, spec, 64, 32, file, false, &note, kSmall);
  EXPECT_NE(note.find("from " + file.string()), std::string::npos) << note;
  EXPECT_EQ(b.layer_forward_s, a.layer_forward_s);
  EXPECT_EQ(b.adam_params_per_s, a.adam_params_per_s);
  EXPECT_EQ(b.measured_at, a.measured_at);
  // the copies beside the AdamW: 0 where none finished within this small probe's passes
  EXPECT_GE(a.copy_beside_adam_gbps, 0);
  EXPECT_EQ(b.copy_beside_adam_gbps, a.copy_beside_adam_gbps);
  EXPECT_NE(describe(a).find("while copies run, they then at"), std::string::npos) << describe(a);
  // another micro-batch is another key
  EXPECT_FALSE(cached_machine_constants(*be, spec, 128, 32, file));
  machine_constants(*be, spec, 64, 32, file, /*remeasure=*/true, &note, kSmall);
  EXPECT_NE(note.find("measured now"), std::string::npos) << note;
  // a damaged cache is measured again and rewritten, not an error
  std::ofstream(file) << "{\"entries\": {\"" << machine_key(*be, spec, 64, 32)
                      << "\": {\"h2d_gbps\": -1}}}";
  EXPECT_FALSE(cached_machine_constants(*be, spec, 64, 32, file));
  machine_constants(*be, spec, 64, 32, file, false, &note, kSmall);
  EXPECT_NE(note.find("measured now"), std::string::npos) << note;
  EXPECT_TRUE(cached_machine_constants(*be, spec, 64, 32, file));
  std::ofstream(file) << "not json";
  machine_constants(*be, spec, 64, 32, file, false, &note, kSmall);
  EXPECT_TRUE(cached_machine_constants(*be, spec, 64, 32, file));
  // a cache of an older version (its AdamW rates measured with the pool's static shares) is
  // measured again, its entries dropped
  {
    std::ifstream in(file);
    nlohmann::json all = nlohmann::json::parse(in);
    all["version"] = 4;  // layer timed cold
    all["entries"]["another key"] = all["entries"][machine_key(*be, spec, 64, 32)];
    std::ofstream(file) << all.dump();
  }
  EXPECT_FALSE(cached_machine_constants(*be, spec, 64, 32, file));
  machine_constants(*be, spec, 64, 32, file, false, &note, kSmall);
  EXPECT_NE(note.find("measured now"), std::string::npos) << note;
  {
    std::ifstream in(file);
    const nlohmann::json all = nlohmann::json::parse(in);
    EXPECT_EQ(all["version"], 5);
    EXPECT_FALSE(all["entries"].contains("another key"));
  }
  EXPECT_TRUE(cached_machine_constants(*be, spec, 64, 32, file));
  fs::remove_all(d);
}

TEST(MachineConstants, TheLayerIsTimedAfterItRanBackToBack) {
  const fs::path d = testing::fresh_dir("machine_hot_layer");
  const ModelSpec spec = load_model_spec(testing::tiny_model(d / "m"));
  auto be = make_cpu_backend();
  const auto t0 = std::chrono::steady_clock::now();
  const LayerTimes t = time_layer(*be, spec, 64, 32, 0.3);
  EXPECT_GE(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 0.3);
  EXPECT_GT(t.forward, 0);
  EXPECT_GT(t.backward, t.forward);  // recompute + backward
  EXPECT_GT(t.flops, 0);
  fs::remove_all(d);
}

// The "plan: " line of a command's output and the indented lines after it (EnginePlan::describe).
std::string printed_plan(const std::string& out) {
  size_t b = out.find("plan: ");
  if (b == std::string::npos) return "";
  size_t e = out.find('\n', b);
  while (e != std::string::npos && out.compare(e + 1, 2, "  ") == 0) e = out.find('\n', e + 1);
  return out.substr(b, e == std::string::npos ? std::string::npos : e - b);
}

TEST(PlanCommand, PrintsThePlanThePeaksAndThePredictionAndTrainComparesWithIt) {
  using testing::run_slideformer;
  const fs::path d = testing::fresh_dir("plan_command");
  const fs::path model = testing::tiny_model(d / "m");
  testing::write_text(d / "t.txt", std::string(4000, 'a') + "bcdefg hijklmnop");
  const std::string base = "--model " + model.string() + " --data " + (d / "t.txt").string() +
                           " --cutoff-len 64 --batch-size 2 --backend cpu --machine-file " +
                           (d / "machine.json").string();
  {  // the machine measured in-process with a small AdamW probe: `plan` reads it (and measures
     // what it lacks: MachineConstants above tests that path)
    auto be = make_cpu_backend();
    machine_constants(*be, load_model_spec(model), 128, 64, d / "machine.json", false, nullptr,
                      kSmall);
  }
  testing::CommandResult r = run_slideformer("plan " + base);
  ASSERT_EQ(r.code, 0) << r.out;
  for (const char* want : {"plan: window 2, micro-batches of ≤ 128 tokens", "device peak:",
                           "host peak:", "machine (cpu, measured", "machine constants from",
                           "predicted step ", "bound by", "fits"})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  // a budget of another machine that cannot hold it
  r = run_slideformer("plan " + base + " --host-memory 1MiB");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("does not fit: not enough host memory"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(--host-memory)"), std::string::npos) << r.out;
  // train reads the cache plan wrote, and compares its steps with the prediction
  const std::string plan_block = printed_plan(r.out);
  r = run_slideformer("train " + base + " --max-steps 4 --no-save");
  ASSERT_EQ(r.code, 0) << r.out;
  // the plan train allocates is the one plan printed, line for line
  ASSERT_NE(plan_block.find("\n  device: "), std::string::npos) << plan_block;
  EXPECT_NE(r.out.find(plan_block), std::string::npos) << plan_block << "\n" << r.out;
  EXPECT_NE(r.out.find("predicted step "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("timing: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("measured / predicted"), std::string::npos) << r.out;
  // a run refused by the host budget says so before it allocates
  r = run_slideformer("train " + base + " --max-steps 1 --no-save --host-memory 1MiB");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("not enough host memory"), std::string::npos) << r.out;
  fs::remove_all(d);
}

// Micro-batches weighed end to end on the CPU backend (its "device" budget planned as a GPU's):
// under a budget where the plan's own M leaves a layer off the device and half of it takes one,
// with constants where the CPU AdamW is the step, `plan` says the smaller M was taken and prints
// the plan `train` then allocates, line for line, and the run trains.
TEST(PlanCommand, SmallerMicroBatchesWeighedByThePredictionAreWhatTrainAllocates) {
  using testing::run_slideformer;
  const fs::path d = testing::fresh_dir("plan_micro_batch");
  const fs::path model = testing::tiny_model(d / "m");
  const ModelSpec spec = load_model_spec(model);
  testing::write_text(d / "t.txt", std::string(4000, 'a') + "bcdefg hijklmnop");
  // The request `train` makes for these options (F32 on the CPU backend, nothing outside the
  // engine, no clipping): the budget where M 128 takes the embedding and the head but no layer
  // and M 64 takes layer 0 too.
  PlanRequest r;
  r.spec = spec;
  r.dtype = DType::kF32;
  r.max_tokens = 128;
  r.max_sequences = 2;
  r.max_sample_tokens = 64;
  uint64_t budget = 0;
  const uint64_t least = make_plan(r).device_total();  // no budget: every unit on the host
  for (uint64_t b = least; b < 8 * least && budget == 0; b += 256) {
    r.gpu_budget = b;
    r.micro_tokens = 0;
    const EnginePlan own = make_plan(r);
    if (own.micro_tokens != 128 || own.next_layer_bytes == 0 || !own.on_device.back()) continue;
    r.micro_tokens = 64;
    if (make_plan(r).device_params > own.device_params) budget = b;
  }
  ASSERT_GT(budget, 0u);
  // This machine's constants, measured and cached as `plan` would, then the CPU AdamW made far
  // slower than the rest in the cache: the step is its time, a layer off it is a gain.
  {
    auto be = make_cpu_backend();
    machine_constants(*be, spec, 128, 64, d / "machine.json", false, nullptr, kSmall);
    nlohmann::json all = nlohmann::json::parse(std::ifstream(d / "machine.json"));
    nlohmann::json& e = all["entries"][machine_key(*be, spec, 128, 64)];
    e["adam_params_per_s"] = e["adam_copy_params_per_s"] = 1e6;
    e["adam_master_params_per_s"] = e["adam_moments_params_per_s"] = 1.4e6;
    e["layer_forward_s"] = 1e-9;
    e["layer_backward_s"] = 3e-9;
    std::ofstream(d / "machine.json") << all.dump();
  }
  const std::string base = "--model " + model.string() + " --data " + (d / "t.txt").string() +
                           " --cutoff-len 64 --batch-size 2 --backend cpu --max-grad-norm 0" +
                           " --machine-file " + (d / "machine.json").string() + " --gpu-memory " +
                           std::to_string(budget);
  testing::CommandResult out = run_slideformer("plan " + base);
  ASSERT_EQ(out.code, 0) << out.out;
  EXPECT_NE(out.out.find("micro-batches weighed: M 64 (128 planned)"), std::string::npos)
      << out.out;
  EXPECT_NE(out.out.find("; taken"), std::string::npos) << out.out;
  EXPECT_NE(out.out.find("machine constants from"), std::string::npos) << out.out;
  const std::string plan_block = printed_plan(out.out);
  EXPECT_NE(plan_block.find("micro-batches of ≤ 64 tokens"), std::string::npos) << plan_block;
  EXPECT_NE(plan_block.find("layer 0)"), std::string::npos) << out.out;
  out = run_slideformer("train " + base + " --max-steps 3 --no-save");
  ASSERT_EQ(out.code, 0) << out.out;
  EXPECT_NE(out.out.find("micro-batches weighed: M 64 (128 planned)"), std::string::npos)
      << out.out;
  EXPECT_NE(out.out.find(plan_block), std::string::npos) << plan_block << "\n" << out.out;
  fs::remove_all(d);
}

// With the machine's constants cached, a run whose plan has an NVMe tier weighs its plan with the
// disk's rates (measured in its directory, or given to `plan` for another machine): the weighing
// predicts the step, and without them it refused ("the disk's bandwidth is unknown").
TEST(PlanCommand, AnNvmeTierIsWeighedWithTheDisksRates) {
  using testing::run_slideformer;
  std::string why;
  if (!NvmeStore::io_uring_available(&why)) GTEST_SKIP() << "io_uring cannot be set up: " << why;
  const fs::path d = testing::fresh_dir("plan_nvme");
  const fs::path model = testing::tiny_model(d / "m");
  testing::write_text(d / "t.txt", std::string(4000, 'a') + "bcdefg hijklmnop");
  fs::create_directories(d / "scratch");
  const std::string base = "--model " + model.string() + " --data " + (d / "t.txt").string() +
                           " --cutoff-len 64 --batch-size 2 --backend cpu --max-grad-norm 1 " +
                           "--machine-file " + (d / "machine.json").string();
  {
    auto be = make_cpu_backend();
    machine_constants(*be, load_model_spec(model), 128, 64, d / "machine.json", false, nullptr,
                      kSmall);
  }
  const std::string nvme = " --nvme-dir " + (d / "scratch").string() + " --nvme-layers 1";
  testing::CommandResult r = run_slideformer("plan " + base + nvme);
  ASSERT_EQ(r.code, 0) << r.out;
  for (const char* want : {"the Adam m and v of layer 0 (", "NVMe disk: write", "predicted step "})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  const std::string plan_block = printed_plan(r.out);
  r = run_slideformer("plan " + base + " --nvme-bandwidth 2 --nvme-layers 1");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("NVMe disk: 2 GB/s read and write (given)"), std::string::npos) << r.out;
  r = run_slideformer("train " + base + nvme + " --max-steps 2 --no-save");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find(plan_block), std::string::npos) << plan_block << "\n" << r.out;
  EXPECT_NE(r.out.find("the disk floor of a step is"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("measured / predicted"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::is_empty(d / "scratch"));
  fs::remove_all(d);
}

}  // namespace
}  // namespace sf
