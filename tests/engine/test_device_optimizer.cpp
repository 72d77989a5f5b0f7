// The GPU-resident optimizer share on the CPU backend (its "device" is host memory, its adamw the
// CPU's): a run with the embedding's and head's state on the device is bit-identical with the
// all-host run — losses, gradient norms, every weight, with and without clipping (one that
// bites), tied and untied — and its state round-trips through visit_state like the host's. An
// update that leaves weights non-finite stops the run as the host's does. The plan puts the
// embedding first, then the head, where the budget holds them, and halves the micro-batch for
// them only down to the saturating size.
#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "core/error.h"
#include "engine/plan.h"
#include "engine_test_util.h"
#include "io/safetensors.h"
#include "model/weights.h"

namespace sf {
namespace {

using namespace test_engine;

// State copies through the host in pieces of 1000 elements: every GPU-resident tensor of the tiny
// models (the embedding, the head) takes several, the last one short.
constexpr int64_t kPiece = 1000;

// A bf16 plan of a tiny Llama for steps of 4096 tokens in samples of at most 256.
PlanRequest plan_request(const std::string& name) {
  PlanRequest r;
  r.spec = load_model_spec(tiny_model(name, "llama", false));
  r.dtype = DType::kBF16;
  r.max_tokens = 4096;
  r.max_sequences = 16;
  r.max_sample_tokens = 256;
  return r;
}

EngineOptions with(DeviceOptimizer d, float clip) {
  EngineOptions opt = run_options(2, clip);
  opt.device_optimizer = d;
  opt.state_piece = kPiece;
  return opt;
}

TEST(DeviceOptimizer, IsBitIdenticalWithTheHostOptimizer) {
  for (bool tied : {false, true}) {
    const fs::path dir = tiny_model(tied ? "devopt_tied" : "devopt_untied", "llama", tied);
    for (float clip : {0.0f, 1.0f, 0.05f}) {  // 0.05 bites: every update is scaled
      const TrainRun host = train(dir, with(DeviceOptimizer::kOff, clip), 4, /*whole=*/true);
      const TrainRun dev = train(dir, with(DeviceOptimizer::kAll, clip), 4, /*whole=*/true);
      EXPECT_EQ(dev.losses, host.losses) << "tied " << tied << " clip " << clip;
      ASSERT_EQ(dev.weights.size(), host.weights.size());
      for (size_t k = 0; k < host.weights.size(); ++k)
        EXPECT_EQ(dev.weights[k], host.weights[k]) << "tensor " << k << " clip " << clip;
      EXPECT_LT(host.losses.back(), host.losses.front());
    }
  }
}

// Decoder layers on the device too: each updated right after its own backward (with clipping,
// after the norm from the fp32 gradient it kept), into the weights its slot holds (cached for the
// next forward) or, evicted, cast again from its master after the update. Bottom layers (the
// plan's choice), all of them, and a scattered set, over windows 1-3, micro-batches and clipping
// off, on and biting: bit-identical with the all-host run — losses, norms, gradients, weights —
// and the evaluation after it too.
TEST(DeviceOptimizer, ResidentLayersAreBitIdenticalWithTheHostOptimizer) {
  const fs::path dir = tiny_model("devopt_layers", "llama", false);
  const ModelSpec spec = load_model_spec(dir);
  const size_t units = size_t(spec.layers) + 2;
  // head false: the head on the host (the plan's choice where it does not fit beside the
  // embedding: clipping at 24 GiB), and with clipping the m and v of two host layers written later.
  auto layers_on = [&](std::vector<int> layers, bool head) {
    std::vector<bool> on(units, false);
    on.front() = true;
    on.back() = head;
    for (int i : layers) on[size_t(1 + i)] = true;
    return on;
  };
  for (float clip : {0.0f, 1.0f, 0.05f})
    for (int window : {1, 2, 3})
      for (int64_t micro : {int64_t(0), int64_t(24)}) {
        EngineOptions host_opt = with(DeviceOptimizer::kOff, clip);
        host_opt.window = window;
        host_opt.micro_tokens = micro;
        auto be = make_cpu_backend();
        Engine h0(*be, spec, host_opt);
        load_model_weights(h0, dir);
        std::vector<StepResult> host_steps;
        for (int s = 0; s < 4; ++s)
          host_steps.push_back(
              h0.step(random_batch(uint64_t(s % 2), spec.vocab, {13, 21, 7}), 1e-2f));
        const std::vector<std::vector<float>> host_w = all_weights(h0);
        for (const auto& [layers, head] :
             {std::pair{std::vector<int>{0, 1}, true},
              std::pair{std::vector<int>{0, 1, 2, 3, 4}, true},
              std::pair{std::vector<int>{1, 3}, true}, std::pair{std::vector<int>{0, 1}, false}}) {
          EngineOptions opt = host_opt;
          opt.device_optimizer = DeviceOptimizer::kAuto;
          opt.on_device = layers_on(layers, head);
          if (!head && clip > 0) opt.moments_later_units = 2;
          Engine e(*be, spec, opt);
          load_model_weights(e, dir);
          EXPECT_EQ(e.plan().on_device, opt.on_device);
          EXPECT_EQ(e.plan().moments_later_params > 0, !head && clip > 0);
          const std::string what =
              "clip " + std::to_string(clip) + " window " + std::to_string(window) + " micro " +
              std::to_string(micro) + " layers " + std::to_string(layers.size()) + " from " +
              std::to_string(layers.front()) + (head ? "" : ", the head on the host");
          for (int s = 0; s < 4; ++s) {
            const StepResult r =
                e.step(random_batch(uint64_t(s % 2), spec.vocab, {13, 21, 7}), 1e-2f);
            EXPECT_EQ(r.loss, host_steps[size_t(s)].loss) << what << " step " << s;
            EXPECT_EQ(r.grad_norm, host_steps[size_t(s)].grad_norm) << what << " step " << s;
          }
          if (clip > 0) {  // the last step's gradient, kept on the device for the clipped update
            for (const char* name :
                 {"model.layers.1.mlp.up_proj.weight", "model.layers.3.self_attn.q_proj.weight"}) {
              EXPECT_EQ(e.gradient(name), h0.gradient(name)) << what << " " << name;
            }
          }
          const Batch b = random_batch(9, spec.vocab, {9, 20});
          const double eval = e.evaluate(b).loss_sum;
          EXPECT_EQ(all_weights(e), host_w) << what;
          Engine h(*be, spec, host_opt);
          std::vector<std::vector<float>> state = copy_state(e);
          load_state(h, state, 4);
          EXPECT_EQ(h.evaluate(b).loss_sum, eval) << what;
        }
      }
}

// The embedding, the head and decoder layers 0 .. n-1 on the device, per unit.
std::vector<bool> outer_and_bottom(size_t units, int n) {
  std::vector<bool> on(units, false);
  on.front() = on.back() = true;
  for (int i = 0; i < n; ++i) on[size_t(1 + i)] = true;
  return on;
}

// The plan: decoder layers from the bottom after the embedding and the head, as many as the
// budget holds, 12 B/param each; with clipping 14 B/param each in bf16 (the gradient kept for the
// update after the norm), so the same budget holds fewer.
TEST(DeviceOptimizer, PlanTakesLayersFromTheBottomAfterTheOuterUnits) {
  PlanRequest r = plan_request("devopt_plan_layers");
  r.device_optimizer = DeviceOptimizer::kAll;
  r.gpu_budget = 0;
  const EnginePlan outer = make_plan(r);  // the embedding and the head: what kAll takes
  const std::vector<UnitLayout> units = unit_layouts(r.spec);
  const uint64_t layer = UnitState::state_bytes(units[1].numel);
  r.device_optimizer = DeviceOptimizer::kAuto;
  for (int n : {0, 1, 3, 5}) {
    r.gpu_budget = outer.device_total() + uint64_t(n) * layer + 512;
    const EnginePlan p = make_plan(r);
    EXPECT_EQ(p.on_device, outer_and_bottom(units.size(), n)) << n << " layers' state fits";
    EXPECT_EQ(p.device.optimizer, outer.device.optimizer + uint64_t(n) * layer);
    EXPECT_EQ(p.host.state, outer.host.state - uint64_t(n) * layer);
    EXPECT_LE(p.device_total(), r.gpu_budget);
    EXPECT_EQ(p.next_layer_bytes, n < 5 ? layer : 0) << n;  // what one more would take
    if (n < 5) {
      EXPECT_NE(p.describe().find("; one more layer there would take"), std::string::npos);
    }
    if (n > 0) {
      const std::string d = p.describe();
      EXPECT_NE(d.find(n == 1 ? "(embedding, head, layer 0)"
                              : "(embedding, head, layers 0-" + std::to_string(n - 1) + ")"),
                std::string::npos)
          << d;
    }
  }
  // Clipping: each layer keeps its gradient too, in the compute dtype (2 B/param more in bf16).
  r.clipping = true;
  r.dtype = DType::kBF16;
  r.device_optimizer = DeviceOptimizer::kAll;
  r.gpu_budget = 0;
  const EnginePlan outer_clipped = make_plan(r);
  const uint64_t clipped_layer = layer + UnitState::grad_bytes(units[1].numel, r.dtype);
  r.device_optimizer = DeviceOptimizer::kAuto;
  for (int n : {0, 1, 3}) {
    r.gpu_budget = outer_clipped.device_total() + uint64_t(n) * clipped_layer + 512;
    const EnginePlan p = make_plan(r);
    EXPECT_EQ(p.on_device, outer_and_bottom(units.size(), n))
        << n << " clipped layers' state and gradient fit";
    EXPECT_EQ(p.device.optimizer, outer_clipped.device.optimizer + uint64_t(n) * clipped_layer);
    EXPECT_LE(p.device_total(), r.gpu_budget);
  }
  // A budget that holds four layers' state unclipped holds three with their gradients.
  r.gpu_budget = outer_clipped.device_total() + 4 * layer + 512;
  PlanRequest unclipped = r;
  unclipped.clipping = false;
  EXPECT_EQ(make_plan(r).device_params, outer_clipped.device_params + 3 * units[1].numel);
  EXPECT_EQ(make_plan(unclipped).device_params, outer_clipped.device_params + 4 * units[1].numel);
  // Where the head does not fit beside the embedding, the layers still go: with clipping at 24
  // GiB from 32k tokens for Llama-3 8B the head's 14 B/param (7.4 GB) do not fit, a layer's do.
  {
    PlanRequest q = r;
    q.spec.vocab *= 64;  // a head larger than two layers, as Llama-3's
    const std::vector<UnitLayout> big = unit_layouts(q.spec);
    q.device_optimizer = DeviceOptimizer::kOff;
    q.gpu_budget = 0;
    const EnginePlan off = make_plan(q);
    std::vector<bool> embed_only(big.size(), false);
    embed_only.front() = true;
    q.on_device = embed_only;
    const EnginePlan embed = make_plan(q);
    const uint64_t head_clipped =
        UnitState::state_bytes(big.back().numel) + UnitState::grad_bytes(big.back().numel, q.dtype);
    ASSERT_GT(head_clipped, 2 * clipped_layer + 512);  // the head is the larger unit
    q.on_device.clear();
    q.device_optimizer = DeviceOptimizer::kAuto;
    q.gpu_budget = embed.device_total() + 2 * clipped_layer + 512;
    ASSERT_GT(off.device_total() + head_clipped, q.gpu_budget);
    const EnginePlan p = make_plan(q);
    std::vector<bool> want = embed_only;
    want[1] = want[2] = true;
    EXPECT_EQ(p.on_device, want) << p.describe();
    EXPECT_LE(p.device_total(), q.gpu_budget);
    EXPECT_NE(p.describe().find("(embedding, layers 0-1)"), std::string::npos) << p.describe();
  }
  // An explicit on_device names a layer with clipping too.
  r.device_optimizer = DeviceOptimizer::kAll;
  r.gpu_budget = 0;
  std::vector<bool> asked = outer_clipped.on_device;
  asked[2] = true;
  r.on_device = asked;
  const EnginePlan one = make_plan(r);
  EXPECT_EQ(one.device.optimizer, outer_clipped.device.optimizer + clipped_layer);
}

TEST(DeviceOptimizer, NormsGradientsAndPlanAgree) {
  const fs::path dir = tiny_model("devopt_norm", "qwen2", false);
  auto be = make_cpu_backend();
  const ModelSpec spec = load_model_spec(dir);
  Engine host(*be, spec, with(DeviceOptimizer::kOff, 1.0f));
  Engine dev(*be, spec, with(DeviceOptimizer::kAll, 1.0f));
  load_model_weights(host, dir);
  load_model_weights(dev, dir);
  const EnginePlan& p = dev.plan();
  ASSERT_EQ(p.on_device.size(), size_t(dev.units()));
  EXPECT_TRUE(p.on_device.front() && p.on_device.back());
  const int64_t outer = dev.layout(0).numel + dev.layout(dev.units() - 1).numel;
  EXPECT_EQ(p.device_params, outer);
  EXPECT_EQ(host.plan().host.state - p.host.state,
            UnitState::state_bytes(dev.layout(0).numel) +
                UnitState::state_bytes(dev.layout(dev.units() - 1).numel));
  // With clipping the head keeps its gradient beside its state until the norm (the embedding's
  // waits in the outer unit's buffer).
  EXPECT_EQ(p.device.optimizer,
            host.plan().host.state - p.host.state +
                UnitState::grad_bytes(dev.layout(dev.units() - 1).numel, DType::kF32));
  EXPECT_EQ(p.host.state_copy, uint64_t(kPiece) * 4);  // one piece, not one tensor
  EXPECT_NE(p.describe().find("updated on the device (embedding, head)"), std::string::npos)
      << p.describe();
  for (int s = 0; s < 2; ++s) {
    const Batch b = random_batch(uint64_t(s), spec.vocab, {13, 21, 7});
    const StepResult a = host.step(b, 1e-2f), c = dev.step(b, 1e-2f);
    EXPECT_EQ(a.loss, c.loss);
    EXPECT_EQ(a.grad_norm, c.grad_norm);  // the device's Σ g² is the CPU's sum_squares here
  }
  for (const char* name : {"model.embed_tokens.weight", "lm_head.weight", "model.norm.weight",
                           "model.layers.0.mlp.up_proj.weight"})
    EXPECT_EQ(dev.gradient(name), host.gradient(name)) << name;
  const Batch b = random_batch(5, spec.vocab, {9, 30});
  EXPECT_EQ(dev.evaluate(b).loss_sum, host.evaluate(b).loss_sum);
}

TEST(DeviceOptimizer, StateRoundTripContinuesBitIdentically) {
  const fs::path dir = tiny_model("devopt_resume", "mistral", false);
  const EngineOptions opt = with(DeviceOptimizer::kAll, 0.0f);
  const TrainRun whole = train(dir, opt, 5, /*whole=*/true);
  auto be = make_cpu_backend();
  const ModelSpec spec = load_model_spec(dir);
  std::vector<std::vector<float>> saved;
  std::vector<double> losses;
  {
    Engine e(*be, spec, opt);
    load_model_weights(e, dir);
    for (int s = 0; s < 3; ++s)
      losses.push_back(e.step(random_batch(uint64_t(s % 2), spec.vocab, {13, 21, 7}), 1e-2f).loss);
    saved = copy_state(e);
  }
  Engine e(*be, spec, with(DeviceOptimizer::kOff, 0.0f));  // a host-only run resumes it
  load_state(e, saved, 3);
  for (int s = 3; s < 5; ++s)
    losses.push_back(e.step(random_batch(uint64_t(s % 2), spec.vocab, {13, 21, 7}), 1e-2f).loss);
  EXPECT_EQ(losses, whole.losses);
  EXPECT_EQ(all_weights(e), whole.weights);
}

// A resume's path (visit_state_read's `fetch` to save, load_state to restore), piece by piece on
// both sides with pieces of different sizes: the run continues bit-identically.
TEST(DeviceOptimizer, StateSavedAndLoadedInPiecesContinuesBitIdentically) {
  const fs::path dir = tiny_model("devopt_pieces", "llama", false);
  const EngineOptions opt = with(DeviceOptimizer::kAll, 1.0f);
  const TrainRun whole = train(dir, opt, 5, /*whole=*/true);
  auto be = make_cpu_backend();
  const ModelSpec spec = load_model_spec(dir);
  std::map<std::string, std::vector<float>> saved;  // name + part
  std::vector<double> losses;
  int fetched = 0;
  {
    Engine e(*be, spec, opt);
    load_model_weights(e, dir);
    for (int s = 0; s < 3; ++s)
      losses.push_back(e.step(random_batch(uint64_t(s % 2), spec.vocab, {13, 21, 7}), 1e-2f).loss);
    e.visit_state_read([&](const TensorState& t) {
      for (int part = 0; part < 3; ++part) {
        std::vector<float>& v = saved[t.desc.name + char('0' + part)];
        if (!t.fetch) {
          const float* a[3] = {t.master, t.m, t.v};
          v.assign(a[part], a[part] + t.numel);
          continue;
        }
        ++fetched;
        t.fetch(part, [&](const float* values, int64_t begin, int64_t count) {
          EXPECT_EQ(int64_t(v.size()), begin) << t.desc.name;
          EXPECT_LE(count, kPiece);
          v.insert(v.end(), values, values + count);
        });
        EXPECT_EQ(int64_t(v.size()), t.numel) << t.desc.name;
      }
    });
  }
  EXPECT_EQ(fetched, 9);  // three parts each of the embedding, the final norm and the head
  EngineOptions other = opt;
  other.state_piece = 777;
  Engine e(*be, spec, other);
  int pieces = 0;
  e.load_state([&](const TensorDesc& d, int part, int64_t begin, int64_t count, float* dst) {
    const std::vector<float>& v = saved.at(d.name + char('0' + part));
    ASSERT_LE(begin + count, int64_t(v.size())) << d.name;
    std::copy(v.begin() + begin, v.begin() + begin + count, dst);
    pieces += count < int64_t(v.size());
  });
  e.set_steps_done(3);
  EXPECT_GT(pieces, 6);  // the embedding and the head come in several
  for (int s = 3; s < 5; ++s)
    losses.push_back(e.step(random_batch(uint64_t(s % 2), spec.vocab, {13, 21, 7}), 1e-2f).loss);
  EXPECT_EQ(losses, whole.losses);
  EXPECT_EQ(all_weights(e), whole.weights);
}

// A device update that leaves weights non-finite stops the run (issue 14: weights finite after
// every update) with the error a host update gives — the step, the unit, the count, what to do —
// from Backend::adamw's count, read back: with the embedding's state on the device and on the
// host, clipped and not. lr 1e37 with weight decay 0.1 multiplies every weight by 1 - 1e36, which
// takes one planted weight of 1000 past the float range and leaves the others (|w| < 1) finite.
TEST(DeviceOptimizer, AnUpdateThatLeavesWeightsNonFiniteStopsTheRun) {
  const fs::path dir = tiny_model("devopt_nonfinite", "llama", false);
  auto be = make_cpu_backend();
  const ModelSpec spec = load_model_spec(dir);
  const SafetensorsReader weights(dir);
  for (float clip : {0.0f, 1.0f}) {
    std::string error[2];  // device, host
    for (DeviceOptimizer d : {DeviceOptimizer::kAll, DeviceOptimizer::kOff}) {
      Engine e(*be, spec, with(d, clip));
      e.init_weights([&](const TensorDesc& desc, int, int64_t begin, int64_t count, float* dst) {
        load_tensor_f32(weights, desc, begin, count, dst);
        if (desc.name == "model.embed_tokens.weight" && begin <= 7 && 7 < begin + count)
          dst[7 - begin] = 1000.0f;
      });
      const std::vector<bool>& on = e.plan().on_device;
      ASSERT_EQ(!on.empty() && on.front(), d == DeviceOptimizer::kAll);
      try {
        for (int s = 0; s < 3; ++s)
          e.step(random_batch(uint64_t(s), spec.vocab, {13, 21, 7}), 1e37f);
        e.visit_state_read([](const TensorState&) {});  // what a save does first
      } catch (const Error& x) {
        error[d == DeviceOptimizer::kOff] = x.what();
      }
    }
    EXPECT_NE(error[0].find("step 1: the AdamW update of unit 0 (model.embed_tokens.weight) left "
                            "1 weights non-finite"),
              std::string::npos)
        << "clip " << clip << ": " << error[0];
    EXPECT_NE(error[0].find("lower learning_rate"), std::string::npos) << error[0];
    EXPECT_EQ(error[0], error[1]) << "clip " << clip;
  }
}

// A GPU-resident tensor's host copy lives only during the visit's callback: checkpoints (the model
// and the optimizer state) fetch it again when the writer reaches it, so every saved tensor is the
// engine's own (an earlier version wrote pointers into freed copies: on the CPU backend the head's
// values under the embedding's name, on CUDA a segmentation fault).
TEST(DeviceOptimizer, CheckpointsHoldTheDeviceTensors) {
  const fs::path dir = tiny_model("devopt_save", "llama", false);  // embedding and head alike
  auto be = make_cpu_backend();
  const ModelSpec spec = load_model_spec(dir);
  Engine e(*be, spec, with(DeviceOptimizer::kAll, 0.0f));
  load_model_weights(e, dir);
  for (int s = 0; s < 2; ++s) e.step(random_batch(uint64_t(s), spec.vocab, {13, 21, 7}), 1e-2f);
  std::map<std::string, std::pair<TensorDesc, std::vector<float>>> want;
  std::vector<TensorToWrite> state;
  e.visit_state([&](const TensorState& t) {
    const char* suffix[3] = {".master", ".exp_avg", ".exp_avg_sq"};
    const float* a[3] = {t.master, t.m, t.v};
    for (int k = 0; k < 3; ++k) {
      want[t.desc.name + suffix[k]] = {TensorDesc{t.desc.name + suffix[k], t.desc.shape, true},
                                       std::vector<float>(a[k], a[k] + t.numel)};
      state.push_back(state_to_write(t, t.desc.name + suffix[k], k));
    }
  });
  const fs::path out = fs::temp_directory_path() / "sf_devopt_save_out";
  fs::remove_all(out);
  fs::create_directories(out);
  write_safetensors_file(out / "state.safetensors", state, DType::kF32);
  std::ifstream cfg(dir / "config.json");
  const std::string config((std::istreambuf_iterator<char>(cfg)), std::istreambuf_iterator<char>());
  save_model_checkpoint(e, out / "model", config, DType::kF32);
  SafetensorsReader st(out / "state.safetensors"), model(out / "model");
  int device_tensors = 0;
  for (const auto& [name, entry] : want) {
    const auto& [desc, values] = entry;
    std::vector<float> got(values.size());
    load_tensor_f32(st, desc, got.data());
    EXPECT_EQ(got, values) << name;
    if (!name.ends_with(".master")) continue;
    const std::string weight = name.substr(0, name.rfind('.'));
    load_tensor_f32(model, TensorDesc{weight, desc.shape, true}, got.data());
    EXPECT_EQ(got, values) << weight;
    device_tensors += weight == "model.embed_tokens.weight" || weight == "lm_head.weight";
  }
  EXPECT_EQ(device_tensors, 2);
  fs::remove_all(out);
}

TEST(DeviceOptimizer, PlanTakesTheEmbeddingFirstThenTheHeadWhereTheBudgetHolds) {
  PlanRequest r = plan_request("devopt_plan");
  r.device_optimizer = DeviceOptimizer::kOff;
  const EnginePlan off = make_plan(r);
  const std::vector<UnitLayout> units = unit_layouts(r.spec);
  const uint64_t embed = UnitState::state_bytes(units.front().numel);
  const uint64_t head = UnitState::state_bytes(units.back().numel);
  r.device_optimizer = DeviceOptimizer::kAuto;
  EXPECT_EQ(make_plan(r).device_params, 0);  // no budget: nothing on the device
  auto with_budget = [&](uint64_t b) {
    r.gpu_budget = b;
    return make_plan(r);
  };
  const EnginePlan none = with_budget(off.device_total() + embed - 256);
  EXPECT_EQ(none.device_params, 0);
  EXPECT_EQ(none.micro_tokens, 4096);  // T ≤ 8k: M is not traded
  const EnginePlan one = with_budget(off.device_total() + embed + 512);
  EXPECT_TRUE(one.on_device.front());
  EXPECT_FALSE(one.on_device.back());
  EXPECT_EQ(one.host.state, off.host.state - embed);
  EXPECT_LE(one.device_total(), r.gpu_budget);
  // Both outer units on the device: their gradients never go D2H, so the outer unit has no
  // compute-dtype stage, and the head fits in that much less than its state.
  const uint64_t stage =  // bf16, in a 256-byte aligned piece
      (uint64_t(outer_grad_elems(r.spec)) * 2 + 255) / 256 * 256;
  const EnginePlan both = with_budget(off.device_total() + embed + head + 512 - stage);
  EXPECT_TRUE(both.on_device.front() && both.on_device.back());
  EXPECT_EQ(both.device.optimizer, embed + head);
  EXPECT_EQ(both.device.outer + stage, one.device.outer);
  EXPECT_EQ(one.device.outer, off.device.outer);
  // kAll with a budget that cannot hold it: refused, naming the budget that would.
  r.device_optimizer = DeviceOptimizer::kAll;
  r.gpu_budget = off.device_total();
  EXPECT_THROW(make_plan(r), Error);

  // A long step: M halves for the embedding's state, but not below 8k tokens. (A large
  // vocabulary makes the embedding's state outweigh the workspaces' growth from M to 2M.)
  r.spec.vocab = 400000;
  r.max_tokens = 65536;
  r.max_sequences = 64;
  std::vector<bool> embed_only(units.size(), false);
  embed_only.front() = true;
  auto total = [&](int64_t m, bool with_embed) {
    PlanRequest q = r;
    q.gpu_budget = 0;
    q.micro_tokens = m;
    q.on_device = with_embed ? embed_only : std::vector<bool>{};
    q.device_optimizer = DeviceOptimizer::kOff;
    return make_plan(q).device_total();
  };
  r.device_optimizer = DeviceOptimizer::kAuto;
  r.micro_tokens = 0;
  r.gpu_budget = total(32768, true);
  ASSERT_LE(total(65536, false), r.gpu_budget);  // M = T fits alone: the trade is the plan's
  // The head (as large as the embedding) does not fit; the tiny model's layers do, once M halves
  // once more (down to the same floor as for the outer units).
  auto named = [](const EnginePlan& p) {
    std::string x;
    for (bool b : p.on_device) x += b ? '1' : '0';
    return x;
  };
  const EnginePlan traded = make_plan(r);
  EXPECT_EQ(named(traded), "1111110");
  EXPECT_EQ(traded.micro_tokens, 16384);
  EXPECT_LE(traded.device_total(), r.gpu_budget);
  r.gpu_budget = total(8192, true);  // fits at M = 8192, the floor
  const EnginePlan at_floor = make_plan(r);
  EXPECT_EQ(named(at_floor), "1000000");  // no room left for a layer at the floor
  EXPECT_EQ(at_floor.micro_tokens, 8192);
  r.gpu_budget = total(4096, true);  // the embedding would need M = 4096 < 8192
  ASSERT_LE(total(8192, false), r.gpu_budget);
  const EnginePlan floor = make_plan(r);
  EXPECT_FALSE(floor.on_device.front());
  EXPECT_GE(floor.micro_tokens, 8192);
  // Neither outer unit fits there; the layers still do (each 12 B/param of a small unit).
  EXPECT_EQ(named(floor), "0111110");
  EXPECT_LE(floor.device_total(), r.gpu_budget);
}

}  // namespace
}  // namespace sf
