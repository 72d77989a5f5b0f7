// The NVMe tier on the CPU backend, with its scratch file in a temporary directory: a run with the
// state of some or all decoder layers on the disk is bit-identical with the same run held in host
// memory — losses, every weight, with and without clipping (one that bites), tied and untied,
// window 1 and 2, gradients in many ring pieces — and so are evaluation, the state a checkpoint
// saves and a resume into either kind of run. The plan puts the fewest bottom layers there that
// bring the host total within its limit; a disk error mid-step stops the run naming the file.
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

EngineOptions on_nvme(int window, float clip, int layers, const fs::path& dir) {
  EngineOptions opt = run_options(window, clip);
  opt.nvme_dir = dir.string();
  opt.nvme_layers = layers;
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
        for (int layers : {1, 3, 5}) {
          const TrainRun disk = train(dir, on_nvme(window, clip, layers, scratch), 4, true);
          EXPECT_EQ(disk.losses, host.losses) << "tied " << tied << " clip " << clip << " window "
                                              << window << " layers " << layers;
          EXPECT_EQ(disk.weights, host.weights) << "tied " << tied << " clip " << clip << " window "
                                                << window << " layers " << layers;
        }
        EXPECT_LT(host.losses.back(), host.losses.front());
      }
  }
  // The scratch file was unlinked at open: nothing is left behind.
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
        EngineOptions o = on_nvme(window, clip, layers, scratch);
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
  Engine disk(*be, spec, on_nvme(2, 1.0f, 2, scratch));
  load_model_weights(host, dir);
  load_model_weights(disk, dir);
  const EnginePlan& p = disk.plan();
  EXPECT_EQ(p.on_nvme, (std::vector<bool>{false, true, true, false, false, false, false}));
  EXPECT_EQ(p.nvme_params, disk.layout(1).numel + disk.layout(2).numel);
  EXPECT_EQ(
      host.plan().host.state - p.host.state,
      UnitState::state_bytes(disk.layout(1).numel) + UnitState::state_bytes(disk.layout(2).numel));
  EXPECT_GT(p.host.nvme_staging, 0u);
  EXPECT_GE(p.nvme_disk, uint64_t(p.nvme_params) * 12);
  EXPECT_NE(p.describe().find("the state of layers 0-1 ("), std::string::npos) << p.describe();
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
      EngineOptions o = from_disk ? on_nvme(2, 0.0f, 4, scratch) : run_options(2, 0.0f);
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
    Engine e(*be, spec, from_disk ? run_options(2, 0.0f) : on_nvme(2, 0.0f, 5, scratch));
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
  r.nvme_checkpoints = 0;  // the layers' state alone, as the rest of this test checks
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
  EXPECT_GT(every.nvme_read_bytes, every.nvme_write_bytes);
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

TEST(EngineNvme, ADiskErrorStopsTheRunNamingTheFile) {
  SF_SKIP_WITHOUT_IO_URING();
  const fs::path scratch = scratch_dir("fault");
  const fs::path dir = tiny_model("nvme_fault", "llama", false);
  auto be = make_cpu_backend();
  const ModelSpec spec = load_model_spec(dir);
  for (int nth : {0, 3, 9}) {  // a load's read, an update's read, a write-back
    Engine e(*be, spec, on_nvme(2, 0.0f, 5, scratch));
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
