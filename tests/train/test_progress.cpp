// What `slideformer train` shows: one line per logging_steps (the first and the last always) when
// the log is not a terminal, a line rewritten in place when it is; both with step/total, epoch,
// loss, grad norm, lr, tok/s, MFU (with a peak: none on the CPU unless peak_tflops is given),
// device memory (where there is a device) and host memory, elapsed and ETA. The model FLOPs and
// the peaks of known and unknown GPUs.
#include <gtest/gtest.h>

#include <sstream>

#include "model/layout.h"
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

TEST(TrainProgress, MfuWithAPeakOnly) {
  const fs::path d = fresh_dir("progress_mfu");
  TrainConfig c = small_run(d);
  c.steps = 2;
  std::ostringstream cpu;
  run_training(c, cpu, false);
  EXPECT_NE(cpu.str().find("MFU against no bf16 peak for the cpu backend"), std::string::npos)
      << cpu.str();
  const size_t step2 = cpu.str().find("step 2/2  loss ");
  ASSERT_NE(step2, std::string::npos) << cpu.str();
  const std::string cpu_line = cpu.str().substr(step2, cpu.str().find('\n', step2) - step2);
  EXPECT_EQ(cpu_line.find("device"), std::string::npos) << "the CPU has no device memory";
  EXPECT_NE(cpu_line.find(" tok/s  host "), std::string::npos) << cpu_line;  // no MFU
  c.peak_tflops = 1e-6;  // 1 MFLOP/s: any step of the tiny model is far above 0.0 %
  c.output_dir = d / "out";
  c.no_save = false;
  std::ostringstream with_peak;
  run_training(c, with_peak, false);
  const std::string s = with_peak.str();
  EXPECT_NE(s.find("MFU against 1e-06 TFLOPS (peak_tflops)"), std::string::npos) << s;
  const size_t at = s.find("step 2/2  loss ");
  ASSERT_NE(at, std::string::npos) << s;
  const std::string line = s.substr(at, s.find('\n', at) - at);
  EXPECT_NE(line.find(" tok/s  MFU "), std::string::npos) << line;
  const auto metrics = read_metrics(d / "out/metrics.jsonl");
  ASSERT_EQ(metrics.size(), 2u);
  EXPECT_GT(metrics[1]["mfu"].get<double>(), 0.0);
  EXPECT_GT(metrics[1]["host_memory_gib"].get<double>(), 0.0);
}

// The line's columns from given figures: 2e12 model FLOPs in 1 s against a 4e12 peak is 50 %;
// device memory from the callback.
TEST(TrainProgress, LineColumns) {
  std::ostringstream log;
  Progress p(log, false, 1, 3, 1.0, fs::path(), 0);
  p.set_device(4e12, [] { return DeviceMemoryInfo{uint64_t(3) << 30, uint64_t(80) << 30}; });
  StepReport r;
  r.step = 1;
  r.tokens = 1000;
  r.seconds = 1;
  r.model_flops = 2e12;
  p.step(r);
  EXPECT_NE(log.str().find("1000 tok/s  MFU 50.0%  device 3.00 GiB  host "), std::string::npos)
      << log.str();
}

TEST(TrainProgress, ModelFlops) {
  ModelSpec m;
  m.hidden = 64;
  m.layers = 2;
  m.heads = 4;
  m.kv_heads = 2;
  m.head_dim = 16;
  m.intermediate = 96;
  m.vocab = 100;
  Batch b;
  b.ids.assign(8, 1);
  b.cu_seqlens = {0, 3, 8};  // samples of 3 and 5 tokens
  const double P = double(parameter_count(m));
  // untied: the embedding's lookup does no products; attention 6·L·NH·D·(3² + 5²)
  EXPECT_DOUBLE_EQ(model_flops(m, b), 6 * (P - 100 * 64) * 8 + 6 * 2 * 64 * (9 + 25));
  m.tie_word_embeddings = true;
  const double Pt = double(parameter_count(m));
  EXPECT_DOUBLE_EQ(model_flops(m, b), 6 * Pt * 8 + 6 * 2 * 64 * (9 + 25));
}

TEST(TrainProgress, Bf16Peaks) {
  CudaDeviceProperties h200{"NVIDIA H200", 132, 1980000, 9, 0};
  EXPECT_DOUBLE_EQ(bf16_peak(h200).flops, 989.4e12);
  EXPECT_NE(bf16_peak(h200).source.find("datasheet"), std::string::npos);
  CudaDeviceProperties gh200{"NVIDIA GH200 480GB", 132, 1980000, 9, 0};
  EXPECT_DOUBLE_EQ(bf16_peak(gh200).flops, 989.4e12);
  EXPECT_DOUBLE_EQ(bf16_peak({"NVIDIA H100 PCIe", 114, 1755000, 9, 0}).flops, 756.5e12);
  EXPECT_DOUBLE_EQ(bf16_peak({"NVIDIA H100 80GB HBM3", 132, 1980000, 9, 0}).flops, 989.4e12);
  EXPECT_DOUBLE_EQ(bf16_peak({"NVIDIA GeForce RTX 4090", 128, 2520000, 8, 9}).flops, 165.2e12);
  EXPECT_DOUBLE_EQ(bf16_peak({"NVIDIA L40S", 142, 2520000, 8, 9}).flops, 362.05e12);
  // not in the table: SMs × clock × the FLOPs an sm_90 SM does a cycle
  const PeakFlops est = bf16_peak({"NVIDIA Future", 100, 2000000, 9, 0});
  EXPECT_DOUBLE_EQ(est.flops, 100 * 2e9 * 4096);
  EXPECT_NE(est.source.find("estimated as 100 SMs × 2.00 GHz × 4096 FLOP/cycle (sm_90)"),
            std::string::npos)
      << est.source;
  const PeakFlops unknown = bf16_peak({"Some GPU", 10, 1000000, 7, 5});
  EXPECT_EQ(unknown.flops, 0);
  EXPECT_NE(unknown.source.find("set peak_tflops"), std::string::npos);
}

TEST(TrainProgress, Durations) {
  EXPECT_EQ(format_duration(0), "0:00");
  EXPECT_EQ(format_duration(65.4), "1:05");
  EXPECT_EQ(format_duration(3723), "1:02:03");
}

}  // namespace
}  // namespace sf
