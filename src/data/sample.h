// defines: sf::Sample — one training sample: token ids and their labels.
#pragma once

#include <cstdint>
#include <vector>

namespace sf {

struct Sample {
  std::vector<int32_t> ids;
  std::vector<int32_t> labels;  // same length; -100 = no loss (Hugging Face convention, unshifted)
};

}  // namespace sf
