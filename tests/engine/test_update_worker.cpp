// The update worker stops a run whose update leaves a weight non-finite (issue 14: weights finite
// after every update), whichever path updated it — a ring piece, a held unit, a clipped unit — and
// names the step, the unit and what to do; finite updates go on.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "engine/update_worker.h"

namespace sf {
namespace {

struct Unit {
  std::vector<float> p, m, v, g;
  UnitState state;
  explicit Unit(int64_t n, bool held)
      : p(size_t(n), 0.5f), m(size_t(n), 0.0f), v(size_t(n), 0.0f), g(size_t(n), -1.0f) {
    state.layout.numel = n;
    UnitLayout::Entry e;
    e.desc.name = "model.layers.0.mlp.down_proj.weight";
    e.numel = n;
    state.layout.entries.push_back(e);
    state.master = p.data();
    state.m = m.data();
    state.v = v.data();
    state.grad = held ? g.data() : nullptr;
  }
};

std::string error_of(UpdateWorker& w, int unit) {
  try {
    w.wait_updated(unit, 1);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(UpdateWorker, AnUpdateThatLeavesWeightsNonFiniteStopsTheRun) {
  const int64_t n = 100;
  const AdamWParams hp{1e37f, 0.9f, 0.999f, 1e-8f, 0.0f};  // step 1: p += lr
  for (int path = 0; path < 3; ++path) {  // ring piece, held unit, clipped unit
    Unit u(n, path > 0);
    u.p[7] = 3.4e38f;  // + lr overflows; 0.5 + lr does not
    std::vector<UnitState*> units{&u.state};
    UpdateWorker w(units, DType::kF32, hp, path == 2 ? 1e30f : 0.0f, 32);
    w.begin_step(1, hp.lr);
    if (path == 0) {
      for (int64_t off = 0; off < n; off += 32)
        w.piece_ready(0, off, std::min<int64_t>(32, n - off), u.g.data() + off, [] {});
    } else {
      w.grad_ready(0);
    }
    const std::string e = error_of(w, 0);
    EXPECT_NE(e.find("step 1: the AdamW update of unit 0 (model.layers.0.mlp.down_proj.weight) "
                     "left 1 weights non-finite"),
              std::string::npos)
        << "path " << path << ": " << e;
    EXPECT_NE(e.find("lower learning_rate"), std::string::npos) << e;
  }
  Unit fine(n, true);  // the same update without the overflow: no error
  std::vector<UnitState*> units{&fine.state};
  UpdateWorker w(units, DType::kF32, hp, 0.0f, 32);
  w.begin_step(1, hp.lr);
  w.grad_ready(0);
  EXPECT_EQ(error_of(w, 0), "");
  EXPECT_EQ(w.wait_grad_norm(), 10.0);  // √(100 · 1²)
}

}  // namespace
}  // namespace sf
