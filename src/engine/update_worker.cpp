#include "engine/update_worker.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "core/cpu_topology.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "optim/clip.h"

namespace sf {

UpdateWorker::UpdateWorker(std::vector<UnitState*> units, DType grad_dtype, AdamWParams hp,
                           float max_grad_norm, int64_t piece, NvmeTier* nvme)
    : units_(std::move(units)),
      nvme_(nvme),
      grad_dtype_(grad_dtype),
      hp_(hp),
      max_grad_norm_(max_grad_norm),
      piece_(piece),
      received_(units_.size(), 0),
      updated_step_(units_.size(), 0),
      moments_step_(units_.size(), 0),
      sumsq_(units_.size(), 0.0) {
  thread_ = std::thread([this] { loop(); });
}

int UpdateWorker::pin(const std::vector<int>& cpus) {
  if (cpus.empty()) return 0;
  const int self = pin_thread(thread_.native_handle(), cpus) ? 1 : 0;
  return self + ThreadPool::global().pin(cpus);
}

UpdateWorker::~UpdateWorker() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void UpdateWorker::rethrow_locked() {
  if (error_) std::rethrow_exception(error_);
}

void UpdateWorker::begin_step(int64_t step, float lr) {
  // Does not wait for the previous step's updates: the engine waits per unit before it loads one,
  // so the next forward overlaps the tail of the update. All of the previous step's gradients
  // have been reduced (Engine::step waits for the norm), so the per-step sums can be reset.
  std::lock_guard<std::mutex> lk(mu_);
  rethrow_locked();
  SF_CHECK(reduced_ == 0 || reduced_ == int(units_.size()),
           "internal: optimizer step ", step, " opened before step ", step_, " was reduced");
  step_ = step;
  lr_ = lr;
  reduced_ = 0;
  norm_ready_ = false;
  std::fill(sumsq_.begin(), sumsq_.end(), 0.0);
  std::fill(received_.begin(), received_.end(), 0);
}

void UpdateWorker::grad_ready(int unit, double sumsq) {
  const UnitState& h = *units_[size_t(unit)];
  {
    std::lock_guard<std::mutex> lk(mu_);
    arrived_.push_back(Piece{unit, 0, h.layout.numel, h.grad, nullptr, sumsq});
  }
  cv_.notify_all();
}

void UpdateWorker::piece_ready(int unit, int64_t offset, int64_t count, const void* grad,
                               std::function<void()> release) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    arrived_.push_back(Piece{unit, offset, count, grad, std::move(release)});
  }
  cv_.notify_all();
}

void UpdateWorker::device_reduced(int unit, double sumsq) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    arrived_.push_back(Piece{unit, 0, units_[size_t(unit)]->layout.numel, nullptr, nullptr, sumsq});
  }
  cv_.notify_all();
}

void UpdateWorker::device_updated(int unit, int64_t step, int64_t nonfinite, float lr) {
  if (nonfinite == 0) return;
  {
    std::lock_guard<std::mutex> lk(mu_);
    try {
      check_finite(unit, step, nonfinite, lr);
    } catch (...) {
      if (!error_) error_ = std::current_exception();  // the first error is the cause
    }
  }
  cv_.notify_all();
}

void UpdateWorker::wait_updated(int unit, int64_t step) {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return error_ || updated_step_[size_t(unit)] >= step; });
  rethrow_locked();
}

bool UpdateWorker::is_updated(int unit, int64_t step) {
  std::lock_guard<std::mutex> lk(mu_);
  return updated_step_[size_t(unit)] >= step;
}

void UpdateWorker::wait_moments(int unit, int64_t step) {
  if (!units_[size_t(unit)]->moments_later) return;
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return error_ || moments_step_[size_t(unit)] >= step; });
  rethrow_locked();
}

double UpdateWorker::wait_grad_norm() {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return error_ || norm_ready_; });
  rethrow_locked();
  return norm_;
}

void UpdateWorker::wait_all() {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] {
    if (error_) return true;
    for (size_t u = 0; u < units_.size(); ++u)
      if (updated_step_[u] != step_ || (units_[u]->moments_later && moments_step_[u] != step_))
        return false;
    return true;
  });
  rethrow_locked();
}

void UpdateWorker::reset_steps(int64_t steps) {
  wait_all();
  std::lock_guard<std::mutex> lk(mu_);
  step_ = steps;
  reduced_ = int(units_.size());
  std::fill(updated_step_.begin(), updated_step_.end(), steps);
  std::fill(moments_step_.begin(), moments_step_.end(), steps);
}

void UpdateWorker::update_range(int u, int64_t offset, int64_t count, const void* grad,
                                int64_t step, float lr, float clip, const char* kind, double t0,
                                AdamWWrite what, double* sumsq) {
  const UnitState& h = *units_[size_t(u)];
  AdamWParams hp = hp_;
  hp.lr = lr;
  check_finite(u, step,
               adamw_step(h.master + offset, h.m + offset, h.v + offset, grad, grad_dtype_, count,
                          step, hp, clip, nullptr, what, sumsq),
               lr);
  if (trace_)
    trace_->host_span(TraceTrack::kOptimizer, "AdamW unit " + std::to_string(u) + kind, t0,
                      Trace::now_us(), uint64_t(count), step);
}

void UpdateWorker::check_finite(int u, int64_t step, int64_t bad, float lr) const {
  if (bad == 0) return;
  const UnitLayout& l = units_[size_t(u)]->layout;
  SF_FAIL("step ", step, ": the AdamW update of unit ", u, " (",
          l.entries.empty() ? std::string("?") : l.entries.front().desc.name,
          l.entries.size() > 1 ? ", …" : "", ") left ", bad,
          " weights non-finite (inf or NaN): the run diverged; lower learning_rate (it is ", lr,
          ") or check the data. Nothing of this step was saved");
}

void UpdateWorker::loop() {
  for (;;) {
    Piece p;
    std::optional<Held> job;  // else a held unit's tile [offset, offset + count)
    int64_t offset = 0, count = 0;
    bool last = false;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk,
               [&] { return stop_ || !arrived_.empty() || !held_.empty() || !later_.empty(); });
      if (!arrived_.empty()) {  // ring pieces first: the backward waits for their slots
        p = std::move(arrived_.front());
        arrived_.pop_front();
        if (error_) {  // the run has failed: release the piece's slot, update nothing more
          lk.unlock();
          if (p.release) p.release();
          continue;
        }
      } else if (!held_.empty() || !later_.empty()) {
        // then the held unit the next forward needs first, then the moments the next gradients
        // wait for: the next tile of the first
        Held& h = !held_.empty() ? held_.front() : later_.front();
        job = h;
        offset = h.done;
        count = std::min(piece_, units_[size_t(h.unit)]->layout.numel - offset);
        h.done += count;
        last = h.done == units_[size_t(h.unit)]->layout.numel;
        if (last && !held_.empty())
          held_.erase(held_.begin());
        else if (last)
          later_.pop_front();
      } else {
        return;  // stopping, nothing left
      }
    }
    try {
      if (job) {
        const UnitState& h = *units_[size_t(job->unit)];
        update_range(job->unit, offset, count,
                     static_cast<const char*>(h.grad) + size_t(offset) * dtype_size(grad_dtype_),
                     job->step, job->lr, job->clip, job->moments ? " (moments)" : " (held)",
                     trace_ ? Trace::now_us() : 0,
                     job->moments ? AdamWWrite::kMoments : AdamWWrite::kAll);
        if (last) {
          std::lock_guard<std::mutex> lk(mu_);
          (job->moments ? moments_step_ : updated_step_)[size_t(job->unit)] = job->step;
        }
        cv_.notify_all();
      } else {
        consume(p);
      }
    } catch (...) {
      std::lock_guard<std::mutex> lk(mu_);
      if (!error_) error_ = std::current_exception();  // the first error is the cause
      cv_.notify_all();
    }
    if (p.release) p.release();  // even after an error: the D2H side must not wait forever
  }
}

void UpdateWorker::consume(Piece& p) {
  const bool clipping = max_grad_norm_ > 0;
  const int n = int(units_.size());
  const UnitState& h = *units_[size_t(p.unit)];
  const double t0 = trace_ ? Trace::now_us() : 0;
  const bool device = p.grad == nullptr;  // updated on the device, not here
  // A held unit without clipping: its whole gradient, updated later, in forward order.
  const bool held = !clipping && !device && p.grad == h.grad;
  // A ring piece without clipping: updated now, its Σ g² formed by the same pass.
  const bool ring = !clipping && !device && !held;
  int64_t step;
  float lr;
  {
    std::lock_guard<std::mutex> lk(mu_);
    step = step_;
    lr = lr_;
  }
  double ss = p.sumsq;  // a whole unit's, formed on the device: GPU-resident or held
  if (ring) {
    UnitState& u = *units_[size_t(p.unit)];
    if (u.on_nvme && p.offset == 0) nvme_->acquire_state(u, p.unit);
    update_range(p.unit, p.offset, p.count, p.grad, step, lr, 1.0f, "", t0, AdamWWrite::kAll, &ss);
  }
  bool unit_done, all_in = false;
  {
    std::lock_guard<std::mutex> lk(mu_);
    sumsq_[size_t(p.unit)] += ss;  // pieces of a unit arrive in order: a fixed sum
    received_[size_t(p.unit)] += p.count;
    unit_done = received_[size_t(p.unit)] == h.layout.numel;
    if (unit_done) all_in = ++reduced_ == n;
  }
  if (device) {
    std::lock_guard<std::mutex> lk(mu_);
    updated_step_[size_t(p.unit)] = step;
  } else if (held) {
    std::lock_guard<std::mutex> lk(mu_);
    const Held job{p.unit, step, lr};
    held_.insert(std::upper_bound(held_.begin(), held_.end(), job,
                                  [](const Held& a, const Held& b) { return a.unit < b.unit; }),
                 job);
  } else if (ring && unit_done) {
    UnitState& u = *units_[size_t(p.unit)];
    if (u.on_nvme) nvme_->release_state(u, p.unit);
    std::lock_guard<std::mutex> lk(mu_);
    updated_step_[size_t(p.unit)] = step;
  }
  if (all_in) {
    // Summed in unit order, so the norm does not depend on the order gradients arrived in.
    double total = 0;
    for (double s : sumsq_) total += s;
    const double norm = std::sqrt(total);
    {
      std::lock_guard<std::mutex> lk(mu_);
      norm_ = norm;
      norm_ready_ = true;
    }
    cv_.notify_all();
    if (clipping) {
      const float clip = clip_factor(norm, max_grad_norm_);
      for (int k = 0; k < n; ++k) {
        UnitState& u = *units_[size_t(k)];
        if (u.on_device) continue;  // the engine updates it on the device
        if (u.on_nvme) nvme_->acquire_state(u, k);
        update_range(k, 0, u.layout.numel, u.grad, step, lr, clip,
                     u.moments_later ? " (clipped, master)" : " (clipped)",
                     trace_ ? Trace::now_us() : 0,
                     u.moments_later ? AdamWWrite::kWeights : AdamWWrite::kAll);
        if (u.on_nvme) nvme_->release_state(u, k);
        {
          std::lock_guard<std::mutex> lk(mu_);
          updated_step_[size_t(k)] = step;
        }
        cv_.notify_all();
      }
      // The moments, from the top unit down: the next backward's gradients reach it first.
      std::lock_guard<std::mutex> lk(mu_);
      for (int k = n - 1; k >= 0; --k)
        if (units_[size_t(k)]->moments_later) {
          Held job{k, step, lr};
          job.moments = true;
          job.clip = clip;
          later_.push_back(job);
        }
    }
  }
  cv_.notify_all();
}

}  // namespace sf
