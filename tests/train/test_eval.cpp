// Evaluation in `slideformer train`: a seeded val_size split or an eval_data file, eval_steps and
// the end; the eval loss is token-weighted over the whole set with the same loss masks, touches no
// training state, and equals a forward of the saved model.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "backend/cpu/cpu_backend.h"
#include "data/pipeline.h"
#include "engine/engine.h"
#include "model/spec.h"
#include "train/checkpoint.h"
#include "train/data.h"
#include "train/samples.h"
#include "train/trainer.h"
#include "train_test_util.h"

namespace sf {
namespace {

using namespace sf::testing;

std::vector<Sample> numbered(int n) {
  std::vector<Sample> s(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) s[size_t(i)].ids = s[size_t(i)].labels = {i, i + 1};
  return s;
}

TEST(TrainEval, ValSizeSplitIsSeededAndKeepsFileOrder) {
  std::vector<Sample> train = numbered(20), eval;
  split_validation(train, eval, 0.12, 42);  // ceil(2.4) = 3
  ASSERT_EQ(eval.size(), 3u);
  ASSERT_EQ(train.size(), 17u);
  for (size_t i = 1; i < eval.size(); ++i) EXPECT_LT(eval[i - 1].ids[0], eval[i].ids[0]);
  for (size_t i = 1; i < train.size(); ++i) EXPECT_LT(train[i - 1].ids[0], train[i].ids[0]);
  std::vector<Sample> train2 = numbered(20), eval2, train3 = numbered(20), eval3;
  split_validation(train2, eval2, 0.12, 42);
  split_validation(train3, eval3, 3, 7);  // a count; another seed
  EXPECT_EQ(eval2[0].ids, eval[0].ids);
  EXPECT_EQ(eval2[2].ids, eval[2].ids);
  ASSERT_EQ(eval3.size(), 3u);
  EXPECT_FALSE(eval3[0].ids == eval[0].ids && eval3[1].ids == eval[1].ids &&
               eval3[2].ids == eval[2].ids);
  std::vector<Sample> one = numbered(1), none;
  const std::string e = error_text([&] { split_validation(one, none, 0.5, 1); });
  EXPECT_NE(e.find("one must stay for training"), std::string::npos) << e;
}

TEST(TrainEval, EvalLossIsTheSavedModelsTokenWeightedLossAndTouchesNothing) {
  const fs::path d = fresh_dir("eval");
  TrainConfig c;
  c.model_dir = tiny_model(d);
  c.data = token_dataset(d / "data.jsonl", 12);
  // eval_data with masked labels: only the unmasked targets count.
  write_text(d / "eval.jsonl",
             "{\"input_ids\": [5, 6, 7, 8, 9], \"labels\": [-100, -100, 7, 8, 9]}\n"
             "{\"input_ids\": [10, 11, 12], \"labels\": [-100, 11, -100]}\n"
             "{\"input_ids\": [1, 2, 3, 4]}\n");
  c.eval_data = d / "eval.jsonl";
  c.eval_batch_size = 2;
  c.cutoff_len = 16;
  c.steps = 6;
  c.batch_size = 2;
  c.lr = 2e-3f;
  c.cache = false;
  c.save_dtype = "f32";
  c.output_dir = d / "with_eval";
  c.eval_steps = 2;
  std::ostringstream log;
  const TrainSummary with = run_training(c, log);
  c.output_dir = d / "without_eval";
  c.eval_data.clear();
  c.eval_steps = 0;
  const TrainSummary without = run_training(c, log);
  EXPECT_EQ(with.losses, without.losses);  // evaluating changes no training state
  EXPECT_EQ(without.eval_loss, -1);
  // targets: 7, 8, 9 (3) + 11 (1) + 2, 3, 4 (3)
  EXPECT_EQ(with.eval_tokens, 7);

  const auto m = read_metrics(d / "with_eval" / "metrics.jsonl");
  std::vector<int64_t> eval_steps;
  for (const auto& line : m)
    if (line.contains("eval_loss")) {
      eval_steps.push_back(line["step"].get<int64_t>());
      EXPECT_EQ(line["eval_perplexity"].get<double>(), std::exp(line["eval_loss"].get<double>()));
      EXPECT_EQ(line["eval_num_loss_tokens"].get<int64_t>(), 7);
    }
  EXPECT_EQ(eval_steps, (std::vector<int64_t>{2, 4, 6}));
  EXPECT_EQ(m.back()["eval_loss"].get<double>(), with.eval_loss);
  EXPECT_NE(log.str().find("eval at step 6: eval_loss "), std::string::npos) << log.str();

  // The same set, evaluated on the saved model by hand: Σ loss / Σ valid targets.
  const std::vector<Sample> samples = token_samples(d / "eval.jsonl", 16);
  const ModelSpec spec = load_model_spec(c.model_dir);
  auto backend = make_cpu_backend();
  EngineOptions opt;
  opt.max_tokens = 64;
  opt.max_sequences = 4;
  Engine engine(*backend, spec, opt);
  load_model_weights(engine, d / "with_eval");
  double loss = 0;
  int64_t n = 0;
  for (const Batch& b : make_eval_batches(samples, 2)) {
    const EvalResult r = engine.evaluate(b);
    loss += r.loss_sum;
    n += r.valid_targets;
  }
  EXPECT_EQ(n, 7);
  EXPECT_EQ(loss / double(n), with.eval_loss);
}

TEST(TrainEval, ValSizeHoldsOutOfTheTrainingData) {
  const fs::path d = fresh_dir("valsize");
  TrainConfig c;
  c.model_dir = tiny_model(d);
  c.data = token_dataset(d / "data.jsonl", 10);
  c.val_size = 0.2;
  c.cutoff_len = 16;
  c.num_train_epochs = 1;
  c.batch_size = 4;
  c.cache = false;
  c.no_save = true;
  std::ostringstream log;
  const TrainSummary s = run_training(c, log);
  EXPECT_NE(log.str().find("val_size 0.2: 2 samples held out for evaluation, 8 for training"),
            std::string::npos)
      << log.str();
  EXPECT_EQ(s.steps_per_epoch, 2);
  EXPECT_GT(s.eval_loss, 0);
  EXPECT_GT(s.eval_tokens, 0);
}

}  // namespace
}  // namespace sf
