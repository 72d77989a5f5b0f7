// The schedule of `slideformer train`: epochs or max_steps, gradient accumulation normalised over
// every valid token of the optimizer step (transformers >= 4.46), warmup_ratio, the cosine floor,
// and steps per epoch / the current epoch in the log and metrics.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "backend/cpu/cpu_backend.h"
#include "data/pipeline.h"
#include "engine/engine.h"
#include "model/spec.h"
#include "train/checkpoint.h"
#include "train/data.h"
#include "train/trainer.h"
#include "train_test_util.h"

namespace sf {
namespace {

using namespace sf::testing;

TrainConfig base_config(const fs::path& d) {
  TrainConfig c;
  c.model_dir = tiny_model(d);
  c.data = token_dataset(d / "data.jsonl", 10);
  c.output_dir = d / "out";
  c.cutoff_len = 16;
  c.lr = 1e-3f;
  c.cache = false;
  return c;
}

// One optimizer step of 2 accumulated micro-batches of 1 sample: its loss is the sum of both
// samples' token losses over all their valid tokens — not the mean of the two micro-batch means.
TEST(TrainSchedule, AccumulationNormalisesOverAllTokensOfTheStep) {
  const fs::path d = fresh_dir("accum");
  TrainConfig c = base_config(d);
  c.steps = 1;
  c.batch_size = 1;
  c.grad_accum = 2;
  c.no_save = true;
  c.output_dir.clear();
  std::ostringstream log;
  const TrainSummary s = run_training(c, log);
  ASSERT_EQ(s.losses.size(), 1u);

  // The same two samples evaluated one by one on the initial weights.
  const std::vector<Sample> samples = token_samples(c.data, 16);
  const ModelSpec spec = load_model_spec(c.model_dir);
  auto backend = make_cpu_backend();
  EngineOptions opt;
  opt.max_tokens = 64;
  opt.max_sequences = 2;
  Engine engine(*backend, spec, opt);
  load_model_weights(engine, c.model_dir);
  const EvalResult a = engine.evaluate(pack_samples({&samples[0]}));
  const EvalResult b = engine.evaluate(pack_samples({&samples[1]}));
  ASSERT_NE(a.valid_targets, b.valid_targets);  // uneven lengths make the two means differ
  const double token_mean = (a.loss_sum + b.loss_sum) / double(a.valid_targets + b.valid_targets);
  const double mean_of_means =
      0.5 * (a.loss_sum / double(a.valid_targets) + b.loss_sum / double(b.valid_targets));
  EXPECT_NEAR(s.losses[0], token_mean, 1e-5 * token_mean);
  EXPECT_GT(std::fabs(token_mean - mean_of_means), 1e-3);

  // batch 1 × accumulation 2 is the very step of batch 2 × accumulation 1.
  c.batch_size = 2;
  c.grad_accum = 1;
  c.steps = 3;
  const TrainSummary big = run_training(c, log);
  c.batch_size = 1;
  c.grad_accum = 2;
  const TrainSummary accum = run_training(c, log);
  EXPECT_EQ(big.losses, accum.losses);
}

TEST(TrainSchedule, EpochsWarmupRatioAndCosineFloor) {
  const fs::path d = fresh_dir("epochs");
  TrainConfig c = base_config(d);
  c.num_train_epochs = 2;  // 10 samples, 2 × 2 per step: 3 steps per epoch (the last one of 2)
  c.batch_size = 2;
  c.grad_accum = 2;
  c.schedule = "cosine";
  c.warmup_ratio = 0.1;  // ceil(0.6) = 1 warmup step
  c.min_lr_ratio = 0.25f;
  std::ostringstream log;
  const TrainSummary s = run_training(c, log);
  EXPECT_EQ(s.steps_per_epoch, 3);
  EXPECT_EQ(s.total_steps, 6);
  EXPECT_EQ(s.steps, 6);
  EXPECT_NE(log.str().find("3 steps per epoch (2 × 2 accumulated), 6 steps (2 epochs)"),
            std::string::npos)
      << log.str();
  EXPECT_NE(log.str().find("step 6/6  loss "), std::string::npos) << log.str();
  EXPECT_NE(log.str().find("epoch 2.00/2.00"), std::string::npos) << log.str();
  const auto m = read_metrics(c.output_dir / "metrics.jsonl");
  ASSERT_EQ(m.size(), 6u);
  // step 1: warmup from 0; then cosine over 5 steps, floored at 0.25 × lr.
  EXPECT_EQ(m[0]["learning_rate"].get<double>(), 0.0);
  EXPECT_EQ(m[1]["learning_rate"].get<double>(), double(1e-3f));
  for (int k = 2; k <= 5; ++k) {
    const double progress = double(k - 1) / 5.0;
    const double f = std::max(0.25, 0.5 * (1 + std::cos(M_PI * progress)));
    EXPECT_EQ(m[size_t(k)]["learning_rate"].get<double>(), double(float(double(1e-3f) * f)))
        << "step " << k + 1;
  }
  EXPECT_EQ(m[5]["learning_rate"].get<double>(), double(float(double(1e-3f) * 0.25)));
  // Epochs as transformers logs them: fractional, 1.0 at the end of the first.
  EXPECT_NEAR(m[0]["epoch"].get<double>(), 0.4, 1e-12);
  EXPECT_NEAR(m[2]["epoch"].get<double>(), 1.0, 1e-12);
  EXPECT_NEAR(m[5]["epoch"].get<double>(), 2.0, 1e-12);
  for (const auto& line : m) {
    EXPECT_TRUE(line.contains("loss") && line.contains("grad_norm") && line.contains("step"));
    EXPECT_GT(line["num_tokens"].get<int64_t>(), 0);
  }
  // The last step of an epoch takes the 2 samples left (lengths 4 and 11), not 4 samples.
  EXPECT_EQ(m[2]["num_tokens"].get<int64_t>(), 15);
  EXPECT_EQ(m[5]["num_tokens"].get<int64_t>(), 15);
}

TEST(TrainSchedule, MaxStepsWinsOverEpochs) {
  const fs::path d = fresh_dir("maxsteps");
  TrainConfig c = base_config(d);
  c.steps = 4;
  c.num_train_epochs = 100;
  c.batch_size = 4;
  std::ostringstream log;
  const TrainSummary s = run_training(c, log);
  EXPECT_EQ(s.total_steps, 4);
  EXPECT_EQ(s.steps_per_epoch, 3);
  EXPECT_EQ(s.losses.size(), 4u);
  // The epoch shown never passes its total: 4 steps of an epoch of 3 are 4/3 epochs.
  EXPECT_NE(log.str().find("3 steps per epoch (4 × 1 accumulated), 4 steps (1.33333 epochs)"),
            std::string::npos)
      << log.str();
  EXPECT_NE(log.str().find("step 4/4  loss "), std::string::npos) << log.str();
  EXPECT_NE(log.str().find("epoch 1.33/1.33"), std::string::npos) << log.str();
  const auto m = read_metrics(c.output_dir / "metrics.jsonl");
  ASSERT_EQ(m.size(), 4u);
  for (size_t i = 0; i < m.size(); ++i)
    EXPECT_NEAR(m[i]["epoch"].get<double>(), double(i + 1) / 3.0, 1e-12) << i;
}

// Accumulation that does not divide the data: as transformers' Trainer, the last optimizer step
// of an epoch takes the micro-batches left, and an accumulation longer than the epoch makes one
// step of the whole epoch; never a step across the epoch's end, never a sample lost.
TEST(TrainSchedule, AccumulationThatDoesNotDivideTheData) {
  const fs::path d = fresh_dir("accum_rest");
  TrainConfig c = base_config(d);  // 10 samples of 81 tokens in all
  c.num_train_epochs = 2;
  c.batch_size = 3;  // 4 micro-batches an epoch: 3, 3, 3, 1 samples
  c.grad_accum = 2;  // 2 steps an epoch: 6 samples (46 tokens), then 4 (35 tokens)
  std::ostringstream log;
  TrainSummary s = run_training(c, log);
  EXPECT_EQ(s.steps_per_epoch, 2);
  EXPECT_EQ(s.total_steps, 4);
  auto m = read_metrics(c.output_dir / "metrics.jsonl");
  ASSERT_EQ(m.size(), 4u);
  const int64_t tokens[] = {46, 35, 46, 35};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(m[i]["num_tokens"].get<int64_t>(), tokens[i]) << i;
    EXPECT_NEAR(m[i]["epoch"].get<double>(), i < 2 ? (i + 1) * 0.5 : 1 + (i - 1) * 0.5, 1e-12)
        << i;
  }

  c.grad_accum = 8;  // more micro-batches than an epoch has: one step of the whole epoch
  c.overwrite_output_dir = true;
  std::ostringstream log8;
  s = run_training(c, log8);
  EXPECT_EQ(s.steps_per_epoch, 1);
  EXPECT_EQ(s.total_steps, 2);
  m = read_metrics(c.output_dir / "metrics.jsonl");
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0]["num_tokens"].get<int64_t>(), 81);
  EXPECT_EQ(m[1]["num_tokens"].get<int64_t>(), 81);
  EXPECT_NEAR(m[1]["epoch"].get<double>(), 2.0, 1e-12);
}

// Epochs of nothing: a file whose every label is masked is refused before the engine is made.
TEST(TrainSchedule, NoDataIsRefused) {
  const fs::path d = fresh_dir("nodata");
  TrainConfig c = base_config(d);
  write_text(d / "masked.jsonl", "{\"input_ids\": [1, 2, 3], \"labels\": [-100, -100, -100]}\n");
  c.data = d / "masked.jsonl";
  c.no_save = true;
  c.output_dir.clear();
  std::ostringstream log;
  const std::string e = error_text([&] { run_training(c, log); });
  EXPECT_NE(e.find(c.data.string()), std::string::npos) << e;
  EXPECT_NE(e.find("no sample with a label to learn from"), std::string::npos) << e;
}

}  // namespace
}  // namespace sf
