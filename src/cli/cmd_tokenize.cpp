// `slideformer tokenize` — owned by the tokenizer work (issue: tokenizer and data pipeline).
#include "cli/commands.h"
#include "core/error.h"

namespace sf {

int cmd_tokenize(const std::vector<std::string>&) {
  SF_FAIL("tokenize: the Hugging Face tokenizer is not built yet");
}

}  // namespace sf
