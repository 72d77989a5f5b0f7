// defines: sf::kSumSquaresBlock, sf::kSumSquaresLanes, sf::SumSquaresAddFn,
//          sf::pick_sum_squares_add, sf::sum_lanes
// The pieces of sum_squares's fixed order (optim/sum_squares.cpp), so that a pass which reads
// the gradient anyway (adamw_step with a Σ g² out) forms the same sum, bit for bit, from the
// tiles it has just read: a block of kSumSquaresBlock elements is summed into kSumSquaresLanes
// lanes (lane j: the elements i with i % 16 == j, in increasing i), the lanes are added 0..15,
// and the blocks' sums are added in block order.
#pragma once

#include <cstdint>

#include "optim/adamw.h"

namespace sf {

constexpr int64_t kSumSquaresBlock = int64_t(1) << 16;
constexpr int kSumSquaresLanes = 16;

// Adds g[begin, end)² into lane[16], in the lanes' order. begin must be a multiple of 16 from the
// block's start; a range of a block may be added in parts that end at multiples of 16 (the last
// part of the block excepted). g: F32 (bf16 false) or BF16.
using SumSquaresAddFn = void (*)(double* lane, const void* g, bool bf16, int64_t begin,
                                 int64_t end);
SumSquaresAddFn pick_sum_squares_add(OptimIsa isa);

// The block's sum: lanes 0..15 added in order.
double sum_lanes(const double* lane);

}  // namespace sf
