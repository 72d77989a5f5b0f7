// The real binary on hostile input (issue 14's CLI findings): `logits` refuses ids that do not fit
// (no wrap of 2^31 or 2^32) and non-finite logits, naming the file; a directory given as a file
// is an error naming the path; `train --lr 1e30 --steps 1` exits non-zero and saves nothing.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "../train/train_test_util.h"
#include "io/nvme_store.h"
#include "io/safetensors.h"

namespace sf {
namespace {

using namespace sf::testing;

using Result = sf::testing::CommandResult;
Result run(const std::string& args) { return sf::testing::run_slideformer(args); }

TEST(CliChecks, LogitsRefusesIdsThatDoNotFitAndDirectories) {
  const fs::path d = fresh_dir("logits_ids");
  const fs::path model = tiny_model(d);
  const std::string base = "logits --model " + model.string() + " --out " + (d / "l.st").string();
  write_text(d / "ok.json", "{\"input_ids\": [[1, 2, 3], [4, 5, 6]]}");
  Result r = run(base + " --batch " + (d / "ok.json").string());
  ASSERT_EQ(r.code, 0) << r.out;
  SafetensorsReader reader(d / "l.st");
  EXPECT_EQ(reader.get("logits").shape, (std::vector<int64_t>{2, 3, 256}));
  fs::remove(d / "l.st");
  for (const char* id :
       {"4294967296", "4294967297", "2147483648", "-1", "256", "1.5", "18446744073709551615"}) {
    write_text(d / "bad.json", std::string("{\"input_ids\": [[1, ") + id + ", 3]]}");
    r = run(base + " --batch " + (d / "bad.json").string());
    EXPECT_EQ(r.code, 1) << id << ": " << r.out;
    EXPECT_NE(r.out.find((d / "bad.json").string() + ": input_ids[0][1] = " + id +
                         " is not a token id of this model (integers in [0, 256))"),
              std::string::npos)
        << r.out;
    EXPECT_FALSE(fs::exists(d / "l.st"));
  }
  write_text(d / "uneven.json", "{\"input_ids\": [[1, 2, 3], [4, 5]]}");
  r = run(base + " --batch " + (d / "uneven.json").string());
  EXPECT_NE(r.out.find("rows must have equal lengths"), std::string::npos) << r.out;
  r = run(base + " --batch " + d.string());
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("the logits batch " + d.string() + " is a directory"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("basic_filebuf"), std::string::npos) << r.out;
}

// A weight of 3.4e38 (finite) overflows the forward: every logit is NaN; nothing is written.
TEST(CliChecks, LogitsRefusesNonFiniteOutput) {
  const fs::path d = fresh_dir("logits_nan");
  const fs::path model = tiny_model(d);
  set_tensor(model, "model.norm.weight", 3.4e38f);
  write_text(d / "b.json", "{\"input_ids\": [[1, 2, 3]]}");
  const Result r = run("logits --model " + model.string() + " --batch " + (d / "b.json").string() +
                       " --out " + (d / "l.st").string());
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("are not finite"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("nothing was written"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(d / "l.st"));
}

TEST(CliChecks, TrainRefusesDirectoriesAndDivergedRuns) {
  const fs::path d = fresh_dir("train_checks");
  const fs::path model = tiny_model(d);
  Result r = run("train --model " + model.string() + " --data " + d.string() + " --no-save");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("train_data " + d.string() + " is a directory"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("basic_filebuf"), std::string::npos) << r.out;
  write_text(d / "t.txt", "some text long enough for a couple of short samples of bytes here");
  r = run("train --model " + model.string() + " --data " + (d / "t.txt").string() +
          " --cutoff-len 16 --lr 1e30 --steps 1 --output " + (d / "out").string());
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("after step 1 the weights are unusable"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(d / "out" / "model.safetensors"));
  // Bad values are refused before any data is read: the data file does not exist here.
  r = run("train --model " + model.string() + " --data /nonexistent.txt --no-save --eps 1e-50");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("--eps: 1e-50 is 0 in float"), std::string::npos) << r.out;
  r = run("train --model " + model.string() +
          " --data /nonexistent.txt --no-save "
          "--loss-mask everything");
  EXPECT_NE(r.out.find("--loss-mask: must be one of assistant|all|last"), std::string::npos)
      << r.out;
  r = run("--version");
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out.rfind("slideformer ", 0), 0u) << r.out;
}

// An --nvme-dir that cannot hold the tier is refused before the data is read (the data file does
// not exist here), naming the directory; a run with the state of its layers and its activation
// checkpoints on the disk says so in its plan and measures the disk.
TEST(CliChecks, TrainChecksTheNvmeDirectoryFirst) {
  const fs::path d = fresh_dir("train_nvme");
  const fs::path model = tiny_model(d);
  Result r = run("train --model " + model.string() +
                 " --data /nonexistent.txt --no-save --nvme-dir " + (d / "missing").string());
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find((d / "missing").string()), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("nonexistent.txt"), std::string::npos) << r.out;
  write_text(d / "f", "a file");
  r = run("train --model " + model.string() + " --data /nonexistent.txt --no-save --nvme-dir " +
          (d / "f").string());
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find((d / "f").string()), std::string::npos) << r.out;
  std::string why;
  if (!NvmeStore::io_uring_available(&why)) GTEST_SKIP() << "io_uring cannot be set up: " << why;
  fs::create_directories(d / "scratch");
  write_text(d / "t.txt", "some text long enough for a couple of short samples of bytes here");
  r = run("train --model " + model.string() + " --data " + (d / "t.txt").string() +
          " --cutoff-len 16 --steps 2 --no-save --backend cpu --nvme-dir " +
          (d / "scratch").string() + " --nvme-layers 1 --nvme-masters 1 --nvme-checkpoints on");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("the Adam m and v of layer 0 ("), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the master weights of layer 0 ("), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the activation checkpoints ("), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("NVMe disk: write"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::is_empty(d / "scratch"));
}

// The README's way: `slideformer train run.yaml` with overrides; the effective configuration in
// OUTPUT/training_args.yaml holds the file's values and the overrides.
TEST(CliChecks, TrainFromYamlWithOverrides) {
  const fs::path d = fresh_dir("yaml_run");
  const fs::path model = tiny_model(d);
  write_text(d / "run.yaml", "model_name_or_path: " + model.string() +
                                 "\ntrain_data: " + SF_SOURCE_DIR +
                                 "/assets/data/carroll-alice.txt\noutput_dir: " +
                                 (d / "out").string() +
                                 "\nmax_steps: 50\nlearning_rate: 2.0e-3\ncutoff_len: 32\n"
                                 "per_device_train_batch_size: 2\nbackend: cpu\n");
  Result r = run("train " + (d / "run.yaml").string() + " max_steps=3 --cutoff-len 24");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("step 3/3  loss "), std::string::npos) << r.out;
  const std::string eff = read_text(d / "out" / "training_args.yaml");
  for (const char* line : {"max_steps: 3\n", "cutoff_len: 24\n", "learning_rate: 0.002\n",
                           "per_device_train_batch_size: 2\n"})
    EXPECT_NE(eff.find(line), std::string::npos) << line << eff;
  // The effective configuration is itself a configuration file: it reruns the same run.
  r = run("train " + (d / "out" / "training_args.yaml").string() + " overwrite_output_dir=true");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("step 3/3  loss "), std::string::npos) << r.out;
}


std::string file_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// "step 3/3  loss 10.1  grad_norm 2.0" of every step line: what must match between two runs.
std::vector<std::string> step_lines(const std::string& out) {
  std::vector<std::string> lines;
  std::istringstream in(out);
  for (std::string l; std::getline(in, l);)
    if (l.rfind("step ", 0) == 0) lines.push_back(l.substr(0, l.find("  epoch")));
  return lines;
}

// --gpus on the CPU backend (simulated devices): two devices of one sample each give the run of
// one device whose micro-batches are those samples — the same losses, norms and saved weights,
// bit for bit (engine tests: DataParallel); packed steps, cut by tokens, to rounding. The NVMe
// tier is refused with --gpus.
TEST(CliChecks, TrainOnSimulatedDevicesEqualsOneDevice) {
  const fs::path d = fresh_dir("train_gpus");
  const fs::path model = tiny_model(d);
  const std::string common = "train --model " + model.string() + " --data " + SF_SOURCE_DIR +
                             "/assets/data/carroll-alice.txt --steps 3 --cutoff-len 32 --lr 1e-2 "
                             "--backend cpu --save-dtype f32 --max-grad-norm 1.0 --logging-steps 1";
  Result one = run(common + " --batch-size 2 --micro-batch-tokens 32 --output " +
                   (d / "one").string());
  ASSERT_EQ(one.code, 0) << one.out;
  Result two = run(common + " --batch-size 1 --gpus 2 --output " + (d / "two").string());
  ASSERT_EQ(two.code, 0) << two.out;
  EXPECT_NE(two.out.find("data parallel: 2 simulated devices"), std::string::npos) << two.out;
  EXPECT_EQ(step_lines(two.out), step_lines(one.out)) << one.out << two.out;
  EXPECT_EQ(step_lines(one.out).size(), 3u) << one.out;
  const std::string a = file_bytes(d / "one" / "model.safetensors");
  EXPECT_FALSE(a.empty());
  EXPECT_TRUE(a == file_bytes(d / "two" / "model.safetensors")) << "the saved weights differ";
  EXPECT_NE(file_bytes(d / "two" / "report.html").find("2 simulated devices"), std::string::npos);

  // Packed steps are cut by tokens: the same losses to rounding (the 4 printed decimals).
  Result packed_one = run(common + " --batch-size 2 --packing --no-save");
  Result packed_two = run(common + " --batch-size 1 --gpus 2 --packing --no-save");
  ASSERT_EQ(packed_two.code, 0) << packed_two.out;
  EXPECT_EQ(step_lines(packed_two.out), step_lines(packed_one.out))
      << packed_one.out << packed_two.out;
  Result nvme = run(common + " --batch-size 1 --gpus 2 --no-save --nvme-dir " + d.string());
  EXPECT_EQ(nvme.code, 1);
  EXPECT_NE(nvme.out.find("with nvme_dir is not supported yet"), std::string::npos) << nvme.out;
}

}  // namespace
}  // namespace sf
