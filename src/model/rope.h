// defines: sf::rope_inv_freq — the rotary frequencies of a ModelSpec, computed as transformers does.
#pragma once

#include <vector>

#include "model/spec.h"

namespace sf {

// inv_freq[i] = 1 / theta^(2i/D) in fp32 (torch's arithmetic), then llama3 scaling when the
// spec asks for it (transformers' _compute_llama3_parameters).
std::vector<float> rope_inv_freq(const ModelSpec& spec);

}  // namespace sf
