#include <gtest/gtest.h>

#include "core/error.h"
#include "core/size_parse.h"

namespace sf {
namespace {

TEST(SizeParse, AcceptsTheDocumentedForms) {
  EXPECT_EQ(parse_size("24GiB", "--gpu-memory"), uint64_t(24) << 30);
  EXPECT_EQ(parse_size("24G", "--gpu-memory"), uint64_t(24) << 30);
  EXPECT_EQ(parse_size("24gb", "--gpu-memory"), uint64_t(24) << 30);
  EXPECT_EQ(parse_size("24000MiB", "--gpu-memory"), uint64_t(24000) << 20);
  EXPECT_EQ(parse_size("1.5TiB", "--host-memory"), uint64_t(3) << 39);
  EXPECT_EQ(parse_size("4096", "--host-memory"), 4096u);
  EXPECT_EQ(parse_size("512k", "--host-memory"), 512u << 10);
}

TEST(SizeParse, RefusesWhatIsNotASize) {
  for (const char* bad : {"", "GiB", "24 GiB", "24XB", "-3G", "1e3G", "0", "1.2.3G", "99999999999T"}) {
    try {
      parse_size(bad, "--gpu-memory");
      FAIL() << "'" << bad << "' must be refused";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--gpu-memory"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace sf
