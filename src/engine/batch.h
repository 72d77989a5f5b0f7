// defines: sf::Batch — one step's tokens, as the engine takes them.
#pragma once

#include <cstdint>
#include <vector>

namespace sf {

// One step's tokens, packed: samples back to back, targets already shifted (-100 = no loss).
struct Batch {
  std::vector<int32_t> ids, targets, positions, cu_seqlens;
  int64_t tokens() const { return int64_t(ids.size()); }
  int64_t valid_targets() const;
  // Checks shapes, ranges and boundaries; errors name what is wrong.
  void validate(int64_t vocab) const;
};

}  // namespace sf
