// defines: sf::cpu::embedding_forward, embedding_backward
#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/ops.h"
#include "core/thread_pool.h"

namespace sf::cpu {
namespace {

// Every id is checked before any thread starts: a throw inside parallel_for would escape a
// worker thread.
void check_ids(const char* op, const int32_t* ids, int64_t T, int64_t V) {
  for (int64_t t = 0; t < T; ++t)
    SF_CHECK(ids[t] >= 0 && ids[t] < V, op, ": token ", t, " has id ", ids[t],
             " outside the vocabulary [0, ", V, "); check the tokenizer matches the model");
}

}  // namespace

void embedding_forward(Tensor out, Tensor ids, Tensor table) {
  SF_CHECK(out.dtype == DType::kF32 && table.dtype == DType::kF32 && ids.dtype == DType::kI32,
           "embedding_forward: expected F32 out/table and I32 ids, got ", dtype_name(out.dtype),
           ", ", dtype_name(table.dtype), ", ", dtype_name(ids.dtype));
  const int64_t T = ids.numel(), V = table.rows(), C = table.cols();
  SF_CHECK(table.ndim == 2 && out.rows() == T && out.cols() == C,
           "embedding_forward: shapes do not match out[T,C] = table[V,C][ids[T]]: out ",
           out.shape_str(), ", ids ", ids.shape_str(), ", table ", table.shape_str());
  const int32_t* id = ids.i32();
  check_ids("embedding_forward", id, T, V);
  const float* tab = table.f32();
  float* o = out.f32();
  parallel_for(T, 64, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      std::memcpy(o + t * C, tab + int64_t(id[t]) * C, size_t(C) * sizeof(float));
  });
}

void embedding_backward(Tensor dtable, Tensor ids, Tensor dout) {
  SF_CHECK(dtable.dtype == DType::kF32 && dout.dtype == DType::kF32 && ids.dtype == DType::kI32,
           "embedding_backward: expected F32 dtable/dout and I32 ids, got ",
           dtype_name(dtable.dtype), ", ", dtype_name(dout.dtype), ", ", dtype_name(ids.dtype));
  const int64_t T = ids.numel(), V = dtable.rows(), C = dtable.cols();
  SF_CHECK(dtable.ndim == 2 && dout.rows() == T && dout.cols() == C,
           "embedding_backward: shapes do not match dtable[V,C] += scatter(dout[T,C], ids[T]): ",
           "dtable ", dtable.shape_str(), ", ids ", ids.shape_str(), ", dout ", dout.shape_str());
  const int32_t* id = ids.i32();
  check_ids("embedding_backward", id, T, V);
  const float* g = dout.f32();
  float* d = dtable.f32();
  // The call's contributions to a row are summed from zero in token order and the sum is then
  // added to the row, as a GEMM adds its product: a table accumulated over several calls (the
  // micro-batches of a step, or the devices of a data-parallel one, summed in order) gets the
  // same bits however the tokens are cut. Tokens grouped by id, stable: token order within each.
  std::vector<int64_t> order(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) order[size_t(t)] = t;
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return id[a] < id[b]; });
  // Ids repeat, so threads own column ranges instead of tokens: race-free and deterministic.
  parallel_for(C, 32, [&](int64_t c0, int64_t c1) {
    std::vector<float> acc(size_t(c1 - c0));
    for (size_t i = 0; i < order.size();) {
      const int32_t row_id = id[order[i]];
      const float* first = g + order[i] * C;
      for (int64_t c = c0; c < c1; ++c) acc[size_t(c - c0)] = first[c];
      for (++i; i < order.size() && id[order[i]] == row_id; ++i) {
        const float* src = g + order[i] * C;
        for (int64_t c = c0; c < c1; ++c) acc[size_t(c - c0)] += src[c];
      }
      float* row = d + int64_t(row_id) * C;
      for (int64_t c = c0; c < c1; ++c) row[c] += acc[size_t(c - c0)];
    }
  });
}

}  // namespace sf::cpu
