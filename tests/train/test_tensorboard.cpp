// report_to: tensorboard — event files with the TFRecord framing and CRC-32C TensorBoard checks,
// holding the very values of metrics.jsonl (as float). tests/train/check_tensorboard.py reads
// them with TensorBoard itself where it is installed.
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "train/tensorboard.h"
#include "train/trainer.h"
#include "train_test_util.h"

namespace sf {
namespace {

using namespace sf::testing;

TEST(TrainTensorBoard, Crc32cKnownValues) {
  // RFC 3720 B.4: 32 bytes of zeros → 0x8A9136AA; "123456789" → 0xE3069283.
  const std::string zeros(32, '\0');
  EXPECT_EQ(crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
}

TEST(TrainTensorBoard, EventsHoldTheMetrics) {
  const fs::path d = fresh_dir("tensorboard");
  TrainConfig c;
  c.model_dir = tiny_model(d);
  c.data = token_dataset(d / "data.jsonl", 10);
  c.val_size = 2;
  c.eval_steps = 2;
  c.cutoff_len = 16;
  c.steps = 4;
  c.batch_size = 2;
  c.cache = false;
  c.output_dir = d / "out";
  c.report_to = "tensorboard";
  std::ostringstream log;
  const TrainSummary s = run_training(c, log);
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(c.output_dir / "runs")) files.push_back(e.path());
  ASSERT_EQ(files.size(), 1u);
  EXPECT_NE(files[0].filename().string().find("events.out.tfevents."), std::string::npos);
  std::map<std::string, std::vector<std::pair<int64_t, float>>> by_tag;
  for (const auto& sc : read_tensorboard_scalars(files[0]))
    by_tag[sc.tag].emplace_back(sc.step, sc.value);
  ASSERT_EQ(by_tag["train/loss"].size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(by_tag["train/loss"][i].first, int64_t(i + 1));
    EXPECT_EQ(by_tag["train/loss"][i].second, float(s.losses[i]));
  }
  EXPECT_EQ(by_tag["train/learning_rate"].size(), 4u);
  EXPECT_EQ(by_tag["train/grad_norm"].size(), 4u);
  ASSERT_EQ(by_tag["eval/loss"].size(), 2u);  // steps 2 and 4
  EXPECT_EQ(by_tag["eval/loss"][1].first, 4);
  EXPECT_EQ(by_tag["eval/loss"][1].second, float(s.eval_loss));

  // A flipped byte is found by the CRC.
  std::string bytes = read_text(files[0]);
  bytes[bytes.size() / 2] ^= 0x20;
  write_text(d / "bad.tfevents", bytes);
  const std::string e = error_text([&] { read_tensorboard_scalars(d / "bad.tfevents"); });
  EXPECT_NE(e.find("CRC"), std::string::npos) << e;
}

}  // namespace
}  // namespace sf
