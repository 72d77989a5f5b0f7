// defines: sf::Engine — the layer-sliding training step, written once against sf::Backend.
//
// Only W "cache units" of decoder layers live on the device; the outer unit (embedding, final
// norm, head) stays resident, and where the plan says so the optimizer state of the embedding,
// the head and the bottom layers too (the GPU-resident share, updated on the device by
// Backend::adamw: a layer right after its backward, into the weights its slot holds). Every byte
// comes from one EnginePlan (engine/plan.h). Each layer runs the step's samples in micro-batches of
// at most M tokens (layer-major; gradients accumulate in the slot's fp32 buffers), so the
// workspaces are sized by M, not by the step. Per step:
//   forward : embed → L0 … L{n-1}; layer i+W-1 is prefetched (H2D stream) while layer i computes,
//             and each layer's input is offloaded (D2H stream) as a checkpoint;
//   head    : final norm + fused linear/cross-entropy, giving ∂L/∂x_n;
//   backward: L{n-1} … L0, each recomputed from its checkpoint (brought back one layer ahead) and
//             differentiated; the last W layers of the forward are still cached and reused; each
//             layer's gradient goes D2H and is handed to the UpdateWorker (CPU AdamW);
//   update  : asynchronous; the next step's load of a unit waits only for that unit's update.
// Data parallel (EngineOptions::data_parallel, --gpus): one engine per device, each on its own
// share of the step's samples (whole samples, in order); the host state, the optimizer and the
// gradient ring are this engine's alone, shared; each unit's fp32 gradient is summed over the
// devices into this one (Collective, on a stream of its own) before its single D2H, and every
// device loads its weights from the same pinned fp32 master.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/collective.h"
#include "engine/batch.h"
#include "engine/grad_ring.h"
#include "engine/micro_batch.h"
#include "engine/nvme_checkpoints.h"
#include "engine/nvme_tier.h"
#include "engine/plan.h"
#include "engine/trace.h"
#include "engine/unit_state.h"
#include "engine/update_worker.h"
#include "model/layer.h"
#include "model/spec.h"

namespace sf {

// Writes elements [begin, begin + count) of part `part` (0 master, 1 m, 2 v) of a tensor to dst.
// A host tensor comes in one piece; a GPU-resident or NVMe one in pieces of at most the plan's
// state_piece elements, in order, through one host buffer (the plan's host.state_copy).
using StateFill =
    std::function<void(const TensorDesc&, int part, int64_t begin, int64_t count, float* dst)>;

struct EngineOptions {
  int window = 2;                 // W: decoder layers resident on the device at once
  int64_t max_tokens = 0;         // T of the largest step
  int64_t max_sequences = 0;      // packed samples per step, at most
  int64_t max_sample_tokens = 0;  // the longest sample; 0: max_tokens
  int64_t micro_tokens = 0;       // M; 0: the largest that fits gpu_budget (the whole step if none)
  int64_t mlp_tokens = 0;         // F (plan.h): 0: as the budget needs (M where it fits)
  uint64_t gpu_budget = 0;        // bytes of device memory for everything; 0: no limit
  uint64_t host_budget = 0;       // bytes of host memory for everything; 0: what the machine has
  AdamWParams adamw;
  float max_grad_norm = 0;  // 0: no clipping
  int64_t grad_piece = 0;   // elements per gradient D2H piece; 0: the plan's default (tests)
  int64_t state_piece = 0;  // elements per piece of a state copy; 0: the plan's default (tests)
  std::string trace_path;   // non-empty: write the engine's timeline there (engine/trace.h)
  DeviceOptimizer device_optimizer = DeviceOptimizer::kAuto;  // the GPU-resident share
  std::vector<bool> on_device;  // non-empty: exactly these units there (PlanRequest::on_device)
  int held_units = -1;  // without clipping, units whose gradient is held (PlanRequest::held_units)
  // With clipping, units whose m and v are written after every master (PlanRequest's; -1: none)
  int moments_later_units = -1;
  // The NVMe tier: a directory for its scratch file (empty: none), and which units go there —
  // on_nvme and master_on_nvme exactly (a plan made earlier), else nvme_layers and nvme_masters
  // (PlanRequest's; -1: what host_budget needs).
  std::string nvme_dir;
  std::vector<bool> on_nvme, master_on_nvme;
  int nvme_layers = -1;
  int nvme_masters = -1;
  int nvme_checkpoints = -1;  // the activation checkpoints there: 1, 0, -1 (PlanRequest's)
  bool nvme_gds = false;      // their slots on the device, through GPUDirect Storage
  // The slots' gradient and stages inside the outer unit's gradient buffer where they fit
  // (PlanDims::slots_in_outer; off: memory of their own, for tests that compare the two).
  bool slots_in_outer = true;
  // Data parallel: the backends of devices 1 … N-1 (this engine's is device 0) and the reduction
  // over all N (collective->ranks() == N). max_tokens and max_sequences are then each device's;
  // a step's batch holds every device's share: its samples in N runs of equal count (±1).
  std::vector<Backend*> data_parallel;
  Collective* collective = nullptr;
  // Cut each step into shares of equal tokens (whole samples; packed steps, whose sample counts
  // vary) instead of equal counts of samples. A share then holds at most T/N + the longest sample.
  bool balance_tokens = false;
  // Where set, the initial master weights (part 0; m and v start at zero), as init_weights takes
  // them: each host unit's are written by the thread that pinned its buffer, as soon as it has,
  // so reading and converting a checkpoint overlaps the rest of the allocation. The callback is
  // called from several threads at once (each on its own tensors) and must outlive the
  // constructor only.
  StateFill initial_weights;
};

struct StepResult {
  double loss = 0;       // mean over valid targets
  double grad_norm = 0;  // global norm before clipping
  int64_t valid_targets = 0;
};

// Forward only: the summed cross-entropy over the batch's valid targets, and their count.
struct EvalResult {
  double loss_sum = 0;
  int64_t valid_targets = 0;
};

// One tensor's complete optimizer state, fp32 (what a resumable checkpoint holds). Where `fetch`
// is set (a GPU-resident or NVMe tensor), master, m and v are valid during the visit's callback
// only (visit_state: a host copy taken for it) or null (visit_state_read); `fetch(part, use)`
// copies one part again later (0 master, 1 m, 2 v) and hands it to `use` in consecutive pieces,
// use(values, begin, count) for elements [begin, begin + count), each at most the plan's
// state_piece elements (one piece at a time: the plan's host.state_copy).
struct TensorState {
  using Use = std::function<void(const float* values, int64_t begin, int64_t count)>;
  using Fetch = std::function<void(int part, const Use&)>;
  const TensorDesc& desc;
  int64_t numel;
  float* master;
  float* m;
  float* v;
  Fetch fetch;  // empty: the pointers stay valid (host memory)
};

// Reads elements [begin, begin + count) of a tensor's master weights from src, in pieces as above.
using WeightVisit =
    std::function<void(const TensorDesc&, int64_t begin, int64_t count, const float* src)>;

// The plan request an engine made with `options` makes (Engine's constructor plans with it):
// `device_used` is what the device already holds, the context and the backend's scratch, and
// what its libraries will still take (Backend::device_memory().planned()), so the request plans
// no scratch of its own. `slideformer plan` calls it too, to print the plan `train` will allocate.
PlanRequest engine_plan_request(const EngineOptions& options, const ModelSpec& spec, DType dtype,
                                uint64_t device_used);

class Engine {
 public:
  Engine(Backend& backend, ModelSpec spec, EngineOptions options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const ModelSpec& spec() const { return spec_; }
  int devices() const { return 1 + int(replicas_.size()); }
  const EnginePlan& plan() const { return plan_; }
  // Where the optimizer's threads run ("" where the backend has no PCI device: not pinned).
  const std::string& cpu_placement() const { return cpu_placement_; }
  // 0 = the embedding, 1 + i = layer i, 1 + layers = the final norm and head (with tied
  // embeddings, the norm alone): the order of their updates in a clipped step.
  int units() const { return int(host_.size()); }
  const UnitLayout& layout(int unit) const { return host_[size_t(unit)]->layout; }

  // Fills fp32 master weights tensor by tensor, piece by piece (StateFill, part 0; m and v are
  // zeroed), e.g. from a checkpoint; call before training (or give EngineOptions::initial_weights).
  void init_weights(const StateFill& fill);
  // Visits each tensor's fp32 master weights (after all pending updates), piece by piece; `src`
  // is valid during the callback only (a GPU-resident tensor is copied to the host for it).
  void visit_weights(const WeightVisit& fn);
  // Visits every tensor's master weights and Adam moments (after all pending updates); `fn` may
  // read them or overwrite them. After overwriting, call set_steps_done with the optimizer steps
  // the state carries (Adam's bias correction counts from it). Pointers kept past the callback:
  // see TensorState::fetch. A GPU-resident tensor's three parts are copied to the host whole and
  // together (12 B/param, past the plan's state_copy): for tests; a resume goes through
  // load_state, a save through visit_state_read.
  void visit_state(const std::function<void(const TensorState&)>& fn);
  // Overwrites every tensor's master weights and Adam moments (resuming), one piece of one part
  // at a time (StateFill). Then set_steps_done.
  void load_state(const StateFill& fill);
  // The same for reading only (saving): a GPU-resident or NVMe tensor comes through its `fetch`
  // alone, so nothing is copied, read or written back during the visit itself.
  void visit_state_read(const std::function<void(const TensorState&)>& fn);
  void set_steps_done(int64_t steps);
  // The gradient of the last step (before clipping), as F32, for tests and reports. Only with
  // clipping, where the host holds every gradient (without, they pass through a ring).
  std::vector<float> gradient(const std::string& tensor_name);

  StepResult step(const Batch& batch, float lr);
  // Forward only, no training state touched: the loss of the batch with the current weights.
  EvalResult evaluate(const Batch& batch);
  // Forward only: logits [T, V] for the batch, with the current weights.
  std::vector<float> logits(const Batch& batch);
  int64_t steps_done() const { return step_; }
  // The NVMe I/O so far, the state's and the checkpoints' together (none without either).
  std::optional<NvmeStore::Stats> nvme_stats() const;
  // With a trace: waits for all work, writes the file, returns one summary line per step.
  std::vector<std::string> finish_trace();

 private:
  struct UnitEvents;
  struct Slot;
  // Device `rank`'s engine of a data-parallel run: the host state and the optimizer are
  // `primary`'s; its own are the device buffers, the streams, the checkpoints and the staging.
  Engine(Backend& backend, Engine& primary, int rank);
  PlanRequest plan_request();  // engine_plan_request, with the backend's device
  void init_outer_parts();
  // This engine's own: its batch staging, everything on the device, the streams and events.
  void setup_device(const PlanRequest& req);
  // Device 0's alone: the NVMe tier, the optimizer, its CPUs, the trace.
  void setup_host_side(const PlanRequest& req);
  // Unit u's master from `fill`, its m and v zero; `fresh`: a host unit's memory is as the
  // allocation left it, zero (Backend::alloc), so only the master's tensors are written.
  void init_unit(size_t u, const StateFill& fill, bool fresh);
  // The step's samples cut into one share per device, whole samples in order: equal counts (±1),
  // or with balance_tokens equal tokens where the samples allow; each within the plan.
  std::vector<Batch> split_shares(const Batch& batch, int parts) const;
  // This device's part of a training step (forward, head, backward; gradients reduced into
  // device 0 and sent from there): returns its share's summed loss, F32 as the device summed it.
  float run_share(const Batch& share, float grad_scale);
  float eval_share(const Batch& share);  // its share's summed loss, forward only
  // Runs fn(engine, share k) for the first shares.size() devices' engines at once, each on a
  // thread bound to its device (this one on the caller's); the first failure stops the
  // collective and is rethrown.
  void each_device(const std::vector<Batch>& shares,
                   const std::function<void(Engine&, const Batch&)>& fn);
  // Sums `grads` (F32, `ready` recorded when complete) into device 0 and, there, converts it
  // to the compute dtype (into `stage` where given) and sends it to the optimizer; records
  // `read` once the fp32 buffer may be written again.
  void reduce_and_send(int unit, float* grads, void* stage, int64_t n, UnitEvents& ev);
  Stream& reduce_stream() { return coll_ ? *reduce_ : *compute_; }
  struct Micro {  // one micro-batch's inputs and workspaces, views into the step's buffers
    MicroBatch mb;
    StepInputs in;
    LayerWorkspace ws;
    HeadWorkspace head_ws;
  };
  void check_batch(const Batch& batch) const;
  void upload_batch(const Batch& batch);
  void upload_unit(int unit, void* device_params);
  void wait_updated(int unit);  // for the weights the current pass needs
  std::string unit_name(int unit) const;
  Event* tmark(Stream& s);  // trace marks; no-ops without a trace
  void tspan(TraceTrack track, const std::string& name, Event* begin, Stream& s,
             uint64_t bytes = 0);
  // Copies unit u's gradient (compute dtype, on the device) to the optimizer, on the gradient
  // stream, after `ready`; records `source_free` once `src` has been read.
  void send_gradient(int unit, const void* src, Event& ready, Event& source_free);
  struct OuterPart;  // the embedding or the head range of the outer unit on the device
  void prefetch(OuterPart& part);                   // issues the part's upload (H2D) if it is stale
  void ensure_loaded(OuterPart& part);              // and makes compute wait for it
  Tensor outer_grads(const OuterPart& part) const;  // its fp32 gradient range
  OuterParams outer_grad_views() const;             // embed, norm, head gradients
  OuterPart& other(const OuterPart& part);
  void clear_outer_grads(OuterPart& part);
  // Converts the part's fp32 gradients to the compute dtype and sends them to the optimizer.
  // A GPU-resident part instead reduces its gradient's squares for the norm and, without
  // clipping, is updated on the device at once (with clipping at the step's end).
  void send_outer_gradient(OuterPart& part);
  void update_on_device(OuterPart& part, float grad_scale);
  // GPU-resident unit u: Σ g² of its gradient (the one its update reads) for the norm, reduced on
  // the compute stream (`ready` recorded after it) and read back to the optimizer on the gradient
  // stream.
  void reduce_on_device(int unit, Tensor grads, Event& ready);
  // Clipping: GPU-resident unit u's fp32 gradient cast into the compute-dtype copy it keeps for
  // the update after the norm (UnitState::keeps_device_grad), whose Σ g² is then reduced.
  void keep_gradient(int unit, Tensor grads, Event& ready);
  Tensor kept_gradient(int unit) const;  // that copy
  // GPU-resident unit u: AdamW on the compute stream from its gradient (fp32, or the compute
  // dtype where it kept one: UnitState::keeps_device_grad), the updated weights
  // also into `weights` (compute dtype; may be empty); the unit's device_updated_ and `done`
  // (where given) recorded after it; the count of weights it left non-finite read back to the
  // optimizer.
  void adamw_on_device(int unit, Tensor grads, Tensor weights, float grad_scale, Event* done);
  bool on_device(const OuterPart& part) const;
  // Clipping: every GPU-resident unit's update once the norm is known, scaled by `clip`; a
  // layer still in its slot gets the updated weights there (engine_device_update.cpp).
  void update_resident_clipped(float clip);
  void sync_state();     // every update done, the device ones too
  void forget_loaded();  // the device's weights must be uploaded again
  TensorState::Fetch fetcher(size_t unit, const UnitLayout::Entry* e);  // empty for host units
  void with_host_copy(const UnitState& h, const UnitLayout::Entry& e, bool write_back,
                      const std::function<void(float*, float*, float*)>& fn);
  // One part (0 master, 1 m, 2 v) of a GPU-resident tensor through host memory, in pieces of at
  // most the plan's state_piece elements: each read from the device first where `read`, handed
  // to fn(values, begin, count), written back after it where `write_back`.
  void with_host_part(const UnitState& h, const UnitLayout::Entry& e, int part, bool read,
                      bool write_back,
                      const std::function<void(float* values, int64_t begin, int64_t count)>& fn);
  void load_layer(int layer);  // into slot layer % W, unless already there for this step
  // Reads an NVMe layer's master ahead of its load, where its update is done; else nothing.
  void prefetch_nvme(int layer);
  Slot& slot_of(int layer);
  void embed_forward(const OuterParams& op);
  void forward_layers(bool save_checkpoints);
  void select(const Micro& m);  // the attention boundaries of m, for the backend
  Tensor rows(Tensor t, const Micro& m) const;
  int find_tensor(const std::string& name, const UnitLayout::Entry** entry);

  Backend& be_;
  ModelSpec spec_;
  EngineOptions opt_;
  DType dt_;
  EnginePlan plan_;
  int64_t step_ = 0;

  std::vector<Buffer> host_state_, host_ckpt_;  // one per unit, one per layer
  Buffer host_grads_, host_batch_, dev_;
  std::vector<std::shared_ptr<UnitState>> host_;  // a replica shares device 0's
  std::unique_ptr<NvmeTier> nvme_;  // before the worker, which uses it: destroyed after it
  std::unique_ptr<NvmeCheckpoints> nvme_ckpt_;  // the checkpoints on NVMe (else ckpt_)
  std::shared_ptr<UpdateWorker> worker_;        // a replica shares device 0's
  std::string cpu_placement_;
  std::unique_ptr<Stream> compute_, h2d_, d2h_, grad_d2h_;
  std::unique_ptr<Stream> reduce_;  // data parallel: the gradients' reduction and conversion
  std::unique_ptr<GradRing> ring_;  // without clipping
  std::unique_ptr<Trace> trace_;

  // device side
  DeviceParts parts_;
  std::vector<std::unique_ptr<Slot>> slots_;
  UnitLayout outer_layout_;  // embedding, final norm, head, as they lie in the device buffers
  std::unique_ptr<OuterPart> embed_part_, head_part_;
  int64_t want_version_ = 0;  // the weights the loads of the current pass must carry
  Tensor inv_freq_dev_;       // RoPE's inverse frequencies on the device (every micro-batch's)
  std::vector<Micro> micro_;
  Tensor act_[2], restore_[2], grad_, loss_sum_;
  std::unique_ptr<Event> act_ready_[2], act_saved_[2], restored_[2], restore_free_[2];
  std::vector<char*> ckpt_;  // host checkpoint of each layer's input (none when on NVMe)
  float* host_loss_ = nullptr;
  // Per unit: its last update on the device (a GPU-resident unit's load casts after it), and for
  // a GPU-resident layer its Σ g² (read back after it).
  std::vector<std::unique_ptr<Event>> device_updated_, device_reduced_;
  double* host_sumsq_ = nullptr;       // per unit: its Σ g² formed on the device, read back
  int64_t* host_nonfinite_ = nullptr;  // per unit: a device update's non-finite count, read back
  bool outer_shared_ = false;          // the embedding's and head's gradients share one buffer
  float lr_ = 0;                       // of the open step
  std::vector<float> inv_freq_;

  // Data parallel: this engine's device (0 for the primary), the reduction, the other devices'
  // engines (declared last: destroyed first, each on its own device).
  int rank_ = 0;
  Collective* coll_ = nullptr;
  std::vector<std::unique_ptr<Engine>> replicas_;
};

}  // namespace sf
