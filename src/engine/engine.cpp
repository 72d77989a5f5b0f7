#include "engine/engine.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include "core/error.h"
#include "core/host_memory.h"
#include "model/rope.h"

namespace sf {

struct Engine::Slot {
  void* params = nullptr;
  float* grads = nullptr;
  void* stage = nullptr;  // compute-dtype copy of the grads for the D2H copy (null for F32)
  int layer = -1;
  int64_t version = -1;  // how many optimizer updates the weights it holds carry
  std::unique_ptr<Event> loaded, released, grads_ready;
  LayerParams p, g;
};

namespace {

// Bump allocator over one Buffer: every device/pinned byte of the engine is taken at start.
class Bump {
 public:
  explicit Bump(void* base) : base_(static_cast<char*>(base)) {}
  void* take(size_t bytes) {
    void* p = base_ ? base_ + used_ : nullptr;
    used_ += (bytes + 255) / 256 * 256;
    return p;
  }
  size_t used() const { return used_; }

 private:
  char* base_;
  size_t used_ = 0;
};

// Refuses, before anything is allocated, a run whose host memory (all of it taken at start)
// exceeds what the machine can give: the alternative is the OOM killer midway through the
// allocation, with no message.
void check_host_memory(size_t state, int64_t params, size_t ckpt, int layers, int64_t tokens,
                       int64_t hidden, size_t dsz, size_t staging) {
  const std::optional<HostMemory> avail = host_memory_available();
  const size_t need = state + ckpt + staging;
  if (!avail || need <= avail->bytes) return;
  SF_FAIL(
      "not enough host memory for this run: it needs ", gib(need),
      " before the first step — master weights, Adam m and v, gradients and their compute-dtype "
      "copies: ",
      gib(state), " (", params, " parameters × ",
      std::round(10.0 * double(state) / double(std::max<int64_t>(params, 1))) / 10.0,
      " B), activation checkpoints: ", gib(ckpt), " (", layers, " layers × ", tokens, " tokens × ",
      hidden, " × ", dsz, " B) — and this machine has ", gib(avail->bytes), " available (",
      avail->source,
      "). Train a smaller model or on a machine with more memory; if the checkpoints are what "
      "does not fit, lower the tokens per step (--batch-size, --cutoff-len)");
}

}  // namespace

Engine::Engine(Backend& backend, ModelSpec spec, EngineOptions options)
    : be_(backend), spec_(std::move(spec)), opt_(options), dt_(backend.compute_dtype()) {
  const int L = int(spec_.layers);
  SF_CHECK(opt_.window >= 1, "window must be at least 1 layer (got ", opt_.window, ")");
  SF_CHECK(opt_.max_tokens > 0 && opt_.max_sequences > 0,
           "engine: max_tokens and max_sequences must be positive");
  opt_.window = std::min(opt_.window, std::max(L, 1));
  const size_t dsz = dtype_size(dt_);
  const int64_t T = opt_.max_tokens, C = spec_.hidden;

  // ---- pinned host: master/m/v/grad per unit, batch staging, checkpoints ----
  host_.push_back(std::make_unique<HostUnit>());
  host_[0]->layout = outer_layout(spec_);
  for (int i = 0; i < L; ++i) {
    host_.push_back(std::make_unique<HostUnit>());
    host_.back()->layout = layer_layout(spec_, i);
  }
  size_t state_bytes = 0;
  int64_t params = 0;
  for (auto& h : host_) {
    state_bytes += HostUnit::bytes_needed(h->layout.numel, dt_);
    params += h->layout.numel;
  }
  const size_t batch_ints = size_t(3 * T + opt_.max_sequences + 1) * 4;  // ids, labels, pos, cu
  const size_t batch_bytes = batch_ints + 256;                           // + the loss
  const size_t ckpt_bytes = size_t(L) * size_t(T * C) * dsz;
  check_host_memory(state_bytes, params, ckpt_bytes, L, T, C, dsz, batch_bytes);
  host_state_ = be_.alloc(MemoryKind::kPinnedHost, state_bytes, "master weights and Adam state");
  {
    Bump b(host_state_.data());
    for (auto& h : host_) h->carve(b.take(HostUnit::bytes_needed(h->layout.numel, dt_)), dt_);
  }
  host_batch_ = be_.alloc(MemoryKind::kPinnedHost, batch_bytes, "batch staging");
  host_loss_ = reinterpret_cast<float*>(static_cast<char*>(host_batch_.data()) + batch_ints);
  host_ckpt_ = be_.alloc(MemoryKind::kPinnedHost, ckpt_bytes, "activation checkpoints");
  for (int i = 0; i < L; ++i)
    ckpt_.push_back(static_cast<char*>(host_ckpt_.data()) + size_t(i) * size_t(T * C) * dsz);

  // ---- device: outer unit, W slots, batch, activations, workspaces ----
  const int64_t outer_n = host_[0]->layout.numel;
  const int64_t layer_n = L > 0 ? host_[1]->layout.numel : 0;
  inv_freq_ = rope_inv_freq(spec_);
  auto carve_device = [&](Bump& b) {
    outer_params_ = b.take(size_t(outer_n) * dsz);
    outer_grads_ = static_cast<float*>(b.take(size_t(outer_n) * 4));
    outer_grad_stage_ = dt_ != DType::kF32 ? b.take(size_t(outer_n) * dsz) : nullptr;
    for (auto& s : slots_) {
      s->params = b.take(size_t(layer_n) * dsz);
      s->grads = static_cast<float*>(b.take(size_t(layer_n) * 4));
      s->stage = dt_ != DType::kF32 ? b.take(size_t(layer_n) * dsz) : nullptr;
    }
    dev_batch_ = b.take(batch_ints);
    in_.inv_freq = Tensor(b.take(inv_freq_.size() * 4), DType::kF32, {int64_t(inv_freq_.size())});
    for (int k = 0; k < 2; ++k) {
      act_[k] = Tensor(b.take(size_t(T * C) * dsz), dt_, {T, C});
      restore_[k] = Tensor(b.take(size_t(T * C) * dsz), dt_, {T, C});
    }
    grad_ = Tensor(b.take(size_t(T * C) * dsz), dt_, {T, C});
    loss_sum_ = Tensor(b.take(4), DType::kF32, {1});
    pad_row_ = static_cast<float*>(b.take(size_t(C) * 4));
    ws_base_ = b.take(LayerWorkspace::bytes_needed(spec_, T, dt_));
    head_ws_base_ = b.take(HeadWorkspace::bytes_needed(spec_, T, dt_));
  };
  for (int k = 0; k < opt_.window; ++k) slots_.push_back(std::make_unique<Slot>());
  Bump measure(nullptr);
  carve_device(measure);
  dev_ = be_.alloc(MemoryKind::kDevice, measure.used(), "device cache units and workspace");
  Bump real(dev_.data());
  carve_device(real);

  for (auto& s : slots_) {
    s->loaded = be_.create_event();
    s->released = be_.create_event();
    s->grads_ready = be_.create_event();
  }
  outer_loaded_ = be_.create_event();
  outer_released_ = be_.create_event();
  for (int k = 0; k < 2; ++k) {
    act_saved_[k] = be_.create_event();
    act_ready_[k] = be_.create_event();
    restored_[k] = be_.create_event();
    restore_free_[k] = be_.create_event();
  }
  compute_ = be_.create_stream("compute");
  h2d_ = be_.create_stream("h2d");
  d2h_ = be_.create_stream("d2h");
  be_.copy(in_.inv_freq.data, inv_freq_.data(), inv_freq_.size() * 4, *h2d_);
  be_.synchronize(*h2d_);

  std::vector<HostUnit*> units;
  for (auto& h : host_) units.push_back(h.get());
  worker_ = std::make_unique<UpdateWorker>(units, dt_, opt_.adamw, opt_.max_grad_norm);
}

Engine::~Engine() {
  // Drain the streams before their buffers go away; errors were reported where they happened.
  try {
    for (Stream* s : {compute_.get(), h2d_.get(), d2h_.get()})
      if (s) be_.synchronize(*s);
  } catch (...) {
  }
}

void Engine::init_weights(const std::function<void(const TensorDesc&, float*)>& fill) {
  worker_->wait_all();
  for (auto& h : host_) {
    std::memset(h->master, 0, size_t(h->layout.numel) * 4);
    for (const auto& e : h->layout.entries) fill(e.desc, h->master + e.offset);
    std::memset(h->m, 0, size_t(h->layout.numel) * 4);
    std::memset(h->v, 0, size_t(h->layout.numel) * 4);
    if (h->shadow) {  // the compute-dtype copy the first upload reads (BF16 is the only one)
      auto* dst = static_cast<uint16_t*>(h->shadow);
      for (int64_t i = 0; i < h->layout.numel; ++i) dst[i] = f32_to_bf16(h->master[i]);
    }
  }
  outer_version_ = -1;
  for (auto& s : slots_) s->layer = -1;
}

void Engine::visit_state(const std::function<void(const TensorState&)>& fn) {
  worker_->wait_all();
  for (auto& h : host_) {
    for (const auto& e : h->layout.entries)
      fn(TensorState{e.desc, e.numel, h->master + e.offset, h->m + e.offset, h->v + e.offset});
    if (h->shadow) {  // the weights may have been overwritten: refresh what uploads read
      auto* dst = static_cast<uint16_t*>(h->shadow);
      for (int64_t i = 0; i < h->layout.numel; ++i) dst[i] = f32_to_bf16(h->master[i]);
    }
  }
  outer_version_ = -1;
  for (auto& s : slots_) s->layer = -1;
}

void Engine::set_steps_done(int64_t steps) {
  SF_CHECK(steps >= 0, "steps done must not be negative (got ", steps, ")");
  worker_->reset_steps(steps);
  step_ = steps;
  outer_version_ = -1;
  for (auto& s : slots_) s->layer = -1;
}

void Engine::visit_weights(const std::function<void(const TensorDesc&, const float*)>& fn) {
  worker_->wait_all();
  for (auto& h : host_)
    for (const auto& e : h->layout.entries) fn(e.desc, h->master + e.offset);
}

int Engine::find_tensor(const std::string& name, const UnitLayout::Entry** entry) {
  for (size_t u = 0; u < host_.size(); ++u)
    for (const auto& e : host_[u]->layout.entries)
      if (e.desc.name == name) {
        *entry = &e;
        return int(u);
      }
  SF_FAIL("no tensor named '", name, "' in this ", spec_.arch_name, " model");
}

std::vector<float> Engine::gradient(const std::string& name) {
  worker_->wait_grad_norm();
  const UnitLayout::Entry* e = nullptr;
  int u = find_tensor(name, &e);
  std::vector<float> out(size_t(e->numel));
  const char* g =
      static_cast<const char*>(host_[size_t(u)]->grad) + size_t(e->offset) * dtype_size(dt_);
  for (int64_t i = 0; i < e->numel; ++i) {
    if (dt_ == DType::kF32)
      out[size_t(i)] = reinterpret_cast<const float*>(g)[i];
    else
      out[size_t(i)] = bf16_to_f32(reinterpret_cast<const uint16_t*>(g)[i]);
  }
  return out;
}

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
  const int64_t T = b.tokens();
  const int64_t nseq = int64_t(b.cu_seqlens.size()) - 1;
  // The previous step's reads of the staging buffer are complete: step() synchronised compute.
  auto* h = static_cast<int32_t*>(host_batch_.data());
  std::memcpy(h, b.ids.data(), size_t(T) * 4);
  std::memcpy(h + T, b.targets.data(), size_t(T) * 4);
  std::memcpy(h + 2 * T, b.positions.data(), size_t(T) * 4);
  std::memcpy(h + 3 * T, b.cu_seqlens.data(), size_t(nseq + 1) * 4);
  be_.copy(dev_batch_, h, size_t(3 * T + nseq + 1) * 4, *compute_);
  auto* d = static_cast<int32_t*>(dev_batch_);
  in_.tokens = T;
  in_.ids = Tensor(d, DType::kI32, {T});
  in_.targets = Tensor(d + T, DType::kI32, {T});
  in_.positions = Tensor(d + 2 * T, DType::kI32, {T});
  in_.cu_seqlens = Tensor(d + 3 * T, DType::kI32, {nseq + 1});
  be_.set_host_cu_seqlens(in_.cu_seqlens, b.cu_seqlens);  // no read-back in attention calls
  for (int k = 0; k < 2; ++k) {
    act_[k] = Tensor(act_[k].data, dt_, {T, spec_.hidden});
    restore_[k] = Tensor(restore_[k].data, dt_, {T, spec_.hidden});
  }
  grad_ = Tensor(grad_.data, dt_, {T, spec_.hidden});
  ws_ = LayerWorkspace::carve(spec_, T, dt_, ws_base_);
  head_ws_ = HeadWorkspace::carve(spec_, T, dt_, head_ws_base_);
}

void Engine::ensure_outer_loaded() {
  if (outer_version_ == want_version_) return;
  worker_->wait_updated(0, want_version_);
  be_.wait(*h2d_, *outer_released_);
  be_.copy(outer_params_, host_[0]->upload_source(),
           size_t(host_[0]->layout.numel) * dtype_size(dt_), *h2d_);
  be_.record(*outer_loaded_, *h2d_);
  be_.wait(*compute_, *outer_loaded_);
  outer_version_ = want_version_;
}

Engine::Slot& Engine::slot_of(int layer) { return *slots_[size_t(layer % opt_.window)]; }

void Engine::load_layer(int layer) {
  Slot& s = slot_of(layer);
  if (s.layer == layer && s.version == want_version_) return;  // still cached: reuse
  HostUnit& h = *host_[size_t(1 + layer)];
  worker_->wait_updated(1 + layer, want_version_);
  be_.wait(*h2d_, *s.released);
  be_.copy(s.params, h.upload_source(), size_t(h.layout.numel) * dtype_size(dt_), *h2d_);
  be_.record(*s.loaded, *h2d_);
  s.layer = layer;
  s.version = want_version_;
  s.p = LayerParams::view(h.layout, s.params, dt_);
  s.g = LayerParams::view(h.layout, s.grads, DType::kF32);
}

void Engine::forward_layers(bool save_checkpoints) {
  const int L = int(spec_.layers);
  for (int i = 0; i < L; ++i) {
    for (int j = i; j < std::min(i + opt_.window, L); ++j) load_layer(j);
    Slot& s = slot_of(i);
    be_.wait(*compute_, *s.loaded);
    Tensor x = act_[i % 2], y = act_[(i + 1) % 2];
    if (save_checkpoints) {
      // x_i is complete: offload it while the layer computes.
      be_.record(*act_ready_[i % 2], *compute_);
      be_.wait(*d2h_, *act_ready_[i % 2]);
      be_.copy(ckpt_[size_t(i)], x.data, x.bytes(), *d2h_);
      be_.record(*act_saved_[i % 2], *d2h_);
      // y overwrites x_{i-1}: its offload must be done.
      if (i >= 1) be_.wait(*compute_, *act_saved_[(i + 1) % 2]);
    }
    layer_forward(be_, spec_, s.p, in_, ws_, x, y, *compute_);
    be_.record(*s.released, *compute_);
  }
}

StepResult Engine::step(const Batch& batch, float lr) {
  const int L = int(spec_.layers);
  check_batch(batch);
  StepResult r;
  r.valid_targets = batch.valid_targets();
  SF_CHECK(r.valid_targets > 0, "step ", step_ + 1, ": every label is -100, nothing to learn from");
  ++step_;
  want_version_ = step_ - 1;
  worker_->begin_step(step_, lr);
  upload_batch(batch);
  OuterParams op = OuterParams::view(spec_, host_[0]->layout, outer_params_, dt_);
  OuterParams og = OuterParams::view(spec_, host_[0]->layout, outer_grads_, DType::kF32);

  // ---- forward ----
  ensure_outer_loaded();
  be_.wait(*compute_, *outer_released_);  // the last step's outer gradients have been copied out
  be_.fill_zero(Tensor(outer_grads_, DType::kF32, {host_[0]->layout.numel}), *compute_);
  be_.fill_zero(loss_sum_, *compute_);
  be_.embedding_forward(act_[0], in_.ids, op.embed, *compute_);
  forward_layers(/*save_checkpoints=*/true);

  // ---- head ----
  head_forward_backward(be_, spec_, op, og, in_, head_ws_, act_[L % 2], grad_, loss_sum_,
                        1.0f / float(r.valid_targets), *compute_);
  be_.copy(host_loss_, loss_sum_.data, 4, *compute_);

  // ---- backward ----
  // The checkpoints must be on the host before any is brought back.
  be_.wait(*h2d_, *act_saved_[(L - 1) % 2]);
  auto restore = [&](int j) {  // brings x_j back into restore_[j % 2]
    be_.wait(*h2d_, *restore_free_[j % 2]);
    be_.copy(restore_[j % 2].data, ckpt_[size_t(j)], restore_[j % 2].bytes(), *h2d_);
    be_.record(*restored_[j % 2], *h2d_);
  };
  for (int k = 0; k < 2; ++k) be_.record(*restore_free_[k], *compute_);
  if (L >= 2) restore(L - 2);
  for (int j = L - 1; j >= 0; --j) {
    for (int k = j; k > std::max(j - opt_.window, -1); --k) load_layer(k);
    Slot& s = slot_of(j);
    be_.wait(*compute_, *s.loaded);
    // x_{L-1} never left the device; the others come back from their checkpoints.
    Tensor x = act_[(L - 1) % 2];
    if (j < L - 1) {
      be_.wait(*compute_, *restored_[j % 2]);
      x = restore_[j % 2];
    }
    be_.wait(*compute_, *s.released);  // the slot's previous gradients have been copied out
    be_.fill_zero(Tensor(s.grads, DType::kF32, {host_[size_t(1 + j)]->layout.numel}), *compute_);
    layer_forward(be_, spec_, s.p, in_, ws_, x, Tensor(), *compute_);
    layer_backward(be_, spec_, s.p, s.g, in_, ws_, x, grad_, *compute_);
    if (j < L - 1) be_.record(*restore_free_[j % 2], *compute_);
    if (j >= 1) restore(j - 1);
    const int64_t n = host_[size_t(1 + j)]->layout.numel;
    const void* src = s.grads;
    if (s.stage) {
      be_.convert(Tensor(s.stage, dt_, {n}), Tensor(s.grads, DType::kF32, {n}), *compute_);
      src = s.stage;
    }
    be_.record(*s.grads_ready, *compute_);
    be_.wait(*d2h_, *s.grads_ready);
    be_.copy(host_[size_t(1 + j)]->grad, src, size_t(n) * dtype_size(dt_), *d2h_);
    be_.record(*s.released, *d2h_);
    UpdateWorker* w = worker_.get();
    be_.host_callback(*d2h_, [w, j] { w->grad_ready(1 + j); });
  }
  // transformers' nn.Embedding(padding_idx=pad_token_id) gives the pad row no gradient from the
  // lookup; with tied weights the head's share of that row stays: save the row, restore it.
  const int64_t pad = spec_.pad_token_id;
  float* pad_grad = pad >= 0 ? og.embed.f32() + pad * spec_.hidden : nullptr;
  const size_t row_bytes = size_t(spec_.hidden) * 4;
  if (pad_grad) be_.copy(pad_row_, pad_grad, row_bytes, *compute_);
  be_.embedding_backward(og.embed, in_.ids, grad_, *compute_);
  if (pad_grad) be_.copy(pad_grad, pad_row_, row_bytes, *compute_);
  {
    const int64_t n = host_[0]->layout.numel;
    const void* src = outer_grads_;
    if (outer_grad_stage_) {
      be_.convert(Tensor(outer_grad_stage_, dt_, {n}), Tensor(outer_grads_, DType::kF32, {n}),
                  *compute_);
      src = outer_grad_stage_;
    }
    be_.record(*outer_released_, *compute_);
    be_.wait(*d2h_, *outer_released_);
    be_.copy(host_[0]->grad, src, size_t(n) * dtype_size(dt_), *d2h_);
    be_.record(*outer_released_, *d2h_);
    UpdateWorker* w = worker_.get();
    be_.host_callback(*d2h_, [w] { w->grad_ready(0); });
  }
  be_.synchronize(*compute_);
  r.loss = double(*host_loss_) / double(r.valid_targets);
  r.grad_norm = worker_->wait_grad_norm();
  SF_CHECK(std::isfinite(r.loss) && std::isfinite(r.grad_norm), "step ", step_, ": the loss (",
           r.loss, ") or gradient norm (", r.grad_norm,
           ") is not finite; lower the learning rate or check the data");
  return r;
}

EvalResult Engine::evaluate(const Batch& batch) {
  check_batch(batch);
  EvalResult r;
  r.valid_targets = batch.valid_targets();
  if (r.valid_targets == 0) return r;
  want_version_ = step_;
  upload_batch(batch);
  OuterParams op = OuterParams::view(spec_, host_[0]->layout, outer_params_, dt_);
  OuterParams og = OuterParams::view(spec_, host_[0]->layout, outer_grads_, DType::kF32);
  ensure_outer_loaded();
  be_.embedding_forward(act_[0], in_.ids, op.embed, *compute_);
  forward_layers(/*save_checkpoints=*/false);
  // The fused head also forms gradients: they go to the outer unit's gradient scratch, which the
  // next step clears before use (once the last step's copy of it to the host is done).
  be_.wait(*compute_, *outer_released_);
  be_.fill_zero(loss_sum_, *compute_);
  head_forward_backward(be_, spec_, op, og, in_, head_ws_, act_[spec_.layers % 2], grad_,
                        loss_sum_, 1.0f, *compute_);
  be_.copy(host_loss_, loss_sum_.data, 4, *compute_);
  be_.synchronize(*compute_);
  r.loss_sum = double(*host_loss_);
  return r;
}

std::vector<float> Engine::logits(const Batch& batch) {
  // Not a training step: the logits buffer is allocated here, once per call.
  check_batch(batch);
  want_version_ = step_;
  upload_batch(batch);
  const int64_t T = batch.tokens(), V = spec_.vocab;
  Buffer out = be_.alloc(MemoryKind::kDevice, size_t(T * V) * dtype_size(dt_), "logits");
  OuterParams op = OuterParams::view(spec_, host_[0]->layout, outer_params_, dt_);
  ensure_outer_loaded();
  be_.embedding_forward(act_[0], in_.ids, op.embed, *compute_);
  forward_layers(/*save_checkpoints=*/false);
  Tensor logits(out.data(), dt_, {T, V});
  head_logits(be_, spec_, op, in_, head_ws_, act_[spec_.layers % 2], logits, *compute_);
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
