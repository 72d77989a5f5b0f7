// The engine's construction and state access: allocation from the plan, weights in and out,
// optimizer state for checkpoints. The step's schedule is in engine.cpp.
#include <algorithm>
#include <cstring>
#include <optional>

#include "core/cpu_topology.h"
#include "core/error.h"
#include "core/host_memory.h"
#include "core/thread_pool.h"
#include "engine/engine.h"
#include "engine/engine_slot.h"
#include "engine/host_check.h"
#include "engine/pinned_alloc.h"
#include "model/rope.h"

namespace sf {

namespace {

// Refuses, before anything is allocated, a run whose host memory (all of it taken at start)
// exceeds what the machine can give: the alternative is the OOM killer midway through the
// allocation or, worse, at the first step, with no message.
void check_host_memory(const EnginePlan& plan, uint64_t budget) {
  const HostCheck c = check_host(plan, budget, /*also_available=*/true);
  SF_CHECK(c.fits(), c.refusal(plan));
}

// Zeroes n floats with the process's threads: the 8B model's master, m and v are 96 GB, which
// one thread's memset takes seconds of start-up to write.
void zero_floats(float* p, int64_t n) {
  parallel_for(n, int64_t(1) << 22,
               [p](int64_t b, int64_t e) { std::memset(p + b, 0, size_t(e - b) * 4); });
}

}  // namespace

PlanRequest engine_plan_request(const EngineOptions& o, const ModelSpec& spec, DType dtype,
                                uint64_t device_used) {
  PlanRequest req;
  req.spec = spec;
  req.dtype = dtype;
  req.window = o.window;
  req.max_tokens = o.max_tokens;
  req.max_sequences = o.max_sequences;
  req.max_sample_tokens = o.max_sample_tokens;
  req.micro_tokens = o.micro_tokens;
  req.mlp_tokens = o.mlp_tokens;
  req.gpu_budget = o.gpu_budget;
  req.device_outside = device_used;
  req.clipping = o.max_grad_norm > 0;
  req.grad_piece = o.grad_piece;
  req.state_piece = o.state_piece;
  req.device_optimizer = o.device_optimizer;
  req.on_device = o.on_device;
  req.held_units = o.held_units;
  req.moments_later_units = o.moments_later_units;
  req.nvme = !o.nvme_dir.empty();
  req.nvme_layers = o.nvme_layers;
  req.on_nvme = o.on_nvme;
  req.nvme_masters = o.nvme_masters;
  req.master_on_nvme = o.master_on_nvme;
  req.nvme_checkpoints = o.nvme_checkpoints;
  req.host_limit = host_limit_for_plan(o.host_budget, /*also_available=*/true);
  req.devices = 1 + int(o.data_parallel.size());
  req.ckpt_gpu_direct = o.nvme_gds;
  req.slots_in_outer = o.slots_in_outer;
  return req;
}

PlanRequest Engine::plan_request() {
  return engine_plan_request(opt_, spec_, dt_, be_.device_memory().planned());
}

Engine::Engine(Backend& backend, ModelSpec spec, EngineOptions options)
    : be_(backend), spec_(std::move(spec)), opt_(options), dt_(backend.compute_dtype()) {
  const int L = int(spec_.layers);
  SF_CHECK(opt_.max_tokens > 0 && opt_.max_sequences > 0,
           "engine: max_tokens and max_sequences must be positive");
  const int devices = 1 + int(opt_.data_parallel.size());
  SF_CHECK(devices == 1 || (opt_.collective && opt_.collective->ranks() == devices),
           "engine: ", devices, " devices need a collective over ", devices, " ranks");
  if (devices > 1) coll_ = opt_.collective;
  const PlanRequest req = plan_request();
  plan_ = make_plan(req);
  SF_CHECK((plan_.nvme_params == 0 && !plan_.ckpt_on_nvme) || req.nvme,
           "engine: the plan puts units on NVMe but no ", "--nvme-dir was given");
  opt_.window = plan_.window;
  const size_t dsz = dtype_size(dt_);
  const int64_t T = opt_.max_tokens, C = spec_.hidden;

  // ---- pinned host: master/m/v and gradients per unit, batch staging, checkpoints ----
  // Units: the embedding, the layers, the final norm and head (outer_layout_ keeps the three
  // together on the device; the host updates them as two units).
  for (UnitLayout& u : unit_layouts(spec_)) {
    host_.push_back(std::make_shared<UnitState>());
    host_.back()->layout = std::move(u);
  }
  init_outer_parts();
  check_host_memory(plan_, opt_.host_budget);
  // One pinned buffer per host unit (master, m, v and, where the plan holds it, its gradient)
  // and per layer checkpoint, taken by several threads at once (pinned_alloc.h). The
  // GPU-resident units' state is carved from the device buffer below.
  {
    std::vector<size_t> sizes, host_units;
    for (size_t u = 0; u < host_.size(); ++u) {
      UnitState& h = *host_[u];
      h.on_device = plan_.on_device[u];
      h.on_nvme = plan_.on_nvme[u];
      h.master_on_nvme = plan_.master_on_nvme[u];
      h.moments_later = plan_.moments_later[u];
      const int64_t n = h.layout.numel;
      const size_t bytes =
          UnitState::host_state_bytes(n, h.on_device, h.on_nvme, h.master_on_nvme) +
          (plan_.held[u] ? UnitState::grad_bytes(n, dt_) : 0);
      if (bytes == 0) continue;
      host_units.push_back(u);
      sizes.push_back(bytes);
    }
    const int host_ckpts = plan_.ckpt_on_nvme ? 0 : L;
    for (int i = 0; i < host_ckpts; ++i) sizes.push_back(size_t(T * C) * dsz);
    // Each host unit is carved, and its initial weights written where the options carry them,
    // by the thread that pinned its buffer, while the other threads go on pinning.
    auto ready = [&](size_t k, void* base_ptr) {
      if (k >= host_units.size()) return;  // a checkpoint
      UnitState& h = *host_[host_units[k]];
      char* base = static_cast<char*>(base_ptr);
      if (h.master_on_nvme) {  // its gradient alone (held for clipping); the state is the tier's
        h.grad = base;
        return;
      }
      // Master, m and v (with m and v on the disk, its master alone), then any held gradient.
      const size_t state = UnitState::host_state_bytes(h.layout.numel, false, h.on_nvme, false);
      h.carve(base, plan_.held[host_units[k]] ? base + state : nullptr, h.on_nvme);
      if (opt_.initial_weights && !h.on_nvme && !h.on_device)
        init_unit(host_units[k], opt_.initial_weights, /*fresh=*/true);
    };
    std::vector<Buffer> bufs =
        alloc_pinned(be_, sizes, "master weights, Adam state, checkpoints", ready);
    for (size_t k = 0; k < host_units.size(); ++k) host_state_.push_back(std::move(bufs[k]));
    for (int i = 0; i < host_ckpts; ++i) {
      host_ckpt_.push_back(std::move(bufs[host_units.size() + size_t(i)]));
      ckpt_.push_back(static_cast<char*>(host_ckpt_.back().data()));
    }
    if (plan_.grad_ring_slots > 0) {
      const size_t slot = UnitState::grad_bytes(plan_.grad_piece, dt_);
      host_grads_ =
          be_.alloc(MemoryKind::kPinnedHost, slot * size_t(plan_.grad_ring_slots), "gradient ring");
      ring_ = std::make_unique<GradRing>(host_grads_.data(), plan_.grad_ring_slots, slot);
    }
  }
  setup_device(req);
  setup_host_side(req);
  if (opt_.initial_weights)  // the units whose state is not in a pinned buffer of their own
    for (size_t u = 0; u < host_.size(); ++u)
      if (host_[u]->on_device || host_[u]->on_nvme) init_unit(u, opt_.initial_weights, false);
  opt_.initial_weights = nullptr;  // the caller's source need not outlive the constructor
  if (devices == 1) return;
  // The other devices' engines, each made on its device; then this thread is this device's again.
  for (int r = 1; r < devices; ++r) {
    Backend& b = *opt_.data_parallel[size_t(r - 1)];
    try {
      replicas_.push_back(std::unique_ptr<Engine>(new Engine(b, *this, r)));
    } catch (const Error& e) {
      be_.bind_thread();
      SF_FAIL("GPU ", r, " (", b.name(), "): ", e.what());
    }
  }
  be_.bind_thread();
}

Engine::Engine(Backend& backend, Engine& primary, int rank)
    : be_(backend), spec_(primary.spec_), opt_(primary.opt_), dt_(backend.compute_dtype()) {
  SF_CHECK(dt_ == primary.dt_, "data parallel: GPU ", rank, "'s backend computes in ",
           dtype_name(dt_), ", GPU 0's in ", dtype_name(primary.dt_));
  be_.bind_thread();
  rank_ = rank;
  coll_ = primary.coll_;
  opt_.trace_path.clear();  // the trace is device 0's
  PlanRequest req = plan_request();
  plan_ = make_plan(req);
  opt_.window = plan_.window;
  host_ = primary.host_;
  worker_ = primary.worker_;
  init_outer_parts();
  const int L = int(spec_.layers);
  const int64_t T = opt_.max_tokens, C = spec_.hidden;
  std::vector<Buffer> bufs = alloc_pinned(
      be_, std::vector<size_t>(size_t(L), size_t(T * C) * dtype_size(dt_)), "checkpoints");
  for (Buffer& b : bufs) {
    host_ckpt_.push_back(std::move(b));
    ckpt_.push_back(static_cast<char*>(host_ckpt_.back().data()));
  }
  setup_device(req);
}

void Engine::setup_device(const PlanRequest& req) {
  const int64_t T = opt_.max_tokens;
  // ---- this engine's pinned staging: the batch, the loss, per-unit read-backs ----
  host_batch_ = be_.alloc(MemoryKind::kPinnedHost, plan_.host.staging / uint64_t(plan_.devices),
                          "batch staging");
  host_loss_ = reinterpret_cast<float*>(static_cast<char*>(host_batch_.data()) +
                                        batch_ints(T, opt_.max_sequences) * 4);
  host_sumsq_ = reinterpret_cast<double*>(reinterpret_cast<char*>(host_loss_) + 256);
  host_nonfinite_ = reinterpret_cast<int64_t*>(host_sumsq_ + units());
  // ---- device: one buffer, carved as the plan measured it ----
  const PlanDims dims{plan_.window,       T,
                      opt_.max_sequences, plan_.micro_tokens,
                      plan_.upload_tile,  plan_.on_device,
                      req.clipping,       plan_.devices == 1,
                      plan_.mlp_tokens,   req.slots_in_outer};
  dev_ = be_.alloc(MemoryKind::kDevice, plan_.device.engine(), "device cache units and workspace");
  parts_ = carve_device(spec_, dt_, dims, dev_.data(), nullptr);
  for (size_t u = 0; u < host_.size(); ++u)
    if (host_[u]->on_device) {  // UnitState::device_bytes: the state, then a kept gradient
      char* state = static_cast<char*>(parts_.unit_state[u]);
      host_[u]->carve(state, UnitState::keeps_device_grad(u, req.clipping)
                                 ? state + UnitState::state_bytes(host_[u]->layout.numel)
                                 : nullptr);
    }
  for (int k = 0; k < opt_.window; ++k) {
    slots_.push_back(std::make_unique<Slot>());
    slots_.back()->mem = parts_.slots[size_t(k)];
  }
  inv_freq_ = rope_inv_freq(spec_);
  inv_freq_dev_ = Tensor(parts_.inv_freq, DType::kF32, {int64_t(inv_freq_.size())});
  loss_sum_ = Tensor(parts_.loss, DType::kF32, {1});

  for (auto& s : slots_) s->create(be_);
  embed_part_->create(be_);
  head_part_->create(be_);
  for (size_t u = 0; u < host_.size(); ++u) {
    device_updated_.push_back(be_.create_event());
    device_reduced_.push_back(be_.create_event());
  }
  for (int k = 0; k < 2; ++k) {
    act_saved_[k] = be_.create_event();
    act_ready_[k] = be_.create_event();
    restored_[k] = be_.create_event();
    restore_free_[k] = be_.create_event();
  }
  compute_ = be_.create_stream("compute");
  h2d_ = be_.create_stream("h2d");
  d2h_ = be_.create_stream("d2h");  // activation checkpoints
  // Gradients have a stream of their own: when the ring is full it waits for the optimizer, and
  // the next step's checkpoint offloads must not queue behind it.
  grad_d2h_ = be_.create_stream("grad d2h");
  if (coll_) reduce_ = be_.create_stream("reduce");
  be_.copy(inv_freq_dev_.data, inv_freq_.data(), inv_freq_.size() * 4, *h2d_);
  be_.synchronize(*h2d_);
}

void Engine::setup_host_side(const PlanRequest& req) {
  const int L = int(spec_.layers);
  const int64_t T = opt_.max_tokens, C = spec_.hidden;
  const size_t dsz = dtype_size(dt_);
  if (plan_.nvme_params > 0) {
    // The update order of the NVMe units: the backward's (ring pieces arrive from the top down)
    // or, clipping, the forward's (the updates wait for the norm and run from the bottom up).
    std::vector<int> order;
    std::vector<UnitLayout> layouts;
    std::vector<float*> host_master;  // where an NVMe unit's master stays in host memory
    for (size_t u = 0; u < host_.size(); ++u) {
      layouts.push_back(host_[u]->layout);
      host_master.push_back(host_[u]->master_on_nvme ? nullptr : host_[u]->master);
      if (plan_.on_nvme[u]) order.push_back(int(u));
    }
    if (!req.clipping) std::reverse(order.begin(), order.end());
    nvme_ = std::make_unique<NvmeTier>(be_, opt_.nvme_dir, layouts, plan_.on_nvme, host_master,
                                       plan_.nvme_update_slots, plan_.nvme_load_slots, order);
  }
  if (plan_.ckpt_on_nvme)
    nvme_ckpt_ = std::make_unique<NvmeCheckpoints>(be_, opt_.nvme_dir, L, uint64_t(T * C) * dsz,
                                                   plan_.ckpt_slots, plan_.ckpt_gds);
  std::vector<UnitState*> units;
  for (auto& h : host_) units.push_back(h.get());
  worker_ = std::make_unique<UpdateWorker>(units, dt_, opt_.adamw, opt_.max_grad_norm,
                                           plan_.grad_piece, nvme_.get());
  // The optimizer's threads on the CPUs of the GPU's NUMA node: the pinned buffers the copies
  // and AdamW stream through are that node's memory. (`taskset` narrows the choice: only the CPUs
  // the process may use are taken.) On a machine of one node, or where the node is unknown,
  // nothing is restricted.
  if (const std::string bus = be_.pci_bus_id(); !bus.empty()) {
    const std::vector<int> allowed = allowed_cpus();
    const CpuChoice cpus = choose_update_cpus(bus, allowed);
    if (cpus.numa_node >= 0 && cpus.cpus.size() < allowed.size()) {
      const int pinned = worker_->pin(cpus.cpus);
      cpu_placement_ = str_cat("optimizer threads: ", pinned, " restricted to ", cpus.describe());
    } else {
      cpu_placement_ =
          cpus.numa_node < 0
              ? std::string("optimizer threads: not restricted (the GPU's NUMA node is unknown)")
              : str_cat("optimizer threads: not restricted (NUMA node ", cpus.numa_node,
                        ", the GPU's, holds every CPU this process may use)");
    }
  }
  if (!opt_.trace_path.empty()) {
    trace_ = std::make_unique<Trace>(be_, opt_.trace_path);
    worker_->set_trace(trace_.get());
  }
}

void Engine::init_outer_parts() {
  outer_layout_ = outer_layout(spec_);
  embed_part_ = std::make_unique<OuterPart>();
  head_part_ = std::make_unique<OuterPart>();
  embed_part_->unit = 0;
  embed_part_->numel = host_[0]->layout.numel;
  head_part_->unit = int(spec_.layers) + 1;
  head_part_->offset = embed_part_->numel;
  head_part_->numel = host_.back()->layout.numel;
  outer_shared_ = !spec_.tie_word_embeddings;
  head_part_->grad_offset = outer_shared_ ? 0 : embed_part_->numel;
}

Engine::~Engine() {
  replicas_.clear();  // each drains its device first
  be_.bind_thread();
  // Drain the streams before their buffers go away (the worker keeps releasing ring slots the
  // D2H side waits for); then the worker, which finishes the pieces it was handed — they read
  // the ring and release its slots, so it must stop before the ring (a later member) is freed.
  // Errors were reported where they happened.
  try {
    for (Stream* s : {compute_.get(), h2d_.get(), d2h_.get(), grad_d2h_.get(), reduce_.get()})
      if (s) be_.synchronize(*s);
  } catch (...) {
  }
  worker_.reset();
}

std::optional<NvmeStore::Stats> Engine::nvme_stats() const {
  if (!nvme_ && !nvme_ckpt_) return std::nullopt;
  NvmeStore::Stats total;
  for (const NvmeStore::Stats& s : {nvme_ ? nvme_->stats() : NvmeStore::Stats{},
                                    nvme_ckpt_ ? nvme_ckpt_->stats() : NvmeStore::Stats{}}) {
    total.requests += s.requests;
    total.bytes_read += s.bytes_read;
    total.bytes_written += s.bytes_written;
    total.max_in_flight = std::max(total.max_in_flight, s.max_in_flight);
  }
  return total;
}

void Engine::sync_state() {
  // The GPU-resident units' updates run on the compute stream; their non-finite counts reach the
  // worker from the gradient stream's callbacks, before wait_all raises any error.
  be_.synchronize(*compute_);
  be_.synchronize(*grad_d2h_);
  worker_->wait_all();
}

void Engine::forget_loaded() {
  embed_part_->version = head_part_->version = -1;
  for (auto& s : slots_) s->layer = -1;
  for (auto& r : replicas_) r->forget_loaded();
}

namespace {

// fn(begin, count) over [0, numel) in consecutive pieces of at most `piece` elements.
template <typename Fn>
void for_each_piece(int64_t numel, int64_t piece, Fn&& fn) {
  for (int64_t begin = 0; begin < numel; begin += piece) fn(begin, std::min(piece, numel - begin));
}

}  // namespace

// A GPU-resident unit's tensors go through host memory one at a time (plan: host.state_copy).
void Engine::with_host_copy(const UnitState& h, const UnitLayout::Entry& e, bool write_back,
                            const std::function<void(float*, float*, float*)>& fn) {
  const size_t bytes = size_t(e.numel) * 4;
  std::vector<float> buf(size_t(e.numel) * 3);
  float* p[3] = {buf.data(), buf.data() + e.numel, buf.data() + 2 * e.numel};
  float* dev[3] = {h.master + e.offset, h.m + e.offset, h.v + e.offset};
  for (int k = 0; k < 3; ++k) be_.copy(p[k], dev[k], bytes, *compute_);
  be_.synchronize(*compute_);
  fn(p[0], p[1], p[2]);
  if (!write_back) return;
  for (int k = 0; k < 3; ++k) be_.copy(dev[k], p[k], bytes, *compute_);
  be_.synchronize(*compute_);
}

void Engine::with_host_part(const UnitState& h, const UnitLayout::Entry& e, int part, bool read,
                            bool write_back,
                            const std::function<void(float*, int64_t, int64_t)>& fn) {
  std::vector<float> buf(static_cast<size_t>(std::min(e.numel, plan_.state_piece)));
  float* dev = (part == 0 ? h.master : part == 1 ? h.m : h.v) + e.offset;
  for_each_piece(e.numel, plan_.state_piece, [&](int64_t begin, int64_t n) {
    const size_t bytes = size_t(n) * 4;
    if (read) {
      be_.copy(buf.data(), dev + begin, bytes, *compute_);
      be_.synchronize(*compute_);
    }
    fn(buf.data(), begin, n);
    if (!write_back) return;
    be_.copy(dev + begin, buf.data(), bytes, *compute_);
    be_.synchronize(*compute_);  // buf is filled again next
  });
}

void Engine::init_weights(const StateFill& fill) {
  sync_state();
  for (size_t u = 0; u < host_.size(); ++u) init_unit(u, fill, false);
  forget_loaded();
}

void Engine::init_unit(size_t u, const StateFill& fill, bool fresh) {
  const auto& h = host_[u];
  const int64_t n = h->layout.numel;
  if (h->on_nvme) {
    nvme_->with_state(int(u), /*write_back=*/true, [&](float* master, float* m, float* v) {
      zero_floats(master, n);
      for (const auto& e : h->layout.entries) fill(e.desc, 0, 0, e.numel, master + e.offset);
      zero_floats(m, n);
      zero_floats(v, n);
    });
    return;
  }
  if (h->on_device) {
    for (float* a : {h->master, h->m, h->v}) be_.fill_zero(Tensor(a, DType::kF32, {n}), *compute_);
    for (const auto& e : h->layout.entries)  // m and v are zero: the master alone goes up
      with_host_part(*h, e, 0, /*read=*/false, /*write_back=*/true,
                     [&](float* master, int64_t begin, int64_t count) {
                       fill(e.desc, 0, begin, count, master);
                     });
    return;
  }
  if (!fresh)
    for (float* a : {h->master, h->m, h->v}) zero_floats(a, n);
  for (const auto& e : h->layout.entries) fill(e.desc, 0, 0, e.numel, h->master + e.offset);
}

TensorState::Fetch Engine::fetcher(size_t u, const UnitLayout::Entry* e) {
  const UnitState* h = host_[u].get();
  if (h->on_device)
    return [this, h, e](int part, const TensorState::Use& use) {
      with_host_part(*h, *e, part, /*read=*/true, /*write_back=*/false,
                     [&](float* values, int64_t begin, int64_t count) { use(values, begin, count); });
    };
  if (h->on_nvme)
    return [this, tier = nvme_.get(), u, e](int part, const TensorState::Use& use) {
      // Piece by piece, read back from the disk (plan: host.state_copy).
      std::vector<float> buf(static_cast<size_t>(std::min(e->numel, plan_.state_piece)));
      for_each_piece(e->numel, plan_.state_piece, [&](int64_t begin, int64_t n) {
        tier->read_part(int(u), part, e->offset + begin, n, buf.data());
        use(buf.data(), begin, n);
      });
    };
  return {};
}

void Engine::visit_state(const std::function<void(const TensorState&)>& fn) {
  sync_state();
  for (size_t u = 0; u < host_.size(); ++u) {
    const auto& h = host_[u];
    if (h->on_nvme) {  // the unit's state read once, written back after its tensors' visits
      nvme_->with_state(int(u), /*write_back=*/true, [&](float* master, float* m, float* v) {
        for (const auto& e : h->layout.entries)
          fn(TensorState{e.desc, e.numel, master + e.offset, m + e.offset, v + e.offset,
                         fetcher(u, &e)});
      });
      continue;
    }
    for (const auto& e : h->layout.entries) {
      if (h->on_device) {
        with_host_copy(*h, e, /*write_back=*/true, [&](float* master, float* m, float* v) {
          fn(TensorState{e.desc, e.numel, master, m, v, fetcher(u, &e)});
        });
        continue;
      }
      fn(TensorState{e.desc, e.numel, h->master + e.offset, h->m + e.offset, h->v + e.offset, {}});
    }
  }
  forget_loaded();
}

void Engine::load_state(const StateFill& fill) {
  sync_state();
  for (size_t u = 0; u < host_.size(); ++u) {
    const auto& h = host_[u];
    if (h->on_nvme) {  // the unit's state in its slot, written back once every tensor is in
      nvme_->with_state(int(u), /*write_back=*/true, [&](float* master, float* m, float* v) {
        for (const auto& e : h->layout.entries)
          for (int k = 0; k < 3; ++k)
            fill(e.desc, k, 0, e.numel, (k == 0 ? master : k == 1 ? m : v) + e.offset);
      });
      continue;
    }
    for (const auto& e : h->layout.entries)
      for (int k = 0; k < 3; ++k) {
        if (h->on_device)
          with_host_part(*h, e, k, /*read=*/false, /*write_back=*/true,
                         [&](float* dst, int64_t begin, int64_t count) {
                           fill(e.desc, k, begin, count, dst);
                         });
        else
          fill(e.desc, k, 0, e.numel, (k == 0 ? h->master : k == 1 ? h->m : h->v) + e.offset);
      }
  }
  forget_loaded();
}

void Engine::visit_state_read(const std::function<void(const TensorState&)>& fn) {
  sync_state();
  for (size_t u = 0; u < host_.size(); ++u) {
    const auto& h = host_[u];
    for (const auto& e : h->layout.entries) {
      if (h->on_device || h->on_nvme)
        fn(TensorState{e.desc, e.numel, nullptr, nullptr, nullptr, fetcher(u, &e)});
      else
        fn(TensorState{
            e.desc, e.numel, h->master + e.offset, h->m + e.offset, h->v + e.offset, {}});
    }
  }
}

void Engine::set_steps_done(int64_t steps) {
  SF_CHECK(steps >= 0, "steps done must not be negative (got ", steps, ")");
  sync_state();
  worker_->reset_steps(steps);
  step_ = steps;
  forget_loaded();
}

void Engine::visit_weights(const WeightVisit& fn) {
  sync_state();
  for (size_t u = 0; u < host_.size(); ++u) {
    const auto& h = host_[u];
    if (h->master_on_nvme) {
      nvme_->with_state(int(u), /*write_back=*/false, [&](float* master, float*, float*) {
        for (const auto& e : h->layout.entries) fn(e.desc, 0, e.numel, master + e.offset);
      });
      continue;
    }
    for (const auto& e : h->layout.entries) {
      if (h->on_device)
        with_host_part(*h, e, 0, /*read=*/true, /*write_back=*/false,
                       [&](float* master, int64_t begin, int64_t count) {
                         fn(e.desc, begin, count, master);
                       });
      else
        fn(e.desc, 0, e.numel, h->master + e.offset);
    }
  }
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
  const UnitState& h = *host_[size_t(find_tensor(name, &e))];
  SF_CHECK(h.grad || (h.on_device && plan_.grad_ring_slots == 0), "gradient('", name,
           "'): without clipping gradients pass through a ring and are not kept");
  std::vector<float> out(size_t(e->numel));
  if (!h.grad) {  // the GPU-resident embedding's: fp32, in the outer buffer
    be_.copy(out.data(), outer_grads(*embed_part_).f32() + e->offset, out.size() * 4, *compute_);
    be_.synchronize(*compute_);
    return out;
  }
  const size_t dsz = dtype_size(dt_);
  const char* g = static_cast<const char*>(h.grad) + size_t(e->offset) * dsz;
  std::vector<char> kept;  // a GPU-resident unit's: in device memory
  if (h.on_device) {
    kept.resize(out.size() * dsz);
    be_.copy(kept.data(), g, kept.size(), *compute_);
    be_.synchronize(*compute_);
    g = kept.data();
  }
  for (int64_t i = 0; i < e->numel; ++i) {
    if (dt_ == DType::kF32)
      out[size_t(i)] = reinterpret_cast<const float*>(g)[i];
    else
      out[size_t(i)] = bf16_to_f32(reinterpret_cast<const uint16_t*>(g)[i]);
  }
  return out;
}

}  // namespace sf
