// The NVMe tier on the CPU backend, with its scratch file in a temporary directory: a run with the
// Adam m and v of some or all decoder layers on the disk, and the master weights of some of those,
// is bit-identical with the same run held in host memory — losses, every weight, with and without
// clipping (one that bites), tied and untied, window 1 and 2, gradients in many ring pieces — and
// so are evaluation, the state a checkpoint saves and a resume into either kind of run. The plan
// puts the m and v of the fewest bottom layers there that bring the host total within its limit,
// then, where that is not enough, their masters; a disk error mid-step stops the run naming the
// file.
#include <gtest/gtest.h>

#include <cerrno>

#include "../io/nvme_test_util.h"
#include "core/error.h"
#include "engine/host_check.h"
#include "engine/nvme_tier.h"
#include "engine/plan.h"
#include "engine_test_util.h"
#include "io/nvme_faults.h"
#include "io/nvme_store.h"

namespace sf {
namespace {

using namespace test_engine;

fs::path scratch_dir(const std::string& name) { return nvme_test::fresh_dir("engine_" + name); }

// The m and v of the bottom `layers` on the disk, and the masters of the bottom `masters` of them.
EngineOptions on_nvme(int window, float clip, int layers, const fs::path& dir, int masters = 0) {
  EngineOptions opt = run_options(window, clip);
  opt.nvme_dir = dir.string();
  opt.nvme_layers = layers;
  opt.nvme_masters = masters;
  opt.grad_piece = 1000;  // several ring pieces per layer
  return opt;
}

TEST(EngineNvme, IsBitIdenticalWithTheHostRun) {
  SF_SKIP_WITHOUT_IO_URING();
  const fs::path scratch = scratch_dir("identical");
  for (bool tied : {false, true}) {
    const fs::path dir = tiny_model(tied ? "nvme_tied" : "nvme_untied", "llama", tied);
    for (float clip : {0.0f, 1.0f, 0.05f})  // 0.05 bites: every update is scaled
      for (int window : {1, 2}) {
        EngineOptions host_opt = run_options(window, clip);
        host_opt.grad_piece = 1000;
        const TrainRun host = train(dir, host_opt, 4, /*whole=*/true);
        // m and v alone, everything, and some masters (every kind of unit in one run)
        for (auto [layers, masters] : {std::pair{3, 0}, {1, 1}, {5, 2}}) {
          const TrainRun disk =
              train(dir, on_nvme(window, clip, layers, scratch, masters), 4, true);
          EXPECT_EQ(disk.losses, host.losses) << "tied " << tied << " clip " << clip << " window "
                                              << window << " layers " << layers << "/" << masters;
          EXPECT_EQ(disk.weights, host.weights) << "tied " << tied << " clip " << clip << " window "
                                                << window << " layers " << layers << "/" << masters;
        }
        EXPECT_LT(host.losses.back(), host.losses.front());
      }
  }
  // The scratch file was unlinked at open: nothing is left behind.
  EXPECT_TRUE(fs::is_empty(scratch));
  fs::remove_all(scratch);
}

// Weights given to the constructor reach the NVMe units (m and v, and masters, on the disk) as
// init_weights's do.
TEST(EngineNvme, WeightsGivenToTheConstructorTrainAsInitWeights) {
  SF_SKIP_WITHOUT_IO_URING();
  const fs::path scratch = scratch_dir("ctor_weights");
  const fs::path dir = tiny_model("nvme_ctor_weights", "llama", false);
  for (float clip : {0.0f, 1.0f})
    for (auto [layers, masters] : {std::pair{3, 0}, {5, 2}}) {
      const EngineOptions opt = on_nvme(2, clip, layers, scratch, masters);
      const TrainRun after = train(dir, opt, 3, /*whole=*/true);
      const TrainRun given = train(dir, opt, 3, /*whole=*/true, /*at_construction=*/true);
      EXPECT_EQ(given.losses, after.losses) << "clip " << clip << " layers " << layers;
      EXPECT_EQ(given.weights, after.weights) << "clip " << clip << " layers " << layers;
    }
  fs::remove_all(scratch);
}

// GPU-resident layers and the NVMe tier in one run: nvme_layers counts the lowest layers whose
// state is on the host (the resident ones have none to move), and the run is the host run's bits.
TEST(EngineNvme, CountsTheLayersAboveTheGpuResidentOnes) {
  SF_SKIP_WITHOUT_IO_URING();
  const fs::path scratch = scratch_dir("resident");
  const fs::path dir = tiny_model("nvme_resident", "llama", false);
  const ModelSpec spec = load_model_spec(dir);
  EngineOptions host_opt = run_options(2, 0.0f);
  host_opt.grad_piece = 1000;
  const TrainRun host = train(dir, host_opt, 4, /*whole=*/true);
  EngineOptions opt = on_nvme(2, 0.0f, 2, scratch, 1);
  opt.on_device.assign(size_t(spec.layers) + 2, false);
  opt.on_device.front() = opt.on_device.back() = opt.on_device[1] = opt.on_device[2] = true;
  {
    auto be = make_cpu_backend();
    Engine e(*be, spec, opt);
    std::vector<bool> want(size_t(spec.layers) + 2, false);
    want[3] = want[4] = true;  // layers 2 and 3: the two lowest host layers
    EXPECT_EQ(e.plan().on_nvme, want);
    want[4] = false;
    EXPECT_EQ(e.plan().master_on_nvme, want);
  }
  const TrainRun mixed = train(dir, opt, 4, /*whole=*/true);
  EXPECT_EQ(mixed.losses, host.losses);
  EXPECT_EQ(mixed.weights, host.weights);
  EXPECT_TRUE(fs::is_empty(scratch));
  fs::remove_all(scratch);
}

// The activation checkpoints on NVMe, alone and with layers' state there: the same bits.
TEST(EngineNvme, CheckpointsOnDiskAreBitIdentical) {
  SF_SKIP_WITHOUT_IO_URING();
  const fs::path scratch = scratch_dir("ckpt");
  const fs::path dir = tiny_model("nvme_ckpt", "qwen3", false);
  for (float clip : {0.0f, 1.0f})
    for (int window : {1, 2}) {
      EngineOptions host_opt = run_options(window, clip);
      host_opt.grad_piece = 1000;
      const TrainRun host = train(dir, host_opt, 4, /*whole=*/true);
      for (int layers : {0, 2}) {
        EngineOptions o = on_nvme(window, clip, layers, scratch, layers / 2);
        o.nvme_checkpoints = 1;
        const TrainRun disk = train(dir, o, 4, /*whole=*/true);
        EXPECT_EQ(disk.losses, host.losses) << "clip " << clip << " window " << window;
        EXPECT_EQ(disk.weights, host.weights) << "clip " << clip << " window " << window;
      }
    }
  auto be = make_cpu_backend();
  const ModelSpec spec = load_model_spec(dir);
  EngineOptions o = on_nvme(2, 0.0f, 0, scratch);
  o.nvme_checkpoints = 1;
  Engine e(*be, spec, o);
  EXPECT_TRUE(e.plan().ckpt_on_nvme);
  EXPECT_EQ(e.plan().nvme_params, 0);
  EXPECT_LT(e.plan().host.checkpoints, uint64_t(spec.layers) * 64 * uint64_t(spec.hidden) * 4);
  EXPECT_NE(e.plan().describe().find("the activation checkpoints ("), std::string::npos)
      << e.plan().describe();
  EXPECT_TRUE(fs::is_empty(scratch));
  fs::remove_all(scratch);
}

TEST(EngineNvme, EvaluationGradientsAndPlanAgree) {
  SF_SKIP_WITHOUT_IO_URING();
  const fs::path scratch = scratch_dir("agree");
  const fs::path dir = tiny_model("nvme_agree", "qwen2", false);
  auto be = make_cpu_backend();
  const ModelSpec spec = load_model_spec(dir);
  Engine host(*be, spec, run_options(2, 1.0f));
  Engine disk(*be, spec, on_nvme(2, 1.0f, 2, scratch, 1));
  load_model_weights(host, dir);
  load_model_weights(disk, dir);
  const EnginePlan& p = disk.plan();
  EXPECT_EQ(p.on_nvme, (std::vector<bool>{false, true, true, false, false, false, false}));
  EXPECT_EQ(p.master_on_nvme, (std::vector<bool>{false, true, false, false, false, false, false}));
  const int64_t n0 = disk.layout(1).numel, n1 = disk.layout(2).numel;
  EXPECT_EQ(p.nvme_params, n0 + n1);
  EXPECT_EQ(p.nvme_master_params, n0);
  // Layer 0 entirely on the disk; layer 1's master stays on the host.
  EXPECT_EQ(host.plan().host.state - p.host.state,
            UnitState::state_bytes(n0) + UnitState::state_bytes(n1) - UnitState::master_bytes(n1));
  EXPECT_GT(p.host.nvme_staging, 0u);
  EXPECT_EQ(p.nvme_load_slots, 1);  // one master on disk
  EXPECT_GE(p.nvme_disk, uint64_t(n0) * 12 + uint64_t(n1) * 8);
  EXPECT_LT(p.nvme_disk, uint64_t(n0) * 12 + uint64_t(n1) * 8 + 5 * NvmeStore::kAlignment);
  // Per step: layer 0's master for the forward and the backward load (window 2 of 4 layers: not
  // still cached), m, v and the master for the update, all three written back; layer 1's m and v.
  EXPECT_EQ(p.nvme_read_bytes, 20.0 * double(n0) + 8.0 * double(n1));
  EXPECT_EQ(p.nvme_write_bytes, 12.0 * double(n0) + 8.0 * double(n1));
  EXPECT_NE(p.describe().find("the Adam m and v of layers 0-1 ("), std::string::npos)
      << p.describe();
  EXPECT_NE(p.describe().find("the master weights of layer 0 ("), std::string::npos)
      << p.describe();
  for (int s = 0; s < 3; ++s) {
    const Batch b = random_batch(uint64_t(s), spec.vocab, {13, 21, 7});
    const StepResult a = host.step(b, 1e-2f), c = disk.step(b, 1e-2f);
    EXPECT_EQ(a.loss, c.loss);
    EXPECT_EQ(a.grad_norm, c.grad_norm);
    const Batch e = random_batch(uint64_t(7 + s), spec.vocab, {9, 30});
    EXPECT_EQ(disk.evaluate(e).loss_sum, host.evaluate(e).loss_sum);
  }
  for (const char* name :
       {"model.layers.0.mlp.up_proj.weight", "model.layers.1.self_attn.q_proj.weight"})
    EXPECT_EQ(disk.gradient(name), host.gradient(name)) << name;
  const Batch b = random_batch(11, spec.vocab, {20});
  EXPECT_EQ(disk.logits(b), host.logits(b));
  fs::remove_all(scratch);
}

// Saving reads each tensor's state through visit_state (the callback's pointers) and again
// through `fetch` when the writer reaches it; resuming writes it back. Both ways round.
TEST(EngineNvme, StateRoundTripsThroughCheckpointsBothWays) {
  SF_SKIP_WITHOUT_IO_URING();
  const fs::path scratch = scratch_dir("roundtrip");
  const fs::path dir = tiny_model("nvme_resume", "mistral", false);
  const TrainRun whole = train(dir, run_options(2, 0.0f), 5, /*whole=*/true);
  auto be = make_cpu_backend();
  const ModelSpec spec = load_model_spec(dir);
  for (bool from_disk : {true, false}) {
    std::vector<std::vector<float>> saved;
    std::vector<double> losses;
    {
      EngineOptions o = from_disk ? on_nvme(2, 0.0f, 4, scratch, 2) : run_options(2, 0.0f);
      o.state_piece = 1000;  // `fetch` hands every tensor over in pieces, most with a remainder
      Engine e(*be, spec, o);
      load_model_weights(e, dir);
      for (int s = 0; s < 3; ++s)
        losses.push_back(
            e.step(random_batch(uint64_t(s % 2), spec.vocab, {13, 21, 7}), 1e-2f).loss);
      e.visit_state([&](const TensorState& t) {
        for (const float* a : {t.master, t.m, t.v}) saved.emplace_back(a, a + t.numel);
        if (t.fetch) {  // what a checkpoint writer reads later equals the callback's values
          const size_t at = saved.size() - 3;
          for (int part = 0; part < 3; ++part)
            t.fetch(part, [&](const float* values, int64_t begin, int64_t count) {
              EXPECT_TRUE(std::equal(values, values + count,
                                     saved[at + size_t(part)].begin() + begin));
            });
        }
      });
      // A save's read-only visit: the same values, through `fetch` where the tensor is on disk.
      size_t k = 0;
      e.visit_state_read([&](const TensorState& t) {
        const float* direct[3] = {t.master, t.m, t.v};
        for (int part = 0; part < 3; ++part) {
          int64_t seen = 0;
          auto check = [&](const float* values, int64_t begin, int64_t count) {
            EXPECT_EQ(begin, seen);
            seen += count;
            EXPECT_TRUE(
                std::equal(values, values + count, saved[k + size_t(part)].begin() + begin));
          };
          if (t.fetch) {
            EXPECT_EQ(direct[part], nullptr);
            t.fetch(part, check);
          } else {
            check(direct[part], 0, t.numel);
          }
          EXPECT_EQ(seen, t.numel);
        }
        k += 3;
      });
      EXPECT_EQ(k, saved.size());
    }
    Engine e(*be, spec, from_disk ? run_options(2, 0.0f) : on_nvme(2, 0.0f, 5, scratch, 3));
    load_state(e, saved, 3);
    for (int s = 3; s < 5; ++s)
      losses.push_back(e.step(random_batch(uint64_t(s % 2), spec.vocab, {13, 21, 7}), 1e-2f).loss);
    EXPECT_EQ(losses, whole.losses) << "from disk " << from_disk;
    EXPECT_EQ(all_weights(e), whole.weights) << "from disk " << from_disk;
  }
  fs::remove_all(scratch);
}

TEST(EngineNvme, PlanTakesTheFewestBottomLayersTheHostLimitNeeds) {
  const fs::path dir = tiny_model("nvme_plan", "llama", false);
  PlanRequest r;
  r.spec = load_model_spec(dir);
  r.spec.layers = 24;  // enough layers that the disk frees more than its staging slots take
  r.max_tokens = 64;
  r.max_sequences = 4;
  r.grad_piece = 1000;
  const EnginePlan all_host = make_plan(r);
  EXPECT_EQ(all_host.nvme_params, 0);
  r.nvme = true;
  EXPECT_EQ(make_plan(r).nvme_params, 0) << "no limit: nothing needs the disk";
  EXPECT_FALSE(make_plan(r).ckpt_on_nvme);
  r.nvme_checkpoints = 0;  // the layers' m and v alone, as the rest of this test checks
  r.nvme_masters = 0;
  // The limit twelve layers on the disk meet (the staging slots cost some of what they free).
  r.nvme_layers = 12;
  const EnginePlan four = make_plan(r);
  ASSERT_LT(four.host.total(), all_host.host.total());
  r.nvme_layers = -1;
  r.host_limit = four.host.total() + host_margin(four.host.total());
  const EnginePlan p = make_plan(r);
  ASSERT_GT(p.nvme_params, 0);
  EXPECT_LE(p.host.total() + host_margin(p.host.total()), r.host_limit);
  int n = 0;
  while (p.on_nvme[size_t(1 + n)]) ++n;  // contiguous from layer 0
  EXPECT_LE(n, 12);
  for (size_t k = size_t(1 + n); k < p.on_nvme.size(); ++k) EXPECT_FALSE(p.on_nvme[k]) << k;
  r.nvme_layers = n - 1;  // one fewer does not fit
  const EnginePlan fewer = make_plan(r);
  EXPECT_GT(fewer.host.total() + host_margin(fewer.host.total()), r.host_limit);
  // Without clipping an NVMe layer is never held (its state is staged only while updated); with
  // clipping it keeps its gradient on the host like every unit.
  r.nvme_layers = 24;
  r.held_units = 1000;
  const EnginePlan every = make_plan(r);
  for (size_t k = 1; k <= 24; ++k) EXPECT_FALSE(every.held[k]) << k;
  EXPECT_TRUE(every.held.back());
  EXPECT_EQ(every.nvme_read_bytes, every.nvme_write_bytes);  // m and v alone: read, written
  EXPECT_EQ(every.nvme_master_params, 0);
  r.clipping = true;
  for (bool h : make_plan(r).held) EXPECT_TRUE(h);
  // Auto: where the checkpoints on disk are enough, no layer's state goes there. (No held share
  // here: the plan's own would go first, Plan.DropsItsHeldShareBeforeTheHostLimitRefuses.)
  r.clipping = false;
  r.nvme_layers = -1;
  r.held_units = 0;
  r.nvme_checkpoints = 1;
  r.host_limit = 0;
  const EnginePlan ckpt = make_plan(r);
  ASSERT_EQ(ckpt.nvme_params, 0);
  r.nvme_checkpoints = -1;
  r.host_limit = ckpt.host.total() + host_margin(ckpt.host.total());
  const EnginePlan chosen = make_plan(r);
  EXPECT_TRUE(chosen.ckpt_on_nvme);
  EXPECT_EQ(chosen.nvme_params, 0);
  r.nvme_layers = 25;
  EXPECT_THROW(make_plan(r), Error);
}

// Where every layer's m and v on the disk do not bring the host within its limit, the fewest
// bottom layers' masters go too; m and v first because they free 8 B/param for 16 B of traffic a
// step where a master frees 4 B for 12-16 B. A number of masters asked for is taken as asked.
TEST(EngineNvme, PlanMovesEveryLayersMomentsBeforeAnyMaster) {
  const fs::path dir = tiny_model("nvme_masters_plan", "llama", false);
  PlanRequest r;
  r.spec = load_model_spec(dir);
  r.spec.layers = 24;
  r.max_tokens = 64;
  r.max_sequences = 4;
  r.grad_piece = 1000;
  r.nvme = true;
  r.nvme_checkpoints = 0;
  r.held_units = 0;
  const int64_t n = layer_layout(r.spec, 0).numel;
  r.nvme_layers = 24;
  r.nvme_masters = 0;
  const EnginePlan moments = make_plan(r);
  EXPECT_EQ(moments.nvme_params, 24 * n);
  EXPECT_EQ(moments.nvme_load_slots, 0);
  EXPECT_EQ(moments.nvme_read_bytes, 24 * 8.0 * double(n));
  EXPECT_EQ(moments.nvme_write_bytes, 24 * 8.0 * double(n));
  r.nvme_masters = 8;
  const EnginePlan eight = make_plan(r);
  EXPECT_EQ(eight.nvme_master_params, 8 * n);
  EXPECT_EQ(moments.host.state - eight.host.state, 8 * UnitState::master_bytes(n));
  EXPECT_GT(eight.nvme_disk, moments.nvme_disk);
  // Window 2 of 24 layers: the bottom 8 are reloaded for the backward, so each of their masters
  // is read three times (two loads and the update) and written once.
  EXPECT_EQ(eight.nvme_read_bytes, 16 * 8.0 * double(n) + 8 * 20.0 * double(n));
  EXPECT_EQ(eight.nvme_write_bytes, 16 * 8.0 * double(n) + 8 * 12.0 * double(n));
  // The plan's choice under the limit eight masters meet: every layer's m and v, then the fewest
  // masters from the bottom.
  r.nvme_layers = r.nvme_masters = -1;
  r.host_limit = eight.host.total() + host_margin(eight.host.total());
  const EnginePlan p = make_plan(r);
  EXPECT_EQ(p.nvme_params, 24 * n);
  int m = 0;
  while (p.master_on_nvme[size_t(1 + m)]) ++m;
  EXPECT_GE(m, 1);
  EXPECT_LE(m, 8);
  EXPECT_EQ(p.nvme_master_params, m * n);  // contiguous from layer 0
  EXPECT_LE(p.host.total() + host_margin(p.host.total()), r.host_limit);
  r.nvme_layers = 24;
  r.nvme_masters = m - 1;  // one fewer does not fit
  const EnginePlan fewer = make_plan(r);
  EXPECT_GT(fewer.host.total() + host_margin(fewer.host.total()), r.host_limit);
  // A limit the m and v of some layers meet takes no master.
  r.nvme_layers = r.nvme_masters = -1;
  r.host_limit = moments.host.total() + host_margin(moments.host.total()) + 4 * 8 * uint64_t(n);
  const EnginePlan some = make_plan(r);
  EXPECT_GT(some.nvme_params, 0);
  EXPECT_LT(some.nvme_params, 24 * n);
  EXPECT_EQ(some.nvme_master_params, 0);
  // Masters asked for with the layers the plan's: at most as many as the layers on the disk.
  r.nvme_masters = 2;
  const EnginePlan asked = make_plan(r);
  EXPECT_EQ(asked.nvme_master_params, 2 * n);
  r.nvme_layers = 1;
  EXPECT_THROW(make_plan(r), Error);  // more masters than layers on the disk
  r.nvme_layers = -1;
  r.nvme_masters = 25;
  EXPECT_THROW(make_plan(r), Error);
}

TEST(EngineNvme, ADiskErrorStopsTheRunNamingTheFile) {
  SF_SKIP_WITHOUT_IO_URING();
  const fs::path scratch = scratch_dir("fault");
  const fs::path dir = tiny_model("nvme_fault", "llama", false);
  auto be = make_cpu_backend();
  const ModelSpec spec = load_model_spec(dir);
  // Masters on the disk: a load's read, an update's read, a write-back; m and v alone: an
  // update's read, a write-back.
  for (auto [masters, nth] : {std::pair{5, 0}, {5, 3}, {5, 9}, {0, 0}, {0, 6}}) {
    Engine e(*be, spec, on_nvme(2, 0.0f, 5, scratch, masters));
    load_model_weights(e, dir);
    inject_completion_result(nth, -EIO);
    std::string message;
    try {
      for (int s = 0; s < 4; ++s) e.step(random_batch(uint64_t(s), spec.vocab, {13, 21, 7}), 1e-2f);
      e.visit_weights([](const TensorDesc&, int64_t, int64_t, const float*) {});
    } catch (const Error& err) {
      message = err.what();
    }
    inject_completion_result(-1, 0);
    EXPECT_NE(message.find("slideformer-nvme-"), std::string::npos) << nth << ": " << message;
    EXPECT_NE(message.find("Input/output error"), std::string::npos) << message;
    EXPECT_NE(message.find("resume from the last checkpoint"), std::string::npos) << message;
  }
  fs::remove_all(scratch);
}

}  // namespace
}  // namespace sf
