// defines: main of the test binaries: Google Test with a scratch folder of the process's own.
//
// ctest runs every test as its own process, many at once (-j). Tests write their tiny models and
// outputs under fs::temp_directory_path() with fixed names, and two tests sharing a helper (the
// same tiny model, the same config file) raced: one removed the folder the other was writing to.
// TMPDIR/sf_test_<pid> gives each process its own; it is removed when the tests pass and kept
// when one fails, for a look at what it wrote.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  const fs::path scratch = fs::temp_directory_path() / ("sf_test_" + std::to_string(::getpid()));
  std::error_code ec;
  fs::create_directories(scratch, ec);
  if (ec) {
    std::fprintf(stderr,
                 "cannot create the test scratch folder %s (%s); set TMPDIR to a writable "
                 "folder\n",
                 scratch.c_str(), ec.message().c_str());
    return 1;
  }
  ::setenv("TMPDIR", scratch.c_str(), 1);
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  if (rc == 0) fs::remove_all(scratch, ec);
  return rc;
}
