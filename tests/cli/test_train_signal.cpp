// SIGINT / SIGTERM during `slideformer train` (the real binary, in a child process): the step in
// flight finishes, a checkpoint is saved, the path is printed, the exit is non-zero; resuming with
// resume_from_checkpoint=auto gives the losses of an uninterrupted run, bit for bit (metrics.jsonl
// holds them at full precision).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <csignal>
#include <cstdio>

#include "../train/train_test_util.h"

namespace sf {
namespace {

using namespace sf::testing;

struct Child {
  int code = -1;
  std::string out;
};

// Runs the binary; once `trigger` appears in its output, sends `sig`.
Child run_and_signal(const std::vector<std::string>& args, const std::string& trigger, int sig) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    std::vector<char*> argv;
    static std::string bin = SF_BINARY;
    argv.push_back(bin.data());
    std::vector<std::string> copy = args;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(bin.c_str(), argv.data());
    _exit(127);
  }
  close(fds[1]);
  Child c;
  bool sent = sig == 0;
  std::array<char, 4096> buf;
  for (ssize_t n; (n = read(fds[0], buf.data(), buf.size())) > 0;) {
    c.out.append(buf.data(), size_t(n));
    if (!sent && c.out.find(trigger) != std::string::npos) {
      kill(pid, sig);
      sent = true;
    }
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  c.code = WIFEXITED(status) ? WEXITSTATUS(status) : 1000 + WTERMSIG(status);
  return c;
}

std::vector<double> losses(const fs::path& metrics) {
  std::vector<double> out;
  for (const auto& m : read_metrics(metrics))
    if (m.contains("loss")) out.push_back(m["loss"].get<double>());
  return out;
}

TEST(TrainSignal, InterruptSavesAndResumeContinuesBitIdentically) {
  const fs::path d = fresh_dir("signal");
  const fs::path model = tiny_model(d);
  const fs::path data = token_dataset(d / "data.jsonl", 24);
  auto args = [&](const fs::path& out) {
    return std::vector<std::string>{"train",
                                    "model_name_or_path=" + model.string(),
                                    "train_data=" + data.string(),
                                    "output_dir=" + out.string(),
                                    "--max-steps",
                                    "300",
                                    "--batch-size",
                                    "2",
                                    "--cutoff-len",
                                    "16",
                                    "--shuffle",
                                    "--lr",
                                    "1e-3",
                                    "--logging-steps",
                                    "1",
                                    "--no-cache",
                                    "--backend",
                                    "cpu"};
  };
  const Child straight = run_and_signal(args(d / "straight"), "", 0);
  ASSERT_EQ(straight.code, 0) << straight.out;
  const std::vector<double> want = losses(d / "straight" / "metrics.jsonl");
  ASSERT_EQ(want.size(), 300u);

  const fs::path out = d / "stopped";
  const Child stopped = run_and_signal(args(out), "step 3/300", SIGINT);
  EXPECT_EQ(stopped.code, 130) << stopped.out;
  const size_t at = stopped.out.find("stopped by SIGINT after step ");
  ASSERT_NE(at, std::string::npos) << stopped.out;
  const int k = std::stoi(stopped.out.substr(at + 29));
  EXPECT_GE(k, 3);
  ASSERT_LT(k, 300) << "the run finished before the signal arrived";
  const fs::path ck = out / ("checkpoint-" + std::to_string(k));
  EXPECT_NE(stopped.out.find("checkpoint saved to " + ck.string() +
                             "; continue with resume_from_checkpoint=auto"),
            std::string::npos)
      << stopped.out;
  EXPECT_TRUE(fs::exists(ck / "training_state.safetensors"));
  EXPECT_EQ(read_text(out / "latest"), "checkpoint-" + std::to_string(k) + "\n");
  EXPECT_FALSE(fs::exists(out / "model.safetensors"));  // the final model is not written

  // Without resuming, the directory is refused; with auto, the run continues where it stopped.
  const Child refused = run_and_signal(args(out), "", 0);
  EXPECT_EQ(refused.code, 1);
  EXPECT_NE(refused.out.find("already holds a run"), std::string::npos) << refused.out;
  std::vector<std::string> resume = args(out);
  resume.push_back("resume_from_checkpoint=auto");
  const Child resumed = run_and_signal(resume, "", 0);
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  EXPECT_NE(resumed.out.find("resumed from " + ck.string()), std::string::npos) << resumed.out;
  EXPECT_EQ(losses(out / "metrics.jsonl"), want);  // steps 1..k, then k+1..300: bit for bit
  EXPECT_EQ(read_text(out / "model.safetensors"), read_text(d / "straight" / "model.safetensors"));

  // SIGTERM: the same, exit 128 + 15.
  const Child term = run_and_signal(args(d / "term"), "step 2/300", SIGTERM);
  EXPECT_EQ(term.code, 143) << term.out;
  EXPECT_NE(term.out.find("stopped by SIGTERM after step"), std::string::npos) << term.out;
  EXPECT_TRUE(fs::exists(d / "term" / "latest"));
}

}  // namespace
}  // namespace sf
