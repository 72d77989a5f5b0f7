// Replays every committed fuzz corpus file (tests/fuzz/corpus/<target>/*) through the fuzz entry
// points, so CI exercises the seeds and every past finding without clang. A finding would show
// here as a crash, a sanitizer report (in a sanitized build) or an exception other than sf::Error.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "entry_points.h"

namespace fs = std::filesystem;

TEST(FuzzReplay, EveryCorpusFileOfEveryTarget) {
  const fs::path root = fs::path(SF_SOURCE_DIR) / "tests/fuzz/corpus";
  ASSERT_TRUE(fs::is_directory(root)) << root;
  for (const sf::fuzz::Target& t : sf::fuzz::targets()) {
    const fs::path dir = root / t.name;
    ASSERT_TRUE(fs::is_directory(dir)) << "no corpus for target " << t.name;
    int files = 0;
    for (const auto& e : fs::directory_iterator(dir)) {
      std::ifstream in(e.path(), std::ios::binary);
      const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      const auto t0 = std::chrono::steady_clock::now();
      EXPECT_NO_THROW(t.run(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()))
          << e.path();
      EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20)) << e.path();
      ++files;
    }
    EXPECT_GT(files, 0) << "empty corpus for target " << t.name;
  }
  // Every corpus folder is replayed: a folder no target names (a new target left out of
  // targets()) fails here instead of going unreplayed.
  std::set<std::string> names;
  for (const sf::fuzz::Target& t : sf::fuzz::targets()) names.insert(t.name);
  for (const auto& e : fs::directory_iterator(root))
    EXPECT_TRUE(names.count(e.path().filename().string()))
        << e.path() << " has no entry in sf::fuzz::targets()";
  EXPECT_EQ(names.size(), 9u);  // jinja … train_state, safetensors_index, tokenizer_config
}
