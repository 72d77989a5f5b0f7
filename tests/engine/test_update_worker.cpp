// The update worker stops a run whose update leaves a weight non-finite (issue 14: weights finite
// after every update), whichever path updated it — a ring piece, a held unit, a clipped unit — and
// names the step, the unit and what to do; finite updates go on. A ring piece's share of the norm
// comes from its update's pass, the same bits as sum_squares. With clipping, a moments_later
// unit's master is ready for the next forward before its m and v, which wait_moments and wait_all
// wait for. A clipped unit's Σ g² formed on the device is taken as given.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/update_worker.h"
#include "optim/adamw.h"
#include "optim/clip.h"

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

// Σ g² of a unit's whole gradient, as the engine forms it on the device before the D2H.
double unit_sumsq(const Unit& u) {
  return sum_squares(u.g.data(), DType::kF32, int64_t(u.g.size()));
}

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
      w.grad_ready(0, unit_sumsq(u));
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
  w.grad_ready(0, unit_sumsq(fine));
  EXPECT_EQ(error_of(w, 0), "");
  EXPECT_EQ(w.wait_grad_norm(), 10.0);  // √(100 · 1²)
}

// Without clipping a ring piece's Σ g² comes from its update's own pass: the reported norm is the
// bits of sum_squares over each piece (pieces in order, then units in order), a held unit's as
// given beside it, and the weights are the reference's.
TEST(UpdateWorker, TheRingsNormComesFromTheUpdateAndIsSumSquaresBits) {
  const int64_t n = 3 * 65536 + 4099, piece = 65536 + 16;  // pieces across sum blocks' bounds
  const AdamWParams hp{1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f};
  Unit ring(n, false), held(n, true), ref_ring(n, false), ref_held(n, true);
  for (int64_t i = 0; i < n; ++i) {
    ring.g[size_t(i)] = ref_ring.g[size_t(i)] = std::sin(float(i)) * float(1 + i % 5);
    held.g[size_t(i)] = ref_held.g[size_t(i)] = std::cos(float(i)) * 0.25f;
  }
  std::vector<UnitState*> units{&ring.state, &held.state};
  UpdateWorker w(units, DType::kF32, hp, 0.0f, piece);
  w.begin_step(1, hp.lr);
  double ring_ss = 0, held_ss = 0;
  for (int64_t off = 0; off < n; off += piece) {
    const int64_t k = std::min(piece, n - off);
    ring_ss += sum_squares(ring.g.data() + off, DType::kF32, k);
    held_ss += sum_squares(held.g.data() + off, DType::kF32, k);
    w.piece_ready(0, off, k, ring.g.data() + off, [] {});
  }
  w.grad_ready(1, held_ss);
  EXPECT_EQ(w.wait_grad_norm(), std::sqrt(ring_ss + held_ss));
  w.wait_all();
  for (Unit* r : {&ref_ring, &ref_held})
    adamw_step_reference(r->p.data(), r->m.data(), r->v.data(), r->g.data(), DType::kF32, n, 1, hp,
                         1.0f);
  EXPECT_EQ(ring.p, ref_ring.p);
  EXPECT_EQ(ring.m, ref_ring.m);
  EXPECT_EQ(ring.v, ref_ring.v);
  EXPECT_EQ(held.p, ref_held.p);
}

// Two clipped units, the lower one moments_later, over two steps: after wait_updated each master
// is the whole update's, and the upper unit's m and v (written with it); after wait_moments (step
// 1) or wait_all (step 2) the lower unit's m and v are too. The moments pass runs after every
// master, tile by tile (a unit of 4 M parameters in tiles of 4 Ki: a thousand tiles), and the
// expected values are computed before the step, so the checks come right after the masters: a
// wait that returned early would find the moments unfinished.
TEST(UpdateWorker, TheMomentsOfAUnitSplitComeAfterItsMasterAndBeforeWaitMomentsReturns) {
  const int64_t n = int64_t(4) << 20;
  const AdamWParams hp{1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f};
  Unit lower(n, true), upper(n, true), ref_lower(n, true), ref_upper(n, true);
  double sumsq = 0;
  for (int64_t i = 0; i < n; ++i) {
    lower.g[size_t(i)] = ref_lower.g[size_t(i)] = float(i % 13) - 6.0f;
    upper.g[size_t(i)] = ref_upper.g[size_t(i)] = float(i % 7) * 0.5f;
    sumsq += double(lower.g[size_t(i)]) * lower.g[size_t(i)] +
             double(upper.g[size_t(i)]) * upper.g[size_t(i)];
  }
  lower.state.moments_later = true;
  std::vector<UnitState*> units{&lower.state, &upper.state};
  UpdateWorker w(units, DType::kF32, hp, 1.0f, int64_t(4) << 10);
  for (int64_t step = 1; step <= 2; ++step) {
    const float clip = clip_factor(std::sqrt(sumsq), 1.0f);  // the same gradient each step
    for (Unit* r : {&ref_lower, &ref_upper})
      adamw_step_reference(r->p.data(), r->m.data(), r->v.data(), r->g.data(), DType::kF32, n, step,
                           hp, clip);
    w.begin_step(step, hp.lr);
    w.grad_ready(0, unit_sumsq(lower));
    w.grad_ready(1, unit_sumsq(upper));
    w.wait_updated(0, step);
    w.wait_updated(1, step);
    if (step == 1)
      w.wait_moments(0, step);
    else
      w.wait_all();
    EXPECT_EQ(lower.m, ref_lower.m) << "step " << step;
    EXPECT_EQ(lower.v, ref_lower.v) << "step " << step;
    EXPECT_EQ(lower.p, ref_lower.p) << "step " << step;
    EXPECT_EQ(upper.p, ref_upper.p) << "step " << step;
    EXPECT_EQ(upper.m, ref_upper.m) << "step " << step;
    EXPECT_EQ(upper.v, ref_upper.v) << "step " << step;
    EXPECT_NEAR(w.wait_grad_norm(), std::sqrt(sumsq), 1e-9 * std::sqrt(sumsq));
    w.wait_moments(1, step);  // not split: at once
  }
}

// A clipped unit's Σ g² is formed on the device before its D2H (grad_ready carries it): the worker
// takes that sum for the norm, as given, instead of reading the gradient again — a sum unlike the
// gradient's own shows in the norm and in the clip factor the weights get.
TEST(UpdateWorker, AClippedUnitsSumFormedOnTheDeviceIsTakenAsGiven) {
  const int64_t n = 100;  // g = -1: its own Σ g² is 100
  const AdamWParams hp{1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f};
  Unit a(n, true), b(n, true), ref_a(n, true), ref_b(n, true);
  std::vector<UnitState*> units{&a.state, &b.state};
  UpdateWorker w(units, DType::kF32, hp, 1.0f, 32);
  w.begin_step(1, hp.lr);
  w.grad_ready(0, 300.0);          // as if formed elsewhere: not the gradient's 100
  w.grad_ready(1, unit_sumsq(b));  // 100
  w.wait_all();
  EXPECT_EQ(w.wait_grad_norm(), 20.0);  // √(300 + 100)
  const float clip = clip_factor(20.0, 1.0f);
  for (Unit* r : {&ref_a, &ref_b})
    adamw_step_reference(r->p.data(), r->m.data(), r->v.data(), r->g.data(), DType::kF32, n, 1, hp,
                         clip);
  EXPECT_EQ(a.p, ref_a.p);
  EXPECT_EQ(a.m, ref_a.m);
  EXPECT_EQ(b.p, ref_b.p);
  EXPECT_EQ(b.v, ref_b.v);
}

}  // namespace
}  // namespace sf
