#include "engine/batch.h"

#include "core/error.h"

namespace sf {

int64_t Batch::valid_targets() const {
  int64_t n = 0;
  for (int32_t t : targets) n += t != -100;
  return n;
}

void Batch::validate(int64_t vocab) const {
  const size_t T = ids.size();
  SF_CHECK(T > 0, "batch: no tokens");
  SF_CHECK(targets.size() == T && positions.size() == T,
           "batch: ids, targets and positions must have the same length (", T, ", ",
           targets.size(), ", ", positions.size(), ")");
  SF_CHECK(cu_seqlens.size() >= 2 && cu_seqlens.front() == 0 && size_t(cu_seqlens.back()) == T,
           "batch: sequence boundaries must start at 0 and end at the token count ", T);
  for (size_t i = 1; i < cu_seqlens.size(); ++i)
    SF_CHECK(cu_seqlens[i] > cu_seqlens[i - 1], "batch: empty or decreasing sample at boundary ",
             i);
  for (size_t t = 0; t < T; ++t) {
    SF_CHECK(ids[t] >= 0 && ids[t] < vocab, "batch: token id ", ids[t], " at position ", t,
             " is outside the vocabulary of ", vocab, " (does the tokenizer match the model?)");
    SF_CHECK(targets[t] == -100 || (targets[t] >= 0 && targets[t] < vocab), "batch: label ",
             targets[t], " at position ", t, " is outside the vocabulary of ", vocab);
  }
}

}  // namespace sf
