// defines: sf::MicroBatch, sf::split_micro_batches — a step's samples cut into micro-batches of
// at most M tokens, whole samples each, so every layer runs the step in pieces whose workspace is
// sized by M rather than by the step (layer-major: layer i runs all micro-batches, then i+1).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/batch.h"

namespace sf {

struct MicroBatch {
  int64_t token_begin = 0, tokens = 0;  // rows [token_begin, token_begin + tokens) of the step
  int64_t sample_begin = 0, samples = 0;
  std::vector<int32_t> cu_seqlens;  // the micro-batch's own boundaries, starting at 0
};

// Greedy in sample order: a micro-batch takes samples while their total stays within
// `max_tokens`. A sample longer than `max_tokens` is an error (the plan sizes M to hold the
// longest sample). The result covers the batch exactly, in order.
std::vector<MicroBatch> split_micro_batches(const Batch& batch, int64_t max_tokens);

}  // namespace sf
