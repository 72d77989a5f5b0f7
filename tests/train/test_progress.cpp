// What `slideformer train` shows: one line per logging_steps (the first and the last always) when
// the log is not a terminal, a line rewritten in place when it is; both with step/total, epoch,
// loss, grad norm, lr, tok/s, host memory, elapsed and ETA.
#include <gtest/gtest.h>

#include <sstream>

#include "train/progress.h"
#include "train/trainer.h"
#include "train_test_util.h"

namespace sf {
namespace {

using namespace sf::testing;


TrainConfig small_run(const fs::path& d) {
  TrainConfig c;
  c.model_dir = tiny_model(d);
  c.data = token_dataset(d / "data.jsonl", 8);
  c.cutoff_len = 16;
  c.steps = 12;
  c.batch_size = 2;
  c.cache = false;
  c.no_save = true;
  return c;
}

TEST(TrainProgress, LinesPerLoggingStepsOrInPlace) {
  const fs::path d = fresh_dir("progress");
  TrainConfig c = small_run(d);
  c.logging_steps = 5;
  std::ostringstream log;
  run_training(c, log, /*terminal=*/false);
  const std::string s = log.str();
  EXPECT_EQ(count_of(s, "\nstep "), 4u) << s;  // 1, 5, 10, 12
  for (const char* line :
       {"step 1/12  loss ", "step 5/12  loss ", "step 10/12  loss ", "step 12/12  loss "})
    EXPECT_NE(s.find(line), std::string::npos) << line << "\n" << s;
  const size_t at = s.find("step 5/12  loss ");
  const std::string line = s.substr(at, s.find('\n', at) - at);
  for (const char* field :
       {"grad_norm ", "epoch 1.25/3.00", "lr ", "tokens ", " tok/s", " GiB", "elapsed ", "eta "})
    EXPECT_NE(line.find(field), std::string::npos) << field << " in " << line;

  std::ostringstream tty;
  run_training(c, tty, /*terminal=*/true);
  const std::string t = tty.str();
  EXPECT_EQ(count_of(t, "\r\033[Kstep "), 12u) << t;  // every step, rewritten in place
  const size_t first = t.find("\r\033[Kstep 1/12");
  ASSERT_NE(first, std::string::npos);
  const size_t last = t.find("step 12/12");
  ASSERT_NE(last, std::string::npos);
  EXPECT_EQ(t.substr(first, last - first).find('\n'), std::string::npos) << t;  // one line
  EXPECT_NE(t.find('\n', last), std::string::npos);  // ended when the run ends
}

TEST(TrainProgress, Durations) {
  EXPECT_EQ(format_duration(0), "0:00");
  EXPECT_EQ(format_duration(65.4), "1:05");
  EXPECT_EQ(format_duration(3723), "1:02:03");
}

}  // namespace
}  // namespace sf
