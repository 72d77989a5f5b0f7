// docs/config.md is `slideformer train --help-markdown` (one source of truth: the option table
// the parser uses, src/train/options.cpp). The doc is committed so that it can be read on the
// web; this test fails as soon as an option, default or help text changes without it.
#include <gtest/gtest.h>

#include "train_test_util.h"

namespace sf {
namespace {

using namespace sf::testing;

TEST(ConfigDoc, DocsConfigMdIsTheBinarysHelpMarkdown) {
  const fs::path doc = fs::path(SF_SOURCE_DIR) / "docs/config.md";
  ASSERT_TRUE(fs::is_regular_file(doc)) << doc << " is missing";
  const CommandResult r = run_slideformer("train --help-markdown");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("| `learning_rate` |"), std::string::npos) << r.out;
  EXPECT_TRUE(read_text(doc) == r.out)
      << "docs/config.md is stale: regenerate it with\n  build/slideformer train --help-markdown "
         "> docs/config.md";
}

}  // namespace
}  // namespace sf
