// A save that dies (kill -9) or fails (a full disk) never leaves what looks like a complete
// checkpoint, and the next save removes what a killed one left (issue 14).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "io/atomic_file.h"
#include "model/init.h"

namespace fs = std::filesystem;

namespace {

fs::path fresh_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("sf_save_faults_" + name + "_" +
                                            std::to_string(getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// A pid that existed and is gone: a child that exited and was reaped.
pid_t dead_pid() {
  pid_t p = fork();
  if (p == 0) _exit(0);
  waitpid(p, nullptr, 0);
  return p;
}

sf::TinyModelOptions tiny() {
  sf::TinyModelOptions o;
  o.hidden = 32, o.layers = 2, o.heads = 2, o.kv_heads = 1, o.intermediate = 64, o.vocab = 64;
  return o;
}

}  // namespace

TEST(SaveFaults, StaleTemporariesOfDeadProcessesAreRemovedByTheNextSave) {
  const fs::path dir = fresh_dir("stale");
  const pid_t dead = dead_pid();
  const fs::path stale = dir / ("model.safetensors.tmp-" + std::to_string(dead));
  const fs::path live = dir / ("model.safetensors.tmp-" + std::to_string(getppid()));
  const fs::path other = dir / "notes.tmp-abc";
  for (const fs::path& p : {stale, live, other}) std::ofstream(p) << "partial";
  sf::write_random_model(dir, tiny());
  EXPECT_FALSE(fs::exists(stale)) << "a dead process's temporary file was kept";
  EXPECT_TRUE(fs::exists(live)) << "a live process's temporary file was removed";
  EXPECT_TRUE(fs::exists(other)) << "a file that is not a temporary of ours was removed";
  EXPECT_TRUE(fs::exists(dir / "model.safetensors"));
  EXPECT_TRUE(fs::exists(dir / "config.json"));
  EXPECT_EQ(sf::remove_stale_temporaries(dir), 0u);
  fs::remove_all(dir);
}

// A disk that fills up at any point of the save: either the save completed, or neither
// model.safetensors nor config.json appeared, and no temporary file is left.
TEST(SaveFaults, FullDiskNeverLeavesWeightsWithoutConfig) {
  const fs::path dir = fresh_dir("enospc");
  sf::write_random_model(dir / "probe", tiny());
  const auto total = int64_t(fs::file_size(dir / "probe" / "model.safetensors") +
                             fs::file_size(dir / "probe" / "config.json"));
  int failures = 0;
  for (int64_t budget : {int64_t(0), int64_t(8), total / 2, total - 600, total - 1, total + 10}) {
    const fs::path out = dir / ("run" + std::to_string(budget));
    sf::inject_write_failure_after(budget);
    std::string error;
    try {
      sf::write_random_model(out, tiny());
    } catch (const sf::Error& e) {
      error = e.what();
    }
    sf::inject_write_failure_after(-1);
    const bool weights = fs::exists(out / "model.safetensors");
    const bool config = fs::exists(out / "config.json");
    if (!error.empty()) {
      ++failures;
      EXPECT_NE(error.find("No space left on device"), std::string::npos) << error;
      EXPECT_NE(error.find(".tmp-"), std::string::npos) << "the error names the file: " << error;
      EXPECT_FALSE(weights) << "budget " << budget << ": weights without a finished save";
      EXPECT_FALSE(config) << "budget " << budget << ": config without a finished save";
    } else {
      EXPECT_TRUE(weights && config) << "budget " << budget;
    }
    if (fs::exists(out)) {
      for (const auto& e : fs::directory_iterator(out))
        EXPECT_EQ(e.path().string().find(".tmp-"), std::string::npos) << e.path();
    }
  }
  EXPECT_EQ(failures, 5);  // every budget below the total fails, the last one succeeds
  fs::remove_all(dir);
}

// A save over a directory that holds a model (the final save of a run into its output_dir, a
// re-export) that fails at any point leaves that model's files byte for byte as they were.
TEST(SaveFaults, FailedSaveOverAPreviousModelLeavesItIntact) {
  const fs::path dir = fresh_dir("over");
  sf::TinyModelOptions first = tiny();
  first.seed = 1;
  sf::write_random_model(dir, first);
  auto read = [](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  const std::string weights = read(dir / "model.safetensors"), config = read(dir / "config.json");
  const auto total = int64_t(weights.size() + config.size());
  sf::TinyModelOptions second = tiny();
  second.seed = 2;
  for (int64_t budget : {int64_t(0), int64_t(8), total / 2, total - 600, total - 1}) {
    sf::inject_write_failure_after(budget);
    std::string error;
    try {
      sf::write_random_model(dir, second);
    } catch (const sf::Error& e) {
      error = e.what();
    }
    sf::inject_write_failure_after(-1);
    EXPECT_NE(error.find("No space left on device"), std::string::npos) << budget << ": " << error;
    EXPECT_EQ(read(dir / "model.safetensors"), weights) << "budget " << budget;
    EXPECT_EQ(read(dir / "config.json"), config) << "budget " << budget;
    for (const auto& e : fs::directory_iterator(dir))
      EXPECT_EQ(e.path().string().find(".tmp-"), std::string::npos) << e.path();
  }
  sf::write_random_model(dir, second);  // without a failure the new model replaces it
  EXPECT_NE(read(dir / "model.safetensors"), weights);
  fs::remove_all(dir);
}
