// libFuzzer target: sf::fuzz::run_tokenizer_config (tests/fuzz/entry_points.h). Built with
// -DSF_FUZZ=ON.
#include "../entry_points.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  sf::fuzz::run_tokenizer_config(data, size);
  return 0;
}
