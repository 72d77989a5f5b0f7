#include "engine/micro_batch.h"

#include "core/error.h"

namespace sf {

std::vector<MicroBatch> split_micro_batches(const Batch& b, int64_t max_tokens) {
  SF_CHECK(max_tokens > 0, "micro-batch size must be positive (got ", max_tokens, ")");
  const int64_t nseq = int64_t(b.cu_seqlens.size()) - 1;
  std::vector<MicroBatch> out;
  MicroBatch cur;
  auto flush = [&] {
    if (cur.samples == 0) return;
    out.push_back(std::move(cur));
    cur = MicroBatch();
  };
  for (int64_t i = 0; i < nseq; ++i) {
    const int64_t begin = b.cu_seqlens[size_t(i)], len = b.cu_seqlens[size_t(i + 1)] - begin;
    SF_CHECK(len <= max_tokens, "sample ", i, " has ", len,
             " tokens, more than the micro-batch of ", max_tokens,
             " tokens the plan allows: raise --micro-batch-tokens or the GPU budget, or lower "
             "--cutoff-len");
    if (cur.samples > 0 && cur.tokens + len > max_tokens) flush();
    if (cur.samples == 0) {
      cur.token_begin = begin;
      cur.sample_begin = i;
      cur.cu_seqlens = {0};
    }
    cur.tokens += len;
    cur.samples += 1;
    cur.cu_seqlens.push_back(int32_t(cur.tokens));
  }
  flush();
  return out;
}

}  // namespace sf
