// The engine's step, read top to bottom: batch upload, unit loads, the forward over the window,
// the head, the recomputing backward and the hand-off of gradients to the optimizer.
// Construction and state access are in engine_setup.cpp, the GPU-resident units' updates in
// engine_device_update.cpp.
#include "engine/engine.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "engine/engine_slot.h"
#include "optim/clip.h"

namespace sf {

void Engine::check_batch(const Batch& b) const {
  const int64_t T = b.tokens();
  const int64_t nseq = int64_t(b.cu_seqlens.size()) - 1;
  SF_CHECK(T <= opt_.max_tokens, "batch of ", T, " tokens exceeds the planned maximum of ",
           opt_.max_tokens, " (raise max_tokens)");
  SF_CHECK(nseq <= opt_.max_sequences, "batch of ", nseq,
           " samples exceeds the planned maximum of ", opt_.max_sequences);
  b.validate(spec_.vocab);
  if (spec_.sliding_window)
    for (int64_t i = 0; i < nseq; ++i)
      SF_CHECK(b.cu_seqlens[size_t(i + 1)] - b.cu_seqlens[size_t(i)] <= *spec_.sliding_window,
               "sample ", i, " is longer than the model's sliding_window of ",
               *spec_.sliding_window, " tokens, which this engine does not implement: use a ",
               "cutoff length of at most ", *spec_.sliding_window);
}

void Engine::upload_batch(const Batch& b) {
  const int64_t T = b.tokens(), C = spec_.hidden;
  std::vector<MicroBatch> mbs = split_micro_batches(b, plan_.micro_tokens);
  // The previous step's reads of the staging buffer are complete: step() synchronised compute.
  // Layout (I32): ids, targets, positions [T each], then each micro-batch's own cu_seqlens.
  auto* h = static_cast<int32_t*>(host_batch_.data());
  std::memcpy(h, b.ids.data(), size_t(T) * 4);
  std::memcpy(h + T, b.targets.data(), size_t(T) * 4);
  std::memcpy(h + 2 * T, b.positions.data(), size_t(T) * 4);
  int64_t used = 3 * T;
  std::vector<int64_t> cu_at;
  for (const MicroBatch& m : mbs) {
    cu_at.push_back(used);
    std::memcpy(h + used, m.cu_seqlens.data(), m.cu_seqlens.size() * 4);
    used += int64_t(m.cu_seqlens.size());
  }
  be_.copy(parts_.batch, h, size_t(used) * 4, *compute_);
  auto* d = static_cast<int32_t*>(parts_.batch);
  micro_.clear();
  for (size_t k = 0; k < mbs.size(); ++k) {
    Micro m;
    const int64_t t0 = mbs[k].token_begin, n = mbs[k].tokens;
    m.in.tokens = n;
    m.in.ids = Tensor(d + t0, DType::kI32, {n});
    m.in.targets = Tensor(d + T + t0, DType::kI32, {n});
    m.in.positions = Tensor(d + 2 * T + t0, DType::kI32, {n});
    m.in.cu_seqlens = Tensor(d + cu_at[k], DType::kI32, {mbs[k].samples + 1});
    m.in.inv_freq = inv_freq_dev_;
    m.ws = LayerWorkspace::carve(spec_, n, dt_, parts_.workspace, plan_.mlp_tokens);
    m.head_ws = HeadWorkspace::carve(spec_, n, dt_, parts_.head_workspace);
    m.mb = std::move(mbs[k]);
    micro_.push_back(std::move(m));
  }
  for (int k = 0; k < 2; ++k) {
    act_[k] = Tensor(parts_.act[k], dt_, {T, C});
    restore_[k] = Tensor(parts_.restore[k], dt_, {T, C});
  }
  grad_ = Tensor(parts_.grad, dt_, {T, C});
}

Tensor Engine::rows(Tensor t, const Micro& m) const {
  return t.row_range(m.mb.token_begin, m.mb.tokens);
}

void Engine::select(const Micro& m) {
  be_.set_host_cu_seqlens(m.in.cu_seqlens, m.mb.cu_seqlens);  // no read-back in attention calls
}

// fp32 master weights go to the device tile by tile and are cast there into the compute dtype,
// all on the H2D stream (stream order keeps the tile from being overwritten before its cast).
void Engine::upload_unit(int unit, void* device_params) {
  const UnitState& h = *host_[size_t(unit)];
  const int64_t n = h.layout.numel, tile = plan_.upload_tile;
  const size_t dsz = dtype_size(dt_);
  Event* t = tmark(*h2d_);
  if (h.on_device) {  // its master is on the device already: only the cast, after its update
    be_.wait(*h2d_, *device_updated_[size_t(unit)]);
    be_.convert(Tensor(device_params, dt_, {n}), Tensor(h.master, DType::kF32, {n}), *h2d_);
    tspan(TraceTrack::kH2D, "cast " + unit_name(unit) + " (GPU-resident)", t, *h2d_);
    return;
  }
  // A master on NVMe comes from a load slot, held until its copies are done.
  const float* master = h.master_on_nvme ? nvme_->acquire_master(unit) : h.master;
  for (int64_t off = 0; off < n; off += tile) {
    const int64_t k = std::min(tile, n - off);
    be_.copy(parts_.upload, master + off, size_t(k) * 4, *h2d_);
    be_.convert(Tensor(static_cast<char*>(device_params) + size_t(off) * dsz, dt_, {k}),
                Tensor(parts_.upload, DType::kF32, {k}), *h2d_);
  }
  if (h.master_on_nvme) {
    NvmeTier* tier = nvme_.get();
    be_.host_callback(*h2d_, [tier, unit] { tier->release_master(unit); });
  }
  tspan(TraceTrack::kH2D, "load " + unit_name(unit), t, *h2d_, uint64_t(n) * 4);
}

Event* Engine::tmark(Stream& s) { return trace_ ? trace_->mark(s) : nullptr; }

void Engine::tspan(TraceTrack track, const std::string& name, Event* begin, Stream& s,
                   uint64_t bytes) {
  if (trace_) trace_->gpu_span(track, name, begin, trace_->mark(s), bytes);
}

std::string Engine::unit_name(int unit) const {
  if (unit == 0) return "embedding";
  if (unit == int(spec_.layers) + 1) return "head";
  return "L" + std::to_string(unit - 1);
}

void Engine::wait_updated(int unit) {
  const double t0 = trace_ ? Trace::now_us() : 0;
  worker_->wait_updated(unit, want_version_);
  if (!trace_) return;
  const double t1 = Trace::now_us();
  if (t1 - t0 > 20) trace_->host_span(TraceTrack::kEngine, "wait for " + unit_name(unit), t0, t1);
}

void Engine::prefetch(OuterPart& o) {
  if (o.version == want_version_) return;
  wait_updated(o.unit);
  be_.wait(*h2d_, *o.params_free);
  upload_unit(o.unit, static_cast<char*>(parts_.outer_params) + size_t(o.offset) * dtype_size(dt_));
  be_.record(*o.loaded, *h2d_);
  o.version = want_version_;
}

void Engine::ensure_loaded(OuterPart& o) {
  prefetch(o);
  be_.wait(*compute_, *o.loaded);
}

Tensor Engine::outer_grads(const OuterPart& o) const {
  return Tensor(parts_.outer_grads + o.grad_offset, DType::kF32, {o.numel});
}

OuterParams Engine::outer_grad_views() const {
  OuterParams g;
  g.embed =
      host_[0]->layout.view(int(OuterTensor::kEmbed), outer_grads(*embed_part_).data, DType::kF32);
  const UnitLayout& h = host_.back()->layout;
  g.norm = h.view(int(OuterTensor::kFinalNorm), outer_grads(*head_part_).data, DType::kF32);
  g.head = spec_.tie_word_embeddings
               ? g.embed
               : h.view(int(OuterTensor::kLmHead), outer_grads(*head_part_).data, DType::kF32);
  return g;
}

void Engine::clear_outer_grads(OuterPart& o) {
  // Untied, the two parts share the buffer: the other's D2H source must have been read (the
  // fp32 buffer itself without a stage); stream order covers the other's conversion.
  const bool shared = outer_shared_;
  if (!parts_.outer_stage) {
    be_.wait(*compute_, *o.stage_free);
    if (shared) be_.wait(*compute_, *other(o).stage_free);
  }
  if (coll_) {  // the reduction has read it
    be_.wait(*compute_, *o.grads_read);
    if (shared) be_.wait(*compute_, *other(o).grads_read);
  }
  be_.fill_zero(outer_grads(o), *compute_);
}

Engine::OuterPart& Engine::other(const OuterPart& o) {
  return &o == embed_part_.get() ? *head_part_ : *embed_part_;
}

void Engine::send_outer_gradient(OuterPart& o) {
  if (on_device(o)) {
    // The update follows at once, or, clipping, once the norm is known (step()), from the
    // gradient the unit keeps (the head's; the embedding's stays in the buffer, the step's last).
    if (host_[size_t(o.unit)]->grad) {
      keep_gradient(o.unit, outer_grads(o), *o.grads_ready);
      return;
    }
    reduce_on_device(o.unit, outer_grads(o), *o.grads_ready);
    if (ring_) update_on_device(o, 1.0f);
    return;
  }
  void* stage = parts_.outer_stage ? static_cast<char*>(parts_.outer_stage) +
                                         size_t(o.grad_offset) * dtype_size(dt_)
                                   : nullptr;
  // A shared stage: the other part's last D2H from it must be done too.
  if (stage && outer_shared_) be_.wait(reduce_stream(), *other(o).stage_free);
  reduce_and_send(o.unit, outer_grads(o).f32(), stage, o.numel, o);
}

void Engine::reduce_and_send(int unit, float* grads, void* stage, int64_t n, UnitEvents& ev) {
  Stream& r = reduce_stream();
  if (coll_) {  // summed into device 0, on the reduce stream: compute goes on meanwhile
    be_.record(*ev.grads_done, *compute_);
    be_.wait(r, *ev.grads_done);
    coll_->reduce_sum(rank_, Tensor(grads, DType::kF32, {n}), /*root=*/0, r);
    if (rank_ != 0) {  // the sum and its D2H are device 0's
      be_.record(*ev.grads_read, r);
      return;
    }
  }
  const void* src = grads;
  if (stage) {
    be_.wait(r, *ev.stage_free);  // the last D2H from the stage is done
    be_.convert(Tensor(stage, dt_, {n}), Tensor(grads, DType::kF32, {n}), r);
    src = stage;
  }
  be_.record(*ev.grads_ready, r);
  if (coll_) be_.record(*ev.grads_read, r);
  send_gradient(unit, src, *ev.grads_ready, *ev.stage_free);
}

Engine::Slot& Engine::slot_of(int layer) { return *slots_[size_t(layer % opt_.window)]; }

void Engine::load_layer(int layer) {
  Slot& s = slot_of(layer);
  if (s.layer == layer && s.version == want_version_) return;  // still cached: reuse
  UnitState& h = *host_[size_t(1 + layer)];
  wait_updated(1 + layer);
  be_.wait(*h2d_, *s.params_free);
  upload_unit(1 + layer, s.mem.params);
  be_.record(*s.loaded, *h2d_);
  s.layer = layer;
  s.version = want_version_;
  s.p = LayerParams::view(h.layout, s.mem.params, dt_);
  s.g = LayerParams::view(h.layout, s.mem.grads, DType::kF32);
}

void Engine::prefetch_nvme(int layer) {
  if (!nvme_ || layer < 0 || layer >= int(spec_.layers) ||
      !host_[size_t(1 + layer)]->master_on_nvme)
    return;
  const Slot& s = slot_of(layer);
  if (s.layer == layer && s.version == want_version_) return;  // cached: no load
  if (worker_->is_updated(1 + layer, want_version_)) nvme_->prefetch_master(1 + layer);
}

void Engine::send_gradient(int unit, const void* src, Event& ready, Event& source_free) {
  const UnitState& h = *host_[size_t(unit)];
  const int64_t n = h.layout.numel;
  const size_t dsz = dtype_size(dt_);
  UpdateWorker* w = worker_.get();
  be_.wait(*grad_d2h_, ready);
  Event* t = tmark(*grad_d2h_);
  const std::string name = "gradient " + unit_name(unit);
  if (h.grad) {  // held: the unit's own host gradient (clipping: kept until the norm is known)
    if (h.moments_later) {  // the last step's m and v are formed from it through this backward
      const int64_t last = want_version_;
      be_.host_callback(*grad_d2h_, [w, unit, last] { w->wait_moments(unit, last); });
    }
    // Its Σ g², formed here from the gradient about to be copied, comes back with it, so the host
    // does not read the gradient once more for the norm.
    double* ss = parts_.sumsq + unit;
    be_.sum_squares(ss, parts_.gradient_partials, Tensor(const_cast<void*>(src), dt_, {n}),
                    *grad_d2h_);
    be_.copy(h.grad, src, size_t(n) * dsz, *grad_d2h_);
    be_.copy(host_sumsq_ + unit, ss, sizeof(double), *grad_d2h_);
    be_.record(source_free, *grad_d2h_);
    tspan(TraceTrack::kGradD2H, name, t, *grad_d2h_, uint64_t(n) * dsz);
    const double* back = host_sumsq_ + unit;
    be_.host_callback(*grad_d2h_, [w, unit, back] { w->grad_ready(unit, *back); });
    return;
  }
  // Piece by piece through the ring: the D2H of a piece overlaps the update of the last ones.
  GradRing* ring = ring_.get();
  for (int64_t off = 0; off < n; off += plan_.grad_piece) {
    const int64_t k = std::min(plan_.grad_piece, n - off);
    const int r = ring->next();
    void* dst = ring->slot(r);
    be_.host_callback(*grad_d2h_, [ring, r] { ring->acquire(r); });
    be_.copy(dst, static_cast<const char*>(src) + size_t(off) * dsz, size_t(k) * dsz, *grad_d2h_);
    be_.host_callback(*grad_d2h_, [w, ring, unit, off, k, dst, r] {
      w->piece_ready(unit, off, k, dst, [ring, r] { ring->release(r); });
    });
  }
  be_.record(source_free, *grad_d2h_);
  tspan(TraceTrack::kGradD2H, name + " (with waits for ring slots)", t, *grad_d2h_,
        uint64_t(n) * dsz);
}

void Engine::embed_forward(const OuterParams& op) {
  Event* t = tmark(*compute_);
  for (const Micro& m : micro_)
    be_.embedding_forward(rows(act_[0], m), m.in.ids, op.embed, *compute_);
  tspan(TraceTrack::kCompute, "embedding forward", t, *compute_);
}

void Engine::forward_layers(bool save_checkpoints) {
  const int L = int(spec_.layers);
  for (int i = 0; i < L; ++i) {
    for (int j = i; j < std::min(i + opt_.window, L); ++j) load_layer(j);
    prefetch_nvme(i + opt_.window);                   // the next load's read from the disk
    if (i + opt_.window >= L) prefetch(*head_part_);  // behind the last layer's load
    Slot& s = slot_of(i);
    be_.wait(*compute_, *s.loaded);
    Tensor x = act_[i % 2], y = act_[(i + 1) % 2];
    if (save_checkpoints) {
      // x_i is complete: offload it while the layer computes.
      be_.record(*act_ready_[i % 2], *compute_);
      be_.wait(*d2h_, *act_ready_[i % 2]);
      Event* t = tmark(*d2h_);
      if (nvme_ckpt_) {  // into its staging slot, then written to the disk
        NvmeCheckpoints* c = nvme_ckpt_.get();
        const uint64_t bytes = x.bytes();
        be_.copy(c->slot_for_offload(i), x.data, bytes, *d2h_);
        be_.host_callback(*d2h_, [c, i, bytes] { c->offloaded(i, bytes); });
      } else {
        be_.copy(ckpt_[size_t(i)], x.data, x.bytes(), *d2h_);
      }
      tspan(TraceTrack::kCheckpointD2H, "checkpoint L" + std::to_string(i), t, *d2h_, x.bytes());
      be_.record(*act_saved_[i % 2], *d2h_);
      // y overwrites x_{i-1}: its offload must be done.
      if (i >= 1) be_.wait(*compute_, *act_saved_[(i + 1) % 2]);
    }
    Event* t = tmark(*compute_);
    for (Micro& m : micro_) {
      select(m);
      layer_forward(be_, spec_, s.p, m.in, m.ws, rows(x, m), rows(y, m), *compute_);
    }
    tspan(TraceTrack::kCompute, "forward L" + std::to_string(i), t, *compute_);
    be_.record(*s.params_free, *compute_);
  }
}

std::vector<Batch> Engine::split_shares(const Batch& b, int n) const {
  if (n == 1) {
    check_batch(b);
    return {b};
  }
  const int64_t nseq = int64_t(b.cu_seqlens.size()) - 1;
  SF_CHECK(nseq >= n, "a step of ", nseq, " samples cannot feed ", n,
           " GPUs (each needs at least one): raise --batch-size or lower --gpus");
  // Equal counts of samples (a per-device batch, as the trainer's --batch-size is one): share k
  // holds samples [k·nseq/n, (k+1)·nseq/n). Balanced tokens: share k starts at the first sample
  // boundary at or past k·T/n tokens, leaving every later share a sample at least.
  std::vector<int64_t> first(size_t(n) + 1, 0);
  for (int k = 0; k <= n; ++k) first[size_t(k)] = int64_t(k) * nseq / n;
  if (opt_.balance_tokens) {
    const int64_t T = b.tokens();
    for (int k = 1; k < n; ++k) {
      int64_t i = first[size_t(k - 1)] + 1;
      while (i < nseq - (n - k) && int64_t(b.cu_seqlens[size_t(i)]) * n < int64_t(k) * T) ++i;
      first[size_t(k)] = i;
    }
  }
  std::vector<Batch> shares(static_cast<size_t>(n));
  for (int k = 0; k < n; ++k) {
    const int32_t t0 = b.cu_seqlens[size_t(first[size_t(k)])];
    const int32_t t1 = b.cu_seqlens[size_t(first[size_t(k + 1)])];
    Batch& s = shares[size_t(k)];
    s.ids.assign(b.ids.begin() + t0, b.ids.begin() + t1);
    s.targets.assign(b.targets.begin() + t0, b.targets.begin() + t1);
    s.positions.assign(b.positions.begin() + t0, b.positions.begin() + t1);
    for (int64_t i = first[size_t(k)]; i <= first[size_t(k + 1)]; ++i)
      s.cu_seqlens.push_back(b.cu_seqlens[size_t(i)] - t0);
    try {
      check_batch(s);
    } catch (const Error& e) {
      SF_FAIL("GPU ", k, "'s share of the step (samples ", first[size_t(k)], "-",
              first[size_t(k + 1)] - 1, "): ", e.what());
    }
  }
  return shares;
}

void Engine::each_device(const std::vector<Batch>& shares,
                         const std::function<void(Engine&, const Batch&)>& fn) {
  if (shares.size() == 1) {
    fn(*this, shares[0]);
    return;
  }
  std::mutex mu;
  std::exception_ptr first;  // the failure that stopped the others, not their "stopped"
  auto run = [&](Engine& e, const Batch& share) {
    try {
      e.be_.bind_thread();
      fn(e, share);
    } catch (...) {
      std::lock_guard<std::mutex> lk(mu);
      if (!first) {
        first = std::current_exception();
        coll_->abort(str_cat("GPU ", e.rank_, " failed"));
      }
    }
  };
  std::vector<std::thread> threads;
  for (size_t k = 0; k + 1 < shares.size(); ++k)
    threads.emplace_back([&, k] { run(*replicas_[k], shares[k + 1]); });
  run(*this, shares[0]);
  for (std::thread& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

StepResult Engine::step(const Batch& batch, float lr) {
  const std::vector<Batch> shares = split_shares(batch, devices());
  StepResult r;
  r.valid_targets = batch.valid_targets();
  SF_CHECK(r.valid_targets > 0, "step ", step_ + 1, ": every label is -100, nothing to learn from");
  ++step_;
  const double t_step = Trace::now_us();
  if (trace_) trace_->begin_step(step_);
  worker_->begin_step(step_, lr);
  const float grad_scale = 1.0f / float(r.valid_targets);  // one count for the whole step
  std::vector<float> loss(shares.size());
  each_device(shares, [&](Engine& e, const Batch& share) {
    e.step_ = step_;
    e.want_version_ = step_ - 1;
    e.lr_ = lr;
    loss[size_t(e.rank_)] = e.run_share(share, grad_scale);
  });
  float loss_sum = 0;  // in device order, as one device sums its micro-batches
  for (float l : loss) loss_sum += l;
  r.loss = double(loss_sum) / double(r.valid_targets);
  r.grad_norm = worker_->wait_grad_norm();
  if (!ring_ && opt_.max_grad_norm > 0)  // clipping: the GPU-resident updates wait for the norm
    update_resident_clipped(clip_factor(r.grad_norm, opt_.max_grad_norm));
  if (trace_) trace_->end_step(t_step, Trace::now_us());
  SF_CHECK(std::isfinite(r.loss) && std::isfinite(r.grad_norm), "step ", step_, ": the loss (",
           r.loss, ") or gradient norm (", r.grad_norm,
           ") is not finite; lower the learning rate or check the data");
  return r;
}

float Engine::run_share(const Batch& batch, float grad_scale) {
  const int L = int(spec_.layers);
  upload_batch(batch);
  OuterParams op = OuterParams::view(spec_, outer_layout_, parts_.outer_params, dt_);
  const OuterParams og = outer_grad_views();

  // ---- forward ----
  ensure_loaded(*embed_part_);
  clear_outer_grads(*head_part_);
  if (spec_.tie_word_embeddings) clear_outer_grads(*embed_part_);  // the head adds into it
  be_.fill_zero(loss_sum_, *compute_);
  embed_forward(op);
  forward_layers(/*save_checkpoints=*/true);

  // ---- head, micro-batch by micro-batch: the loss and ∂L/∂x_L ----
  ensure_loaded(*head_part_);
  Event* t_head = tmark(*compute_);
  for (Micro& m : micro_)
    head_forward_backward(be_, spec_, op, og, m.in, m.head_ws, rows(act_[L % 2], m), rows(grad_, m),
                          loss_sum_, grad_scale, *compute_);
  tspan(TraceTrack::kCompute, "head", t_head, *compute_);
  be_.copy(host_loss_, loss_sum_.data, 4, *compute_);
  // The head's gradient (final norm and, untied, lm_head) is complete: its update overlaps the
  // backward of the layers instead of delaying the next step.
  be_.record(*head_part_->params_free, *compute_);
  send_outer_gradient(*head_part_);

  // ---- backward ----
  // The checkpoints must be on the host before any is brought back.
  be_.wait(*h2d_, *act_saved_[(L - 1) % 2]);
  auto restore = [&](int j) {  // brings x_j back into restore_[j % 2]
    be_.wait(*h2d_, *restore_free_[j % 2]);
    Event* t = tmark(*h2d_);
    const uint64_t bytes = restore_[j % 2].bytes();
    if (nvme_ckpt_) {  // from its staging slot (read from the disk unless still there)
      NvmeCheckpoints* c = nvme_ckpt_.get();
      be_.copy(restore_[j % 2].data, c->restore_source(j, bytes), bytes, *h2d_);
      be_.host_callback(*h2d_, [c, j] { c->restored(j); });
      for (int k = 1; k <= 2; ++k) c->prefetch(j - k, bytes);  // the next restores' reads
    } else {
      be_.copy(restore_[j % 2].data, ckpt_[size_t(j)], bytes, *h2d_);
    }
    tspan(TraceTrack::kH2D, "restore L" + std::to_string(j), t, *h2d_, restore_[j % 2].bytes());
    be_.record(*restored_[j % 2], *h2d_);
  };
  for (int k = 0; k < 2; ++k) be_.record(*restore_free_[k], *compute_);
  if (L >= 2) restore(L - 2);
  // The slots' gradient and stages inside the outer buffer (carve_device): the head's gradient
  // has left it — without a stage its D2H read it there; with one, its cast (or its update on the
  // device) ran on this stream before.
  if (parts_.slots_in_outer && !parts_.outer_stage) be_.wait(*compute_, *head_part_->stage_free);
  for (int j = L - 1; j >= 0; --j) {
    for (int k = j; k > std::max(j - opt_.window, -1); --k) load_layer(k);
    prefetch_nvme(j - opt_.window);
    Slot& s = slot_of(j);
    be_.wait(*compute_, *s.loaded);
    // x_{L-1} never left the device; the others come back from their checkpoints.
    Tensor x = act_[(L - 1) % 2];
    if (j < L - 1) {
      be_.wait(*compute_, *restored_[j % 2]);
      x = restore_[j % 2];
    }
    const int64_t n = host_[size_t(1 + j)]->layout.numel;
    // Without a stage the D2H reads the fp32 grads: of this slot, or of every slot where they
    // share one buffer (with a stage, its cast ran on this stream before: nothing to wait for).
    if (!s.mem.stage)
      for (auto& o : slots_)
        if (o.get() == &s || o->mem.grads == s.mem.grads) be_.wait(*compute_, *o->stage_free);
    if (coll_) be_.wait(*compute_, *s.grads_read);  // and the reduction
    Event* t = tmark(*compute_);
    be_.fill_zero(Tensor(s.mem.grads, DType::kF32, {n}), *compute_);
    for (Micro& m : micro_) {  // recompute, then differentiate; weight gradients accumulate
      select(m);
      layer_forward(be_, spec_, s.p, m.in, m.ws, rows(x, m), Tensor(), *compute_);
      layer_backward(be_, spec_, s.p, s.g, m.in, m.ws, rows(x, m), rows(grad_, m), *compute_);
    }
    tspan(TraceTrack::kCompute, "backward L" + std::to_string(j), t, *compute_);
    // x_j's buffer is free (x_{L-1}'s too: it is the one restore_[(L-1) % 2] reuses).
    be_.record(*restore_free_[j % 2], *compute_);
    const UnitState& h = *host_[size_t(1 + j)];
    if (h.on_device) {
      // Updated now, before its gradient's buffer is reused, into the weights its slot holds
      // (still cached for the next forward where the slot keeps them); clipping, its gradient is
      // kept in the compute dtype for the update after the norm (step()). None of the slot's
      // events: they order its stage's D2H, which a host layer's gradient may still be in.
      const Tensor g(s.mem.grads, DType::kF32, {n});
      if (ring_) {
        reduce_on_device(1 + j, g, *device_reduced_[size_t(1 + j)]);
        adamw_on_device(1 + j, g, Tensor(s.mem.params, dt_, {n}), 1.0f, nullptr);
        s.version = step_;
      } else {
        keep_gradient(1 + j, g, *device_reduced_[size_t(1 + j)]);
      }
    }
    be_.record(*s.params_free, *compute_);
    if (j >= 1 && j < L - 1) restore(j - 1);  // x_{L-2} was brought back before the loop
    if (!h.on_device) reduce_and_send(1 + j, s.mem.grads, s.mem.stage, n, s);
  }
  // The slots' last D2Hs (from their stages, or their gradient without) read the outer buffer
  // where they lie inside it: done before the embedding's gradient overwrites them.
  if (parts_.slots_in_outer)
    for (auto& s : slots_) be_.wait(*compute_, *s->stage_free);
  if (!spec_.tie_word_embeddings) clear_outer_grads(*embed_part_);  // after the head's turn
  // transformers' nn.Embedding(padding_idx=pad_token_id) gives the pad row no gradient from the
  // lookup; with tied weights the head's share of that row stays: save the row, restore it.
  const int64_t pad = spec_.pad_token_id;
  float* pad_grad = pad >= 0 ? og.embed.f32() + pad * spec_.hidden : nullptr;
  const size_t row_bytes = size_t(spec_.hidden) * 4;
  Event* t_embed = tmark(*compute_);
  if (pad_grad) be_.copy(parts_.pad_row, pad_grad, row_bytes, *compute_);
  for (const Micro& m : micro_)
    be_.embedding_backward(og.embed, m.in.ids, rows(grad_, m), *compute_);
  if (pad_grad) be_.copy(pad_grad, parts_.pad_row, row_bytes, *compute_);
  tspan(TraceTrack::kCompute, "embedding backward", t_embed, *compute_);
  be_.record(*embed_part_->params_free, *compute_);  // (tied: the head read it too)
  send_outer_gradient(*embed_part_);
  be_.synchronize(*compute_);
  return *host_loss_;
}

EvalResult Engine::evaluate(const Batch& batch) {
  EvalResult r;
  r.valid_targets = batch.valid_targets();
  if (r.valid_targets == 0) {
    check_batch(batch);
    return r;
  }
  // Forward only, no reduction: a batch of fewer samples than devices takes fewer of them.
  const int64_t nseq = int64_t(batch.cu_seqlens.size()) - 1;
  const std::vector<Batch> shares =
      split_shares(batch, int(std::max<int64_t>(1, std::min<int64_t>(devices(), nseq))));
  std::vector<float> loss(shares.size());
  each_device(shares, [&](Engine& e, const Batch& share) {
    e.want_version_ = step_;
    loss[size_t(e.rank_)] = e.eval_share(share);
  });
  float loss_sum = 0;  // in device order, as one device sums its micro-batches
  for (float l : loss) loss_sum += l;
  r.loss_sum = double(loss_sum);
  return r;
}

float Engine::eval_share(const Batch& batch) {
  upload_batch(batch);
  OuterParams op = OuterParams::view(spec_, outer_layout_, parts_.outer_params, dt_);
  const OuterParams og = outer_grad_views();
  ensure_loaded(*embed_part_);
  embed_forward(op);
  forward_layers(/*save_checkpoints=*/false);
  ensure_loaded(*head_part_);
  // The fused head also forms gradients: they go to the outer unit's fp32 gradient scratch, which
  // the next step clears before use; without a stage the last D2H reads it: wait for that.
  if (!parts_.outer_stage)
    for (OuterPart* o : {embed_part_.get(), head_part_.get()}) be_.wait(*compute_, *o->stage_free);
  be_.fill_zero(loss_sum_, *compute_);
  for (Micro& m : micro_)
    head_forward_backward(be_, spec_, op, og, m.in, m.head_ws, rows(act_[spec_.layers % 2], m),
                          rows(grad_, m), loss_sum_, 1.0f, *compute_);
  be_.copy(host_loss_, loss_sum_.data, 4, *compute_);
  be_.synchronize(*compute_);
  return *host_loss_;
}

std::vector<std::string> Engine::finish_trace() {
  if (!trace_) return {};
  worker_->wait_all();
  for (Stream* st : {compute_.get(), h2d_.get(), d2h_.get(), grad_d2h_.get()}) be_.synchronize(*st);
  std::vector<std::string> lines = trace_->finish();
  worker_->set_trace(nullptr);
  trace_.reset();
  return lines;
}

std::vector<float> Engine::logits(const Batch& batch) {
  // Not a training step: the logits buffer is allocated here, once per call.
  check_batch(batch);
  want_version_ = step_;
  upload_batch(batch);
  const int64_t T = batch.tokens(), V = spec_.vocab;
  Buffer out = be_.alloc(MemoryKind::kDevice, size_t(T * V) * dtype_size(dt_), "logits");
  OuterParams op = OuterParams::view(spec_, outer_layout_, parts_.outer_params, dt_);
  ensure_loaded(*embed_part_);
  embed_forward(op);
  forward_layers(/*save_checkpoints=*/false);
  ensure_loaded(*head_part_);
  Tensor logits(out.data(), dt_, {T, V});
  for (Micro& m : micro_)
    head_logits(be_, spec_, op, m.in, m.head_ws, rows(act_[spec_.layers % 2], m), rows(logits, m),
                *compute_);
  std::vector<float> host(size_t(T * V));
  if (dt_ == DType::kF32) {
    be_.copy(host.data(), out.data(), host.size() * 4, *compute_);
  } else {
    Buffer f = be_.alloc(MemoryKind::kDevice, host.size() * 4, "logits F32");
    be_.convert(Tensor(f.data(), DType::kF32, {T * V}), logits, *compute_);
    be_.copy(host.data(), f.data(), host.size() * 4, *compute_);
    be_.synchronize(*compute_);
  }
  be_.synchronize(*compute_);
  return host;
}

}  // namespace sf
