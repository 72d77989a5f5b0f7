#include "engine/unit_state.h"

namespace sf {

namespace {
size_t round_up(size_t n) { return (n + 255) / 256 * 256; }
}  // namespace

size_t UnitState::state_bytes(int64_t numel) { return 3 * master_bytes(numel); }

size_t UnitState::master_bytes(int64_t numel) { return round_up(size_t(numel) * 4); }

size_t UnitState::host_state_bytes(int64_t numel, bool on_device, bool on_nvme,
                                   bool master_on_nvme) {
  if (on_device || master_on_nvme) return 0;
  return on_nvme ? master_bytes(numel) : state_bytes(numel);
}

size_t UnitState::grad_bytes(int64_t numel, DType compute) {
  return round_up(size_t(numel) * dtype_size(compute));
}

UnitLayout slice_layout(const UnitLayout& whole, size_t first, size_t end) {
  UnitLayout u;
  u.index.assign(whole.index.size(), -1);
  const int64_t base = first < whole.entries.size() ? whole.entries[first].offset : whole.numel;
  for (size_t k = first; k < end; ++k) {
    UnitLayout::Entry e = whole.entries[k];
    e.offset -= base;
    u.index[size_t(e.kind)] = int(u.entries.size());
    u.entries.push_back(std::move(e));
  }
  u.numel = (end < whole.entries.size() ? whole.entries[end].offset : whole.numel) - base;
  return u;
}

std::vector<UnitLayout> unit_layouts(const ModelSpec& spec) {
  const UnitLayout outer = outer_layout(spec);
  std::vector<UnitLayout> units{slice_layout(outer, 0, 1)};
  for (int64_t i = 0; i < spec.layers; ++i) units.push_back(layer_layout(spec, i));
  units.push_back(slice_layout(outer, 1, outer.entries.size()));
  return units;
}

void UnitState::carve(void* state, void* g, bool master_only) {
  char* p = static_cast<char*>(state);
  const size_t n = master_bytes(layout.numel);
  master = reinterpret_cast<float*>(p);
  m = master_only ? nullptr : reinterpret_cast<float*>(p + n);
  v = master_only ? nullptr : reinterpret_cast<float*>(p + 2 * n);
  grad = g;
}

}  // namespace sf
