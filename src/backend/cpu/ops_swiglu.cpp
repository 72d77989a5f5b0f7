// defines: sf::cpu::swiglu_forward, swiglu_backward — out = silu(gate) · up,
// silu(x) = x / (1 + exp(-x)) as torch computes it in fp32.
#include <cmath>
#include <initializer_list>
#include <utility>

#include "backend/cpu/ops.h"
#include "core/thread_pool.h"

namespace sf::cpu {
namespace {

constexpr int64_t kGrain = 1 << 14;

void check_same(const char* op, std::initializer_list<std::pair<const char*, const Tensor*>> ts) {
  const Tensor& first = *ts.begin()->second;
  for (auto [name, t] : ts) {
    SF_CHECK(t->dtype == DType::kF32, op, ": ", name, " must be F32, got ", dtype_name(t->dtype));
    SF_CHECK(t->numel() == first.numel(), op, ": ", name, " ", t->shape_str(), " does not match ",
             ts.begin()->first, " ", first.shape_str());
  }
}

}  // namespace

void swiglu_forward(Tensor out, Tensor gate, Tensor up) {
  check_same("swiglu_forward", {{"out", &out}, {"gate", &gate}, {"up", &up}});
  const float *g = gate.f32(), *u = up.f32();
  float* o = out.f32();  // may alias gate or up
  parallel_for(out.numel(), kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
  });
}

// d/dg [g·σ(g)] = σ(g)·(1 + g·(1 − σ(g)))
void swiglu_backward(Tensor dgate, Tensor dup, Tensor dout, Tensor gate, Tensor up) {
  check_same("swiglu_backward",
             {{"dgate", &dgate}, {"dup", &dup}, {"dout", &dout}, {"gate", &gate}, {"up", &up}});
  const float *d = dout.f32(), *g = gate.f32(), *u = up.f32();
  float *dg = dgate.f32(), *du = dup.f32();  // may alias gate/up: inputs read before writing
  parallel_for(dout.numel(), kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float gi = g[i], ui = u[i], di = d[i];
      const float denom = 1.0f + std::exp(-gi);
      const float sig = 1.0f / denom;
      dg[i] = di * ui * sig * (1.0f + gi * (1.0f - sig));
      du[i] = di * (gi / denom);  // silu(gate) exactly as the forward computes it
    }
  });
}

}  // namespace sf::cpu
