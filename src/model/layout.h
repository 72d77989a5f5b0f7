// defines: sf::UnitLayout — where each tensor of a unit (one decoder layer, or the outer unit of
// embedding + final norm + head) lives inside that unit's flat buffers. The same offsets are used
// for fp32 master weights, Adam moments, gradients and the compute-dtype copies, on every tier.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "model/spec.h"

namespace sf {

struct UnitLayout {
  struct Entry {
    int kind = 0;  // LayerTensor or OuterTensor value
    TensorDesc desc;
    int64_t offset = 0;  // in elements
    int64_t numel = 0;
  };
  std::vector<Entry> entries;  // present tensors only, in layout order
  std::vector<int> index;      // kind -> position in entries, -1 when absent
  int64_t numel = 0;           // total, padding included

  const Entry* find(int kind) const {
    return kind < int(index.size()) && index[kind] >= 0 ? &entries[index[kind]] : nullptr;
  }
  // A view of tensor `kind` inside a flat buffer of dtype `dt`; an empty Tensor when absent.
  Tensor view(int kind, void* base, DType dt) const;
};

// Tensors start on 128-element boundaries so every view is aligned for vector loads and GEMMs.
constexpr int64_t kUnitAlignElems = 128;

UnitLayout layer_layout(const ModelSpec& spec, int64_t layer);
UnitLayout outer_layout(const ModelSpec& spec);

}  // namespace sf
