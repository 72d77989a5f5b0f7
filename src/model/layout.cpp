#include "model/layout.h"

namespace sf {
namespace {

template <size_t N>
UnitLayout make_layout(const std::array<TensorDesc, N>& descs) {
  UnitLayout L;
  L.index.assign(N, -1);
  for (size_t k = 0; k < N; ++k) {
    if (!descs[k].present) continue;
    UnitLayout::Entry e;
    e.kind = int(k);
    e.desc = descs[k];
    e.numel = 1;
    for (int64_t s : e.desc.shape) e.numel *= s;
    e.offset = L.numel;
    L.numel += (e.numel + kUnitAlignElems - 1) / kUnitAlignElems * kUnitAlignElems;
    L.index[k] = int(L.entries.size());
    L.entries.push_back(std::move(e));
  }
  return L;
}

}  // namespace

Tensor UnitLayout::view(int kind, void* base, DType dt) const {
  const Entry* e = find(kind);
  if (!e || !base) return Tensor();
  Tensor t;
  t.data = static_cast<char*>(base) + size_t(e->offset) * dtype_size(dt);
  t.dtype = dt;
  t.ndim = int(e->desc.shape.size());
  for (int i = 0; i < t.ndim; ++i) t.shape[i] = e->desc.shape[i];
  return t;
}

UnitLayout layer_layout(const ModelSpec& spec, int64_t layer) {
  return make_layout(layer_tensors(spec, layer));
}
UnitLayout outer_layout(const ModelSpec& spec) { return make_layout(outer_tensors(spec)); }

}  // namespace sf
