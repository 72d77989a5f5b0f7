// The sliding engine beyond the golden fixtures: every window gives bit-identical results, the
// immediate-update path (no clipping) equals the deferred one when the clip never bites, and
// bad batches are refused before anything runs.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "engine/engine.h"
#include "engine/host_check.h"
#include "engine/micro_batch.h"
#include "engine/plan.h"
#include "engine_test_util.h"
#include "model/init.h"
#include "model/layout.h"
#include "model/spec.h"
#include "train/checkpoint.h"
#include "train/data.h"

namespace sf {
namespace {

namespace fs = std::filesystem;
using namespace test_engine;

TEST(Engine, EveryWindowGivesIdenticalResults) {
  for (bool tied : {false, true}) {
    fs::path dir = tiny_model(tied ? "tied" : "untied", "qwen2", tied);
    TrainRun ref = train(dir, 1, 1.0f, 4);
    for (int w : {2, 3, 5, 8}) {
      TrainRun r = train(dir, w, 1.0f, 4);
      EXPECT_EQ(r.losses, ref.losses) << "window " << w;
      EXPECT_EQ(r.weights, ref.weights) << "window " << w;
    }
    EXPECT_LT(ref.losses.back(), ref.losses.front());
  }
}

// The trainer gives a fresh run's weights to the constructor, which writes each host unit's as
// soon as its buffer is pinned (the zero of fresh memory standing for m and v) and the
// GPU-resident units' after: the same bits as init_weights after construction.
TEST(Engine, WeightsGivenToTheConstructorTrainAsInitWeights) {
  const fs::path dir = tiny_model("ctor_weights", "llama", false);
  for (float clip : {0.0f, 1.0f})
    for (DeviceOptimizer d : {DeviceOptimizer::kOff, DeviceOptimizer::kAll}) {
      EngineOptions opt = run_options(2, clip);
      opt.device_optimizer = d;
      const TrainRun after = train(dir, opt, 3, /*whole=*/true);
      const TrainRun given = train(dir, opt, 3, /*whole=*/true, /*at_construction=*/true);
      EXPECT_EQ(given.losses, after.losses) << "clip " << clip << " device " << int(d);
      EXPECT_EQ(given.weights, after.weights) << "clip " << clip << " device " << int(d);
      EXPECT_LT(after.losses.back(), after.losses.front());
    }
}

TEST(Engine, ImmediateUpdateEqualsDeferredWhenClipDoesNotBite) {
  fs::path dir = tiny_model("noclip", "llama", false);
  TrainRun deferred = train(dir, 2, 1e9f, 4);   // clipping on, factor 1
  TrainRun immediate = train(dir, 2, 0.0f, 4);  // clipping off: each unit updated on arrival
  EXPECT_EQ(immediate.losses, deferred.losses);
  EXPECT_EQ(immediate.weights, deferred.weights);
}

TEST(Engine, RefusesBadBatches) {
  fs::path dir = tiny_model("bad", "llama", false);
  auto be = make_cpu_backend();
  ModelSpec spec = load_model_spec(dir);
  EngineOptions opt;
  opt.max_tokens = 16;
  opt.max_sequences = 4;
  opt.adamw.lr = 1e-3f;
  Engine e(*be, spec, opt);
  load_model_weights(e, dir);
  Batch ok = random_batch(1, spec.vocab, {8, 8});
  Batch too_long = random_batch(1, spec.vocab, {9, 8});
  EXPECT_THROW(e.step(too_long, 1e-3f), Error);
  Batch bad_id = ok;
  bad_id.ids[3] = int32_t(spec.vocab);
  try {
    e.step(bad_id, 1e-3f);
    FAIL() << "expected an error";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("outside the vocabulary"), std::string::npos);
  }
  Batch no_labels = ok;
  for (auto& t : no_labels.targets) t = -100;
  EXPECT_THROW(e.step(no_labels, 1e-3f), Error);
  Batch bad_bounds = ok;
  bad_bounds.cu_seqlens = {0, 9, 8, 16};
  EXPECT_THROW(e.step(bad_bounds, 1e-3f), Error);
  // After refusing, the engine still trains.
  EXPECT_TRUE(std::isfinite(e.step(ok, 1e-3f).loss));
  EXPECT_EQ(e.steps_done(), 1);
}

TEST(MicroBatch, SplitsWholeSamplesInOrder) {
  Batch b = random_batch(3, 97, {13, 21, 7, 5, 30});
  std::vector<MicroBatch> m = split_micro_batches(b, 34);
  ASSERT_EQ(m.size(), 3u);  // 13+21 | 7+5 (+30 would exceed) | 30
  EXPECT_EQ(m[0].token_begin, 0);
  EXPECT_EQ(m[0].tokens, 34);
  EXPECT_EQ(m[0].cu_seqlens, (std::vector<int32_t>{0, 13, 34}));
  EXPECT_EQ(m[1].token_begin, 34);
  EXPECT_EQ(m[1].sample_begin, 2);
  EXPECT_EQ(m[1].cu_seqlens, (std::vector<int32_t>{0, 7, 12}));
  EXPECT_EQ(m[2].token_begin, 46);
  EXPECT_EQ(m[2].cu_seqlens, (std::vector<int32_t>{0, 30}));
  EXPECT_EQ(split_micro_batches(b, 1000).size(), 1u);
  try {
    split_micro_batches(b, 29);
    FAIL() << "a sample longer than the micro-batch must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sample 4 has 30 tokens"), std::string::npos) << e.what();
  }
}

// Layer-major micro-batching gives the whole step's result: the same loss and weights, to the
// rounding of summing weight gradients per micro-batch (fp32) instead of over the whole step.
TEST(Engine, MicroBatchesMatchTheWholeStep) {
  fs::path dir = tiny_model("micro", "qwen3", false);
  for (float clip : {0.0f, 1.0f}) {
    TrainRun whole = train(dir, 2, clip, 4);
    for (int64_t M : {21, 28, 34}) {  // 3, 2 and 2 micro-batches of the {13, 21, 7} step
      TrainRun r = train(dir, 2, clip, 4, M);
      for (size_t s = 0; s < whole.losses.size(); ++s)
        EXPECT_NEAR(r.losses[s], whole.losses[s], 1e-5 * whole.losses[s]) << "M " << M;
      for (size_t t = 0; t < whole.weights.size(); ++t)
        for (size_t k = 0; k < whole.weights[t].size(); ++k)
          EXPECT_NEAR(r.weights[t][k], whole.weights[t][k], 1e-5) << "M " << M << " tensor " << t;
    }
  }
}

// Without clipping gradients pass through a ring of 4 pinned pieces: pieces far smaller than a
// unit (so the ring wraps many times a step, and the D2H waits for the optimizer) give the same
// bits as one piece per unit; and, with nothing held, the host holds no gradient per unit.
TEST(Engine, GradientRingPiecesGiveIdenticalResults) {
  fs::path dir = tiny_model("ring", "llama", true);
  EngineOptions opt = run_options(2, 0.0f);
  opt.held_units = 0;
  TrainRun whole = train(dir, opt, 4);
  for (int64_t piece : {97, 1000, 4096}) {
    opt.grad_piece = piece;
    TrainRun r = train(dir, opt, 4);
    EXPECT_EQ(r.losses, whole.losses) << "piece " << piece;
    EXPECT_EQ(r.weights, whole.weights) << "piece " << piece;
  }
  auto be = make_cpu_backend();
  opt.grad_piece = 1000;
  Engine ring(*be, load_model_spec(dir), opt);
  EXPECT_EQ(ring.plan().grad_ring_slots, 4);
  EXPECT_EQ(ring.plan().host.grads, 4u * 4096u);  // 4 × 1000 F32, each rounded up to 256 B
  EXPECT_EQ(ring.plan().host.state, uint64_t(ring.plan().params) * 12);
  opt.max_grad_norm = 1.0f;
  Engine held(*be, load_model_spec(dir), opt);
  EXPECT_EQ(held.plan().grad_ring_slots, 0);
  EXPECT_GE(held.plan().host.grads, uint64_t(held.plan().params) * 4);
}

// Without clipping, the units the plan holds (the head and the top layers: their gradients come
// first in the backward, their weights are needed last in the forward) are updated in forward
// order behind the ring, through the next step's forward: the same bits as every gradient
// through the ring — for none, a few, the plan's choice and every unit held, tied and untied,
// with pieces that split the units and with a window of 1 (the forward waits for each update).
TEST(Engine, HeldGradientsGiveIdenticalResults) {
  for (bool tied : {true, false}) {
    fs::path dir = tiny_model(tied ? "held_tied" : "held_untied", "llama", tied);
    for (int window : {1, 2}) {
      EngineOptions opt = run_options(window, 0.0f);
      opt.held_units = 0;
      opt.grad_piece = 1000;
      const TrainRun ring = train(dir, opt, 5, /*whole=*/true);
      for (int held : {1, 3, -1, 1000}) {
        opt.held_units = held;
        const TrainRun r = train(dir, opt, 5, /*whole=*/true);
        EXPECT_EQ(r.losses, ring.losses) << "held " << held << " window " << window;
        EXPECT_EQ(r.weights, ring.weights) << "held " << held << " window " << window;
      }
    }
  }
}

// With clipping, units whose update after the norm writes the master alone and their m and v
// later, through the next step (moments_later, from the bottom up): the same bits as the whole
// update — losses, and every master, m and v after the run (each step's moments pass and the
// next D2H into its gradient ordered) — for a few units, every unit, with pieces that split the
// units' moments passes, a window of 1 and 2, the clip biting and not, tied and untied.
TEST(Engine, MomentsLaterGiveIdenticalResults) {
  for (bool tied : {false, true}) {
    fs::path dir = tiny_model(tied ? "later_tied" : "later_untied", "llama", tied);
    for (int window : {1, 2})
      for (float clip : {1e-3f, 1e9f}) {
        EngineOptions opt = run_options(window, clip);
        opt.grad_piece = 1000;
        auto run = [&](int later, std::vector<float>* losses) {
          auto be = make_cpu_backend();
          const ModelSpec spec = load_model_spec(dir);
          EngineOptions o = opt;
          o.moments_later_units = later;
          Engine e(*be, spec, o);
          load_model_weights(e, dir);
          EXPECT_EQ(e.plan().moments_later_params > 0, later > 0);
          for (int s = 0; s < 5; ++s)
            losses->push_back(
                e.step(random_batch(uint64_t(s % 2), spec.vocab, {13, 21, 7}), 1e-2f).loss);
          return copy_state(e);
        };
        std::vector<float> ref_losses;
        const auto ref = run(0, &ref_losses);
        for (int later : {1, 3, 1000}) {
          std::vector<float> losses;
          const auto state = run(later, &losses);
          EXPECT_EQ(losses, ref_losses) << "later " << later << " window " << window;
          EXPECT_TRUE(state == ref) << "later " << later << " window " << window << " clip "
                                    << clip;
        }
      }
  }
}

// The plan holds from the head down: `held_units` of them, or a quarter of the host-updated
// parameters; their gradients are counted on the host beside the ring; with clipping every host
// unit is held whatever was asked.
TEST(Plan, HoldsTheHeadAndTheTopLayers) {
  fs::path dir = tiny_model("held_plan", "llama", false);
  const ModelSpec spec = load_model_spec(dir);
  const std::vector<UnitLayout> units = unit_layouts(spec);
  const size_t n = units.size();  // embedding, 5 layers, head
  PlanRequest r;
  r.spec = spec;
  r.max_tokens = 64;
  r.max_sequences = 4;
  r.grad_piece = 1000;
  r.held_units = 3;
  EnginePlan p = make_plan(r);
  EXPECT_EQ(p.held, (std::vector<bool>{false, false, false, false, true, true, true}));
  EXPECT_EQ(p.held_params, units[n - 1].numel + 2 * units[n - 2].numel);
  EXPECT_EQ(p.host.grads, 4 * UnitState::grad_bytes(1000, DType::kF32) +
                              UnitState::grad_bytes(units[n - 1].numel, DType::kF32) +
                              2 * UnitState::grad_bytes(units[n - 2].numel, DType::kF32));
  EXPECT_NE(p.describe().find("held, updated in forward order behind the ring: the head and "
                              "layers 3-4"),
            std::string::npos)
      << p.describe();
  r.held_units = -1;
  p = make_plan(r);
  int64_t host = 0;
  for (const UnitLayout& u : units) host += u.numel;
  EXPECT_GT(p.held_params, 0);
  EXPECT_LE(p.held_params, host / 4);
  for (size_t k = 1; k < n; ++k)  // contiguous from the head down
    EXPECT_TRUE(!p.held[k - 1] || p.held[k]) << k;
  size_t first = 0;
  while (!p.held[first]) ++first;
  EXPECT_GT(p.held_params + units[first - 1].numel, host / 4);  // the next would not fit
  r.held_units = 0;
  EXPECT_EQ(make_plan(r).held_params, 0);
  r.clipping = true;
  p = make_plan(r);
  EXPECT_EQ(p.held, std::vector<bool>(n, true));
  EXPECT_GE(p.host.grads, uint64_t(p.params) * 4);
}

// Where the plan's own held share is all that keeps it from the host limit, it goes (a speed-up
// for 2 B/param) rather than the run being refused or layers going to NVMe; a share asked for
// stays, and the host check refuses it.
TEST(Plan, DropsItsHeldShareBeforeTheHostLimitRefuses) {
  PlanRequest r;
  r.spec = load_model_spec(tiny_model("held_plan", "llama", false));
  r.max_tokens = 64;
  r.max_sequences = 4;
  r.grad_piece = 1000;
  r.held_units = -1;
  const EnginePlan with = make_plan(r);
  ASSERT_GT(with.held_params, 0);
  r.held_units = 0;
  const uint64_t without = make_plan(r).host.total();
  ASSERT_LT(without, with.host.total());
  r.held_units = -1;
  r.host_limit = without + host_margin(without);  // fits without the share, not with it
  const EnginePlan p = make_plan(r);
  EXPECT_EQ(p.held_params, 0);
  EXPECT_EQ(p.host.total(), without);
  r.host_limit = with.host.total() + host_margin(with.host.total());  // room for it: kept
  EXPECT_EQ(make_plan(r).held_params, with.held_params);
  r.host_limit = without + host_margin(without);
  r.held_units = 2;  // asked for: kept (check_host refuses the run)
  EXPECT_GT(make_plan(r).held_params, 0);
}

// A GPU budget picks the largest micro-batch that fits; one too small for any plan names the
// smallest budget that works.
// The tiny llama's plan for steps of 4096 tokens in `samples` samples of ≤ `longest`, window 2.
PlanRequest tiny_plan_request(int64_t samples, int64_t longest) {
  PlanRequest r;
  r.spec = load_model_spec(tiny_model("plan", "llama", false));
  r.dtype = DType::kBF16;
  r.window = 2;
  r.max_tokens = 4096;
  r.max_sequences = samples;
  r.max_sample_tokens = longest;
  return r;
}

TEST(Plan, BudgetChoosesTheMicroBatchAndRefusesWhatCannotFit) {
  PlanRequest r = tiny_plan_request(16, 256);
  const EnginePlan whole = make_plan(r);
  EXPECT_EQ(whole.micro_tokens, 4096);
  r.micro_tokens = 512;
  const EnginePlan m512 = make_plan(r);
  r.micro_tokens = 0;
  r.gpu_budget = m512.device_total();
  const EnginePlan fit = make_plan(r);
  EXPECT_EQ(fit.micro_tokens, 512);  // 4096 → 2048 → 1024 → 512 is the first that fits
  EXPECT_LE(fit.device_total(), r.gpu_budget);
  EXPECT_LT(fit.device.workspace, whole.device.workspace / 7);
  EXPECT_EQ(fit.device.activations, whole.device.activations);  // T × C buffers stay
  // three of them: x and y (where the backward also restores the checkpoints) and ∂L/∂x
  EXPECT_EQ(fit.device.activations, uint64_t(3 * 4096 * r.spec.hidden * 2));
  EXPECT_EQ(fit.host.total(), whole.host.total());
  EXPECT_EQ(fit.host.state, uint64_t(fit.params) * 12);  // 12 B/param, no more
  // Too small for two slots at any M, enough for one: the window shrinks.
  r.gpu_budget = make_plan([&] {
                   PlanRequest q = r;
                   q.gpu_budget = 0;
                   q.window = 1;
                   q.micro_tokens = 256;
                   return q;
                 }())
                     .device_total();
  const EnginePlan one = make_plan(r);
  EXPECT_EQ(one.window, 1);
  EXPECT_EQ(one.micro_tokens, 256);
  r.gpu_budget = 1 << 20;
  try {
    make_plan(r);
    FAIL() << "a 1 MiB budget cannot fit";
  } catch (const Error& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("the GPU budget of 0.0 GiB is too small"), std::string::npos) << w;
    EXPECT_NE(w.find("The smallest budget that works for these steps is"), std::string::npos) << w;
    EXPECT_NE(w.find("micro-batches of 256 tokens"), std::string::npos) << w;
  }
  r.gpu_budget = 0;
  r.micro_tokens = 100;  // shorter than the longest sample
  EXPECT_THROW(make_plan(r), Error);
}

// A sample as long as the step bounds M from below: where even that does not fit, the MLP runs
// in blocks of fewer rows (halving down to 1024) before the window shrinks.
TEST(Plan, ALongSampleCutsTheMlpIntoBlocksBeforeTheWindow) {
  PlanRequest r = tiny_plan_request(1, 4096);
  const EnginePlan whole = make_plan(r);
  EXPECT_EQ(whole.mlp_tokens, 4096);
  r.mlp_tokens = 1024;
  const EnginePlan blocks = make_plan(r);
  EXPECT_EQ(blocks.mlp_tokens, 1024);
  // the six T × intermediate tensors shrink by 3/4
  EXPECT_EQ(whole.device.workspace - blocks.device.workspace,
            uint64_t(6 * (4096 - 1024) * r.spec.intermediate * 2));
  r.mlp_tokens = 0;
  r.gpu_budget = blocks.device_total();
  const EnginePlan fit = make_plan(r);
  EXPECT_EQ(fit.window, 2);
  EXPECT_EQ(fit.micro_tokens, 4096);
  EXPECT_EQ(fit.mlp_tokens, 1024);  // 2048 does not fit
  EXPECT_NE(fit.describe().find("the MLP in blocks of 1024 tokens"), std::string::npos)
      << fit.describe();
  r.gpu_budget = blocks.device_total() - 4096;  // below: one slot
  EXPECT_EQ(make_plan(r).window, 1);
}

// One device: the window's slots share one fp32 gradient buffer (a layer's gradient is cast to
// its slot's stage before the next layer's backward zeroes it), so a slot costs its weights and
// stage only; data parallel keeps one per slot (the reduction reads it while the next layer runs).
TEST(Plan, SlotsShareOneGradientBufferOnOneDevice) {
  fs::path dir = tiny_model("plan_grads", "llama", false);
  const ModelSpec spec = load_model_spec(dir);
  const int64_t n = layer_layout(spec, 0).numel;
  const auto round = [](uint64_t b) { return (b + 255) / 256 * 256; };
  std::vector<char> mem(64 << 20);
  for (bool shared : {true, false}) {
    DeviceBytes w2, w3;
    const PlanDims d2{2, 512, 4, 512, 1 << 16, {}, false, shared};
    PlanDims d3 = d2;
    d3.window = 3;
    carve_device(spec, DType::kBF16, d2, nullptr, &w2);
    carve_device(spec, DType::kBF16, d3, nullptr, &w3);
    const uint64_t grads = round(uint64_t(n) * 4), weights = round(uint64_t(n) * 2);
    EXPECT_EQ(w3.slots - w2.slots, shared ? 2 * weights : 2 * weights + grads) << shared;
    const DeviceParts p = carve_device(spec, DType::kBF16, d3, mem.data(), nullptr);
    ASSERT_EQ(p.slots.size(), 3u);
    EXPECT_EQ(p.slots[0].grads == p.slots[2].grads, shared);
    EXPECT_NE(p.slots[0].stage, p.slots[1].stage);
    EXPECT_NE(p.slots[0].params, p.slots[1].params);
  }
  // The plan carves as it counted: two devices, one buffer more per slot beyond the first.
  PlanRequest r;
  r.spec = spec;
  r.dtype = DType::kBF16;
  r.max_tokens = 512;
  r.max_sequences = 4;
  r.max_sample_tokens = 128;
  const EnginePlan one = make_plan(r);
  r.devices = 2;
  r.device_optimizer = DeviceOptimizer::kOff;
  const EnginePlan two = make_plan(r);
  EXPECT_EQ(two.device.slots - one.device.slots, round(uint64_t(n) * 4) * uint64_t(one.window - 1));
}

// A vocabulary of 512 makes the outer unit's fp32 gradients (16 K elements) larger than a layer's
// gradient and both its stages (7.7 K elements, 4 + 2 × 2 B each): on one device and untied, the
// slots' gradient and stages lie inside that buffer and the slots cost their weights alone; tied,
// data parallel or asked not to, each has memory of its own.
TEST(Plan, SlotBuffersLieInsideTheOuterGradientsWhereTheyFit) {
  const auto round = [](uint64_t b) { return (b + 255) / 256 * 256; };
  std::vector<char> mem(64 << 20);
  for (bool tied : {false, true}) {
    const ModelSpec spec =
        load_model_spec(tiny_model(tied ? "plan_inside_tied" : "plan_inside", "llama", tied, 512));
    const int64_t n = layer_layout(spec, 0).numel;
    const uint64_t weights = round(uint64_t(n) * 2);
    for (DType dt : {DType::kBF16, DType::kF32}) {
      for (bool asked : {true, false}) {
        for (bool shared : {true, false}) {
          PlanDims d{2, 512, 4, 512, 1 << 16, {}, false, shared};
          d.slots_in_outer = asked;
          DeviceBytes bytes;
          carve_device(spec, dt, d, nullptr, &bytes);
          const DeviceParts p = carve_device(spec, dt, d, mem.data(), nullptr);
          const bool inside = asked && shared && !tied;
          const std::string what = std::string(tied ? "tied" : "untied") + " " +
                                   std::string(dtype_name(dt)) + (asked ? " asked" : "") +
                                   (shared ? " shared" : "");
          EXPECT_EQ(p.slots_in_outer, inside) << what;
          const uint64_t own = dt == DType::kF32 ? round(uint64_t(n) * 4) * 2
                                                 : round(uint64_t(n) * 2) * 2;  // weights
          const uint64_t grads = round(uint64_t(n) * 4) * (shared ? 1 : 2);
          const uint64_t stages = dt == DType::kF32 ? 0 : 2 * weights;
          EXPECT_EQ(bytes.slots, own + (inside ? 0 : grads + stages)) << what;
          if (!inside) continue;
          const char* lo = reinterpret_cast<const char*>(p.outer_grads);
          const char* hi = lo + outer_grad_elems(spec) * 4;
          for (const auto& s : p.slots) {
            const char* g = reinterpret_cast<const char*>(s.grads);
            EXPECT_TRUE(g >= lo && g + n * 4 <= hi) << what;
            const char* st = static_cast<const char*>(s.stage);
            if (dt != DType::kF32) {
              EXPECT_TRUE(st >= lo && st + n * 2 <= hi) << what;
            }
          }
          EXPECT_NE(p.slots[0].grads, static_cast<void*>(p.slots[0].stage)) << what;
        }
      }
    }
  }
}

// The slots' buffers inside the outer unit's gradients change no result: the same bits as with
// memory of their own — losses, every weight — over windows 1-2, clipping off and biting, the
// embedding and head on the host and on the device (whose updates read that buffer).
TEST(Engine, SlotBuffersInsideTheOuterGradientsChangeNoResult) {
  const fs::path dir = tiny_model("inside_outer", "llama", false, 512);
  {  // they are inside: the slots take their weights alone
    auto be = make_cpu_backend();
    const ModelSpec spec = load_model_spec(dir);
    EngineOptions opt = run_options(2, 0.0f);
    const uint64_t inside = Engine(*be, spec, opt).plan().device.slots;
    opt.slots_in_outer = false;
    EXPECT_EQ(Engine(*be, spec, opt).plan().device.slots - inside,
              (uint64_t(layer_layout(spec, 0).numel) * 4 + 255) / 256 * 256);
  }
  for (float clip : {0.0f, 0.05f})
    for (int window : {1, 2})
      for (DeviceOptimizer dev : {DeviceOptimizer::kOff, DeviceOptimizer::kAll}) {
        EngineOptions opt = run_options(window, clip);
        opt.device_optimizer = dev;
        opt.slots_in_outer = false;
        const TrainRun apart = train(dir, opt, 4, /*whole=*/true);
        opt.slots_in_outer = true;
        const TrainRun inside = train(dir, opt, 4, /*whole=*/true);
        const std::string what = "clip " + std::to_string(clip) + " window " +
                                 std::to_string(window) +
                                 (dev == DeviceOptimizer::kAll ? " outer on the device" : "");
        EXPECT_EQ(inside.losses, apart.losses) << what;
        ASSERT_EQ(inside.weights.size(), apart.weights.size());
        for (size_t k = 0; k < apart.weights.size(); ++k)
          EXPECT_EQ(inside.weights[k], apart.weights[k]) << what << " tensor " << k;
        EXPECT_LT(apart.losses.back(), apart.losses.front()) << what;
      }
}

// --trace: the timeline has every stream's spans, the optimizer's and one summary per step;
// tracing changes no result.
TEST(Engine, TraceRecordsEveryStreamAndChangesNothing) {
  fs::path dir = tiny_model("trace", "llama", false);
  const fs::path file = fs::temp_directory_path() / "sf_engine_trace.json";
  fs::remove(file);
  TrainRun plain = train(dir, 2, 0.0f, 3);
  auto be = make_cpu_backend();
  ModelSpec spec = load_model_spec(dir);
  EngineOptions opt = run_options(2, 0.0f);
  opt.trace_path = file.string();
  Engine e(*be, spec, opt);
  load_model_weights(e, dir);
  std::vector<double> losses;
  for (int s = 0; s < 3; ++s)
    losses.push_back(e.step(random_batch(uint64_t(s % 2), spec.vocab, {13, 21, 7}), 1e-2f).loss);
  EXPECT_EQ(losses, plain.losses);
  const std::vector<std::string> summary = e.finish_trace();
  ASSERT_EQ(summary.size(), 3u);
  EXPECT_NE(summary[2].find("step 3: "), std::string::npos) << summary[2];
  EXPECT_NE(summary[2].find("GPU busy"), std::string::npos) << summary[2];
  std::ifstream f(file);
  ASSERT_TRUE(f) << file;
  const nlohmann::json j = nlohmann::json::parse(f);
  std::map<std::string, int> names;
  for (const auto& ev : j["traceEvents"]) {
    if (ev["ph"] != "X") continue;
    EXPECT_GE(ev["dur"].get<double>(), 0.0);
    std::string n = ev["name"];
    names[n.substr(0, n.find(' '))] += 1;
  }
  EXPECT_EQ(names["forward"], 3 * 5);  // 5 layers, 3 steps
  EXPECT_EQ(names["backward"], 3 * 5);
  EXPECT_EQ(names["checkpoint"], 3 * 5);
  EXPECT_EQ(names["restore"], 3 * 4);  // the last layer's input never leaves the device
  EXPECT_GE(names["load"], 3 * 5);
  EXPECT_EQ(names["gradient"], 3 * 7);  // embedding, 5 layers, head
  EXPECT_GE(names["AdamW"], 3 * 7);
  EXPECT_EQ(names["head"], 3);
  EXPECT_EQ(names["step"], 3);
}

// A run stopped after k steps, its state copied out and loaded into a fresh engine, continues with
// the same losses and weights as the uninterrupted run (the resume the trainer builds on).
TEST(Engine, StateRoundTripContinuesBitIdentically) {
  fs::path dir = tiny_model("resume", "llama", false);
  for (float clip : {0.0f, 1.0f}) {
    TrainRun whole = train(dir, 2, clip, 5);
    auto be = make_cpu_backend();
    ModelSpec spec = load_model_spec(dir);
    const EngineOptions opt = run_options(2, clip);
    std::vector<std::vector<float>> saved;  // master, m, v of every tensor
    std::vector<double> losses;
    {
      Engine e(*be, spec, opt);
      load_model_weights(e, dir);
      for (int s = 0; s < 3; ++s)
        losses.push_back(
            e.step(random_batch(uint64_t(s % 2), spec.vocab, {13, 21, 7}), 1e-2f).loss);
      e.visit_state([&](const TensorState& t) {
        const int64_t n = t.numel;
        saved.emplace_back(t.master, t.master + n);
        saved.emplace_back(t.m, t.m + n);
        saved.emplace_back(t.v, t.v + n);
      });
    }
    Engine e(*be, spec, opt);
    size_t k = 0;
    e.visit_state([&](const TensorState& t) {
      std::copy(saved[k].begin(), saved[k].end(), t.master);
      std::copy(saved[k + 1].begin(), saved[k + 1].end(), t.m);
      std::copy(saved[k + 2].begin(), saved[k + 2].end(), t.v);
      k += 3;
    });
    e.set_steps_done(3);
    for (int s = 3; s < 5; ++s)
      losses.push_back(e.step(random_batch(uint64_t(s % 2), spec.vocab, {13, 21, 7}), 1e-2f).loss);
    EXPECT_EQ(losses, whole.losses) << "clip " << clip;
    EXPECT_EQ(all_weights(e, 8), whole.weights) << "clip " << clip;
  }
}

// evaluate() is the step's forward: the same loss, and it changes nothing the next step sees.
TEST(Engine, EvaluateEqualsTheStepLossAndTouchesNoState) {
  fs::path dir = tiny_model("eval", "qwen3", true);
  TrainRun ref = train(dir, 2, 1.0f, 4);
  auto be = make_cpu_backend();
  ModelSpec spec = load_model_spec(dir);
  Engine e(*be, spec, run_options(2, 1.0f));
  load_model_weights(e, dir);
  std::vector<double> losses;
  for (int s = 0; s < 4; ++s) {
    Batch b = random_batch(uint64_t(s % 2), spec.vocab, {13, 21, 7});
    EvalResult ev = e.evaluate(b);
    EXPECT_EQ(ev.valid_targets, b.valid_targets());
    const double loss = e.step(b, 1e-2f).loss;
    EXPECT_NEAR(ev.loss_sum / double(ev.valid_targets), loss, 1e-6 * loss) << "step " << s;
    losses.push_back(loss);
  }
  EXPECT_EQ(losses, ref.losses);
}

}  // namespace
}  // namespace sf
