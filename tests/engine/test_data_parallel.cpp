// Data parallel on the CPU backend, with simulated devices (one CPU backend each) and the peer
// collective: N engines on their shares of every step give the single-device run's losses,
// weights and optimizer state bit for bit, where the single device cuts its step into the same
// micro-batches as the devices' shares (each device's gradient is then one micro-batch's, and the
// reduction adds them in the order the single device accumulates them). With other cuts the
// sums are regrouped: equal to fp32 rounding. Also: evaluation, the split of a step into shares,
// the refusals, and a collective whose other rank never arrives.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "backend/collective.h"
#include "core/error.h"
#include "engine/plan.h"
#include "engine_test_util.h"
#include "model/layout.h"

namespace sf {
namespace {

using namespace test_engine;

// Samples of the given lengths, two draws taking turns (step 3 sees step 1's again: its loss
// shows the training).
std::vector<Batch> batches(int steps, int64_t vocab, const std::vector<int>& lengths) {
  std::vector<Batch> out;
  for (int s = 0; s < steps; ++s)
    out.push_back(random_batch(uint64_t(100 + s % 2), vocab, lengths));
  return out;
}

struct DpRun {
  std::vector<double> losses, norms;
  std::vector<std::vector<float>> state;  // every tensor's master, m, v after the steps
  double eval_loss = 0;
};

// `devices` CPU backends, one engine each; opt's max_tokens/max_sequences are per device.
DpRun train_on(const fs::path& dir, EngineOptions opt, int devices, const std::vector<Batch>& steps,
               const Batch& eval) {
  std::vector<std::unique_ptr<Backend>> bes;
  std::vector<Backend*> ptr;
  for (int d = 0; d < devices; ++d) {
    bes.push_back(make_cpu_backend());
    ptr.push_back(bes.back().get());
  }
  // A small tile: the reduction of every unit goes through it in several pieces.
  std::unique_ptr<Collective> coll = make_peer_collective(ptr, 4096);
  if (devices > 1) {
    opt.data_parallel.assign(ptr.begin() + 1, ptr.end());
    opt.collective = coll.get();
  }
  const ModelSpec spec = load_model_spec(dir);
  Engine e(*ptr[0], spec, opt);
  EXPECT_EQ(e.devices(), devices);
  load_model_weights(e, dir);
  DpRun r;
  for (const Batch& b : steps) {
    const StepResult s = e.step(b, 1e-2f);
    r.losses.push_back(s.loss);
    r.norms.push_back(s.grad_norm);
  }
  const EvalResult ev = e.evaluate(eval);
  r.eval_loss = ev.loss_sum / double(ev.valid_targets);
  r.state = copy_state(e);
  return r;
}

TEST(DataParallel, IsBitIdenticalWithOneDeviceOfTheSameMicroBatches) {
  const int kLen = 11;  // every sample: a device's share is a whole number of them
  for (const char* arch : {"llama", "qwen3"}) {
    const fs::path dir = tiny_model(std::string("dp_") + arch, arch, false);
    const ModelSpec spec = load_model_spec(dir);
    for (int devices : {2, 3}) {
      const int per_device = 6 / devices;
      const std::vector<Batch> steps = batches(3, spec.vocab, std::vector<int>(6, kLen));
      const Batch eval = random_batch(7, spec.vocab, std::vector<int>(6, kLen));
      for (float clip : {0.0f, 1.0f, 0.05f})  // 0.05 bites: every update is scaled
        for (int window : {1, 2}) {
          EngineOptions one = run_options(window, clip);
          one.max_tokens = 6 * kLen;
          one.max_sequences = 6;
          one.micro_tokens = per_device * kLen;  // the devices' shares, one after the other
          one.grad_piece = 500;
          EngineOptions each = one;
          each.max_tokens = per_device * kLen;
          each.max_sequences = per_device;
          each.micro_tokens = 0;
          const DpRun single = train_on(dir, one, 1, steps, eval);
          const DpRun dp = train_on(dir, each, devices, steps, eval);
          const std::string what =
              str_cat(arch, ", ", devices, " devices, clip ", clip, ", window ", window);
          EXPECT_EQ(dp.losses, single.losses) << what;
          EXPECT_EQ(dp.norms, single.norms) << what;
          EXPECT_EQ(dp.eval_loss, single.eval_loss) << what;
          EXPECT_TRUE(dp.state == single.state) << what << ": weights or Adam state differ";
          EXPECT_LT(single.losses.back(), single.losses.front()) << what;
        }
    }
  }
}

// Samples of several lengths, shares of equal counts or of equal tokens (packing), tied
// embeddings: the shares are not the single device's micro-batches (and a tied head's gradient
// meets the embedding's in another order), so the sums are regrouped — equal to fp32 rounding, step
// after step.
TEST(DataParallel, MatchesOneDeviceToRoundingWithUnevenSamples) {
  const std::vector<int> lengths = {13, 21, 7, 9, 17, 5, 12};
  for (bool tied : {false, true}) {
    const fs::path dir = tiny_model(tied ? "dp_uneven_tied" : "dp_uneven", "qwen2", tied);
    const ModelSpec spec = load_model_spec(dir);
    const std::vector<Batch> steps = batches(3, spec.vocab, lengths);
    const Batch eval = random_batch(9, spec.vocab, lengths);
    for (float clip : {0.0f, 1.0f}) {
      EngineOptions one = run_options(2, clip);
      one.max_tokens = 84;
      one.max_sequences = 7;
      const DpRun single = train_on(dir, one, 1, steps, eval);
      for (bool balance : {false, true})
        for (int devices : {2, 3}) {
          EngineOptions each = one;
          // The largest share: of equal counts, 9+17+5+12 = 43 tokens; of equal tokens (packing),
          // at most 84/2 + 21 (50 here).
          each.max_tokens = balance ? 64 : 60;
          each.max_sequences = balance ? 6 : 5;
          each.balance_tokens = balance;
          const DpRun dp = train_on(dir, each, devices, steps, eval);
          const std::string what = str_cat("tied ", tied, ", clip ", clip, ", ", devices,
                                           " devices, balanced tokens ", balance);
          ASSERT_EQ(dp.losses.size(), single.losses.size());
          for (size_t s = 0; s < dp.losses.size(); ++s) {
            EXPECT_NEAR(dp.losses[s], single.losses[s], 1e-5 * std::abs(single.losses[s])) << what;
            EXPECT_NEAR(dp.norms[s], single.norms[s], 1e-4 * single.norms[s]) << what;
          }
          EXPECT_NEAR(dp.eval_loss, single.eval_loss, 1e-5 * single.eval_loss) << what;
          double worst = 0;
          for (size_t t = 0; t < single.state.size(); t += 3)  // master weights
            for (size_t i = 0; i < single.state[t].size(); ++i)
              worst = std::max(worst, double(std::abs(dp.state[t][i] - single.state[t][i])));
          // lr 1e-2, 3 steps: a weight moves ~3e-2; regrouped fp32 sums move it ~1e-6 at most.
          EXPECT_LT(worst, 2e-5) << what;
        }
    }
  }
}

TEST(DataParallel, RefusesWhatItCannotRun) {
  const fs::path dir = tiny_model("dp_refuse", "llama", false);
  const ModelSpec spec = load_model_spec(dir);
  auto b0 = make_cpu_backend(), b1 = make_cpu_backend();
  std::unique_ptr<Collective> coll = make_peer_collective({b0.get(), b1.get()});
  EngineOptions opt = run_options(2, 0);
  opt.max_tokens = 32;
  opt.max_sequences = 2;
  opt.data_parallel = {b1.get()};
  opt.collective = coll.get();
  {
    Engine e(*b0, spec, opt);
    load_model_weights(e, dir);
    // One sample for two devices.
    try {
      e.step(random_batch(1, spec.vocab, {20}), 1e-2f);
      FAIL() << "a step of one sample ran on two devices";
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find("cannot feed 2 GPUs"), std::string::npos)
          << err.what();
    }
    // A share past the per-device plan (two samples each: 20 + 20 tokens on device 1, 32
    // planned).
    try {
      e.step(random_batch(1, spec.vocab, {20, 5, 20, 20}), 1e-2f);
      FAIL() << "a share over the plan ran";
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find("GPU 1's share"), std::string::npos) << err.what();
    }
    // The refusals left the engine usable.
    EXPECT_TRUE(std::isfinite(e.step(random_batch(2, spec.vocab, {20, 12}), 1e-2f).loss));
  }
  EngineOptions nvme = opt;
  nvme.nvme_dir = fs::temp_directory_path().string();
  EXPECT_THROW(Engine(*b0, spec, nvme), Error);
  EngineOptions dev = opt;
  dev.device_optimizer = DeviceOptimizer::kAll;
  EXPECT_THROW(Engine(*b0, spec, dev), Error);
  EngineOptions no_coll = opt;
  no_coll.collective = nullptr;
  EXPECT_THROW(Engine(*b0, spec, no_coll), Error);
}

// The root's sum is rank order, through a tile smaller than the tensor; the others' tensors are
// left as they were.
TEST(PeerCollective, SumsIntoTheRootInRankOrder) {
  const int64_t n = 5000;  // tiles of 1024 floats: five pieces
  std::vector<std::unique_ptr<Backend>> bes;
  std::vector<Backend*> ptr;
  for (int r = 0; r < 3; ++r) {
    bes.push_back(make_cpu_backend());
    ptr.push_back(bes.back().get());
  }
  std::unique_ptr<Collective> coll = make_peer_collective(ptr, 4096);
  std::vector<std::vector<float>> x(3, std::vector<float>(size_t(n)));
  for (int r = 0; r < 3; ++r)
    for (int64_t i = 0; i < n; ++i) x[size_t(r)][size_t(i)] = float(std::sin(double(i * (r + 1))));
  const std::vector<std::vector<float>> before = x;
  for (int root : {1, 0}) {
    x = before;
    std::vector<std::thread> threads;
    for (int r = 0; r < 3; ++r)
      threads.emplace_back([&, r] {
        auto s = ptr[size_t(r)]->create_stream("reduce");
        coll->reduce_sum(r, Tensor(x[size_t(r)].data(), DType::kF32, {n}), root, *s);
        ptr[size_t(r)]->synchronize(*s);
      });
    for (auto& t : threads) t.join();
    for (int64_t i = 0; i < n; ++i) {
      float want = before[size_t(root)][size_t(i)];
      for (int r = 0; r < 3; ++r)
        if (r != root) want += before[size_t(r)][size_t(i)];
      ASSERT_EQ(x[size_t(root)][size_t(i)], want) << "root " << root << ", element " << i;
    }
    for (int r = 0; r < 3; ++r)
      if (r != root) {
        EXPECT_EQ(x[size_t(r)], before[size_t(r)]);
      }
  }
}

// A rank whose peer never arrives (its thread failed) is woken by abort and throws: no hang.
TEST(PeerCollective, AbortWakesARankWaitingForAPeer) {
  auto b0 = make_cpu_backend(), b1 = make_cpu_backend();
  std::unique_ptr<Collective> coll = make_peer_collective({b0.get(), b1.get()}, 4096);
  std::vector<float> x(100, 1.0f);
  auto s = b0->create_stream("reduce");
  std::string error;
  std::thread waiter([&] {
    try {
      coll->reduce_sum(0, Tensor(x.data(), DType::kF32, {100}), 0, *s);
    } catch (const Error& e) {
      error = e.what();
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  coll->abort("GPU 1 failed");
  waiter.join();
  EXPECT_NE(error.find("GPU 1 failed"), std::string::npos) << error;
  EXPECT_THROW(coll->reduce_sum(0, Tensor(x.data(), DType::kF32, {100}), 0, *s), Error);
}

}  // namespace
}  // namespace sf

namespace sf {
namespace {

// The plan of N devices: each device's figures are one device's; the host holds one copy of the
// state and the gradients, and each device's checkpoints and batch staging (issue 16: no more
// than the single-GPU run plus the extra checkpoints).
TEST(DataParallel, HostPlanIsOneStatePlusEachDevicesCheckpoints) {
  const fs::path dir = tiny_model("dp_plan", "llama", false);
  PlanRequest r;
  r.spec = load_model_spec(dir);
  r.max_tokens = 64;
  r.max_sequences = 4;
  r.window = 2;
  const EnginePlan one = make_plan(r);
  for (int n : {2, 4}) {
    r.devices = n;
    const EnginePlan many = make_plan(r);
    // Each device's is one device's, but for a fp32 gradient buffer per cache slot (one device's
    // slots share one: the reduction reads a slot's while the next layer's backward runs).
    const uint64_t slot_grads =
        (uint64_t(layer_layout(r.spec, 0).numel) * 4 + 255) / 256 * 256 * uint64_t(r.window - 1);
    EXPECT_EQ(many.device.engine(), one.device.engine() + slot_grads);
    EXPECT_EQ(many.host.state, one.host.state);
    EXPECT_EQ(many.host.grads, one.host.grads);
    EXPECT_EQ(many.host.checkpoints, uint64_t(n) * one.host.checkpoints);
    EXPECT_EQ(many.host.staging, uint64_t(n) * one.host.staging);
    EXPECT_EQ(many.host.total() - one.host.total(),
              uint64_t(n - 1) * (one.host.checkpoints + one.host.staging));
    EXPECT_NE(many.describe().find("on each of " + std::to_string(n) + " GPUs"), std::string::npos);
  }
  r.devices = 2;
  r.device_optimizer = DeviceOptimizer::kAll;
  EXPECT_THROW(make_plan(r), Error);
}

}  // namespace
}  // namespace sf
