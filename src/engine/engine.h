// defines: sf::Engine — the layer-sliding training step, written once against sf::Backend.
//
// Only W "cache units" of decoder layers live on the device; the outer unit (embedding, final
// norm, head) stays resident. Per step:
//   forward : embed → L0 … L{n-1}; layer i+W-1 is prefetched (H2D stream) while layer i computes,
//             and each layer's input is offloaded (D2H stream) as a checkpoint;
//   head    : final norm + fused linear/cross-entropy, giving ∂L/∂x_n;
//   backward: L{n-1} … L0, each recomputed from its checkpoint (brought back one layer ahead) and
//             differentiated; the last W layers of the forward are still cached and reused; each
//             layer's gradient goes D2H and is handed to the UpdateWorker (CPU AdamW);
//   update  : asynchronous; the next step's load of a unit waits only for that unit's update.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "engine/batch.h"
#include "engine/host_unit.h"
#include "engine/update_worker.h"
#include "model/layer.h"
#include "model/spec.h"

namespace sf {

struct EngineOptions {
  int window = 2;              // W: decoder layers resident on the device at once
  int64_t max_tokens = 0;      // T of the largest step
  int64_t max_sequences = 0;   // packed samples per step, at most
  AdamWParams adamw;
  float max_grad_norm = 0;     // 0: no clipping
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

// One tensor's complete optimizer state, fp32 (what a resumable checkpoint holds).
struct TensorState {
  const TensorDesc& desc;
  int64_t numel;
  float* master;
  float* m;
  float* v;
};

class Engine {
 public:
  Engine(Backend& backend, ModelSpec spec, EngineOptions options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const ModelSpec& spec() const { return spec_; }
  int units() const { return int(host_.size()); }  // 0 = outer unit, 1 + i = layer i
  const UnitLayout& layout(int unit) const { return host_[size_t(unit)]->layout; }

  // Fills fp32 master weights tensor by tensor (e.g. from a checkpoint); call before training.
  void init_weights(const std::function<void(const TensorDesc&, float* dst)>& fill);
  // Visits each tensor's fp32 master weights (after all pending updates).
  void visit_weights(const std::function<void(const TensorDesc&, const float* src)>& fn);
  // Visits every tensor's master weights and Adam moments (after all pending updates); `fn` may
  // read them (saving) or overwrite them (resuming). After overwriting, call set_steps_done with
  // the optimizer steps the state carries (Adam's bias correction counts from it).
  void visit_state(const std::function<void(const TensorState&)>& fn);
  void set_steps_done(int64_t steps);
  // The gradient of the last step (before clipping), as F32, for tests and reports.
  std::vector<float> gradient(const std::string& tensor_name);

  StepResult step(const Batch& batch, float lr);
  // Forward only, no training state touched: the loss of the batch with the current weights.
  EvalResult evaluate(const Batch& batch);
  // Forward only: logits [T, V] for the batch, with the current weights.
  std::vector<float> logits(const Batch& batch);
  int64_t steps_done() const { return step_; }

 private:
  struct Slot;
  void check_batch(const Batch& batch) const;
  void upload_batch(const Batch& batch);
  void ensure_outer_loaded();
  void load_layer(int layer);  // into slot layer % W, unless already there for this step
  Slot& slot_of(int layer);
  void forward_layers(bool save_checkpoints);
  int find_tensor(const std::string& name, const UnitLayout::Entry** entry);

  Backend& be_;
  ModelSpec spec_;
  EngineOptions opt_;
  DType dt_;
  int64_t step_ = 0;

  Buffer host_state_, host_batch_, host_ckpt_, dev_;
  std::vector<std::unique_ptr<HostUnit>> host_;
  std::unique_ptr<UpdateWorker> worker_;
  std::unique_ptr<Stream> compute_, h2d_, d2h_;

  // device side
  std::vector<std::unique_ptr<Slot>> slots_;
  void* outer_params_ = nullptr;
  float* outer_grads_ = nullptr;
  void* outer_grad_stage_ = nullptr;
  int64_t outer_version_ = -1;
  int64_t want_version_ = 0;  // the weights the loads of the current pass must carry
  std::unique_ptr<Event> outer_loaded_, outer_released_;
  StepInputs in_;
  void* dev_batch_ = nullptr;
  Tensor act_[2], restore_[2], grad_, loss_sum_;
  std::unique_ptr<Event> act_ready_[2], act_saved_[2], restored_[2], restore_free_[2];
  void* ws_base_ = nullptr;
  void* head_ws_base_ = nullptr;
  LayerWorkspace ws_;
  HeadWorkspace head_ws_;
  std::vector<char*> ckpt_;  // host checkpoint of each layer's input
  float* host_loss_ = nullptr;
  float* pad_row_ = nullptr;  // device scratch: the embedding gradient's padding row
  std::vector<float> inv_freq_;
};

}  // namespace sf
