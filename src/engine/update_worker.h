// defines: sf::UpdateWorker — the asynchronous optimizer. Gradients of a unit arrive (from a
// backend callback once their D2H copy is done), whole or piece by piece; the worker sums their
// squares and, once the global norm is known (exact clipping: no update uses a clip factor
// computed from part of the gradient), runs AdamW on each unit in forward order from the unit's
// host gradient, so the next step's forward can start on the first units while the last are
// still updating. Without clipping, each piece is updated as soon as it arrives and its buffer
// released (the gradient ring); the units the plan holds (EnginePlan::held: the head and the top
// layers) arrive whole in their own host gradient, count for the norm at once, and are updated
// tile by tile in forward order whenever no ring piece waits — through the next step's forward,
// which needs them last. With clipping, the units marked moments_later get the master alone
// after the norm (AdamWWrite::kWeights: the next forward waits for it) and their m and v after
// every unit's master (kMoments, from the top unit down, tile by tile when nothing else waits),
// through the next step's forward and backward: the engine's next D2H into such a unit's gradient
// waits for them (wait_moments).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/nvme_tier.h"
#include "engine/unit_state.h"
#include "engine/trace.h"
#include "optim/adamw.h"

namespace sf {

class UpdateWorker {
 public:
  // `piece`: the elements of a ring piece; held units are updated in tiles of it (their Σ g² comes
  // with grad_ready, formed on the device before the gradient's D2H).
  // `nvme`: the tier holding the state of the units marked on_nvme (null: none); the worker
  // acquires such a unit's state before its first update of a step and releases it after the last.
  UpdateWorker(std::vector<UnitState*> units, DType grad_dtype, AdamWParams hp, float max_grad_norm,
               int64_t piece, NvmeTier* nvme = nullptr);
  ~UpdateWorker();
  UpdateWorker(const UpdateWorker&) = delete;
  UpdateWorker& operator=(const UpdateWorker&) = delete;

  // Restricts this worker's thread (share 0 of the AdamW loops) and the process's thread pool to
  // the CPUs `cpus` (ThreadPool::pin). Returns the threads pinned.
  int pin(const std::vector<int>& cpus);
  // Opens optimizer step `step` (1-based) with learning rate `lr`; every unit must then report.
  void begin_step(int64_t step, float lr);
  // Unit u's gradient for the open step is complete in its host grad buffer (UnitState::grad),
  // with its Σ g², formed on the device before the D2H: the worker takes it as given instead of
  // reading the gradient once more. Never blocks.
  void grad_ready(int unit, double sumsq);
  // Elements [offset, offset + count) of unit u's gradient are at `grad` (compute dtype);
  // `release` is called once they have been used. Without clipping only. Never blocks.
  void piece_ready(int unit, int64_t offset, int64_t count, const void* grad,
                   std::function<void()> release);
  // GPU-resident unit u (UnitState::on_device) has its gradient's Σ g² for the open step: it
  // counts for the norm; the device updates the unit itself. Never blocks.
  void device_reduced(int unit, double sumsq);
  // GPU-resident unit u's update of step `step` (learning rate `lr`) left `nonfinite` weights
  // non-finite (Backend::adamw's count): above 0 the run stops as after a host update — the
  // error is raised by the next begin_step or wait. Never blocks, never throws.
  void device_updated(int unit, int64_t step, int64_t nonfinite, float lr);
  // Blocks until unit u carries the update of step `step` (returns at once for step 0).
  void wait_updated(int unit, int64_t step);
  // Whether it does now; never blocks.
  bool is_updated(int unit, int64_t step);
  // Blocks until unit u's m and v carry the update of step `step`, and with them its gradient
  // buffer is free (returns at once for a unit without moments_later).
  void wait_moments(int unit, int64_t step);
  // Blocks until every gradient of the open step has been reduced; returns the global norm.
  double wait_grad_norm();
  void wait_all();
  // Adam spans go to `trace` (null: none); set before the first step or after wait_all.
  void set_trace(Trace* trace) { trace_ = trace; }
  // After a resume: every unit carries `steps` updates (waits for pending work first).
  void reset_steps(int64_t steps);

 private:
  struct Piece {
    int unit;
    int64_t offset, count;
    const void* grad;  // null: a GPU-resident unit's Σ g² in `sumsq`
    std::function<void()> release;
    double sumsq = 0;  // a whole unit's (held or GPU-resident), formed on the device
  };
  // A held unit's update of step `step`, `done` elements of it so far; or, where `moments`, a
  // moments_later unit's m and v (clip factor `clip`).
  struct Held {
    int unit;
    int64_t step;
    float lr;
    int64_t done = 0;
    bool moments = false;
    float clip = 1.0f;
  };
  void loop();
  void consume(Piece& p);
  // AdamW on elements [offset, offset + count) of unit u from `grad` (the ring piece, the held
  // or the clipped unit's host gradient), checked finite; traced from t0. sumsq: where given,
  // set to the gradient's Σ g² from the same pass (sum_squares's bits).
  void update_range(int u, int64_t offset, int64_t count, const void* grad, int64_t step, float lr,
                    float clip, const char* kind, double t0, AdamWWrite what = AdamWWrite::kAll,
                    double* sumsq = nullptr);
  // Throws, naming the unit, the step and what to do, where an update left `bad` (> 0) weights
  // non-finite (adamw_step's count).
  void check_finite(int u, int64_t step, int64_t bad, float lr) const;
  void rethrow_locked();

  std::vector<UnitState*> units_;
  NvmeTier* nvme_;
  Trace* trace_ = nullptr;
  DType grad_dtype_;
  AdamWParams hp_;
  float max_grad_norm_;
  int64_t piece_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Piece> arrived_;
  std::vector<Held> held_;  // pending held updates, in unit (forward) order
  std::deque<Held> later_;  // pending moments passes, from the top unit down
  std::vector<int64_t> received_;  // elements of each unit's gradient seen in the open step
  std::vector<int64_t> updated_step_;
  std::vector<int64_t> moments_step_;  // moments_later units: the step their m and v carry
  std::vector<double> sumsq_;
  int64_t step_ = 0;
  float lr_ = 0;
  int reduced_ = 0;
  double norm_ = 0;
  bool norm_ready_ = false;
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace sf
