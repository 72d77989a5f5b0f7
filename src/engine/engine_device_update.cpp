// The updates of the GPU-resident units (the embedding, the head and the bottom decoder layers
// the plan keeps there): each on the compute stream, with the same AdamW as the host's. Without
// clipping right after the unit's backward, from its fp32 gradient; with clipping once the step's
// norm is known (update_resident_clipped), from the compute-dtype gradient it kept (the
// embedding: its fp32 one).
#include <string>

#include "engine/engine.h"
#include "engine/engine_slot.h"

namespace sf {

bool Engine::on_device(const OuterPart& o) const { return host_[size_t(o.unit)]->on_device; }

void Engine::reduce_on_device(int u, Tensor grads, Event& ready) {
  be_.sum_squares(parts_.sumsq + u, parts_.compute_partials, grads, *compute_);
  be_.record(ready, *compute_);
  be_.wait(*grad_d2h_, ready);
  be_.copy(host_sumsq_ + u, parts_.sumsq + u, sizeof(double), *grad_d2h_);
  UpdateWorker* w = worker_.get();
  double* ss = host_sumsq_ + u;
  be_.host_callback(*grad_d2h_, [w, u, ss] { w->device_reduced(u, *ss); });
}

Tensor Engine::kept_gradient(int u) const {
  const UnitState& h = *host_[size_t(u)];
  return Tensor(h.grad, dt_, {h.layout.numel});
}

void Engine::keep_gradient(int u, Tensor grads, Event& ready) {
  const Tensor kept = kept_gradient(u);
  be_.convert(kept, grads, *compute_);
  reduce_on_device(u, kept, ready);
}

void Engine::adamw_on_device(int u, Tensor grads, Tensor weights, float grad_scale, Event* done) {
  UnitState& h = *host_[size_t(u)];
  const int64_t n = h.layout.numel;
  AdamWParams hp = opt_.adamw;
  hp.lr = lr_;
  Event* t = tmark(*compute_);
  be_.adamw(Tensor(h.master, DType::kF32, {n}), Tensor(h.m, DType::kF32, {n}),
            Tensor(h.v, DType::kF32, {n}), grads, weights, hp, step_, grad_scale,
            parts_.nonfinite + u, *compute_);
  tspan(TraceTrack::kCompute, "AdamW " + unit_name(u) + " (device)", t, *compute_, uint64_t(n) * 4);
  Event& updated = *device_updated_[size_t(u)];
  be_.record(updated, *compute_);
  if (done) be_.record(*done, *compute_);
  // The count of weights the update left non-finite comes back on the gradient stream (nothing
  // later there waits for this update), and the worker stops the run where it is above 0: the
  // next wait or step raises it (sync_state, before any save, waits for this stream).
  be_.wait(*grad_d2h_, updated);
  be_.copy(host_nonfinite_ + u, parts_.nonfinite + u, sizeof(int64_t), *grad_d2h_);
  UpdateWorker* w = worker_.get();
  const int64_t* bad = host_nonfinite_ + u;
  be_.host_callback(*grad_d2h_,
                    [w, u, bad, step = step_, lr = lr_] { w->device_updated(u, step, *bad, lr); });
}

void Engine::update_on_device(OuterPart& o, float grad_scale) {
  void* weights = static_cast<char*>(parts_.outer_params) + size_t(o.offset) * dtype_size(dt_);
  // From the gradient it keeps (the head, clipping) or its fp32 range of the outer buffer;
  // stage_free: that gradient has been read.
  adamw_on_device(o.unit, host_[size_t(o.unit)]->grad ? kept_gradient(o.unit) : outer_grads(o),
                  Tensor(weights, dt_, {o.numel}), grad_scale, o.stage_free.get());
  o.version = step_;  // the weights on the device carry this step's update
}

void Engine::update_resident_clipped(float clip) {
  for (OuterPart* o : {embed_part_.get(), head_part_.get()})
    if (on_device(*o)) update_on_device(*o, clip);
  for (int j = 0; j < int(spec_.layers); ++j) {
    const UnitState& h = *host_[size_t(1 + j)];
    if (!h.on_device) continue;
    // Into the weights of a slot that still holds the layer (the bottom W after a backward),
    // which then carry this step's update; any other is cast again from its master.
    Slot& s = slot_of(j);
    const bool cached = s.layer == j && s.version == want_version_;
    const int64_t n = h.layout.numel;
    adamw_on_device(1 + j, kept_gradient(1 + j),
                    cached ? Tensor(s.mem.params, dt_, {n}) : Tensor(), clip, nullptr);
    if (cached) {
      s.version = step_;
      be_.record(*s.params_free, *compute_);
    }
  }
}

}  // namespace sf
