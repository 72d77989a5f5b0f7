#include "engine/update_worker.h"

#include <cmath>

#include "core/error.h"
#include "optim/clip.h"

namespace sf {

UpdateWorker::UpdateWorker(std::vector<HostUnit*> units, DType grad_dtype, AdamWParams hp,
                           float max_grad_norm)
    : units_(std::move(units)),
      grad_dtype_(grad_dtype),
      hp_(hp),
      max_grad_norm_(max_grad_norm),
      updated_step_(units_.size(), 0),
      sumsq_(units_.size(), 0.0) {
  thread_ = std::thread([this] { loop(); });
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
}

void UpdateWorker::grad_ready(int unit) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    arrived_.push_back(unit);
  }
  cv_.notify_all();
}

void UpdateWorker::wait_updated(int unit, int64_t step) {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return error_ || updated_step_[size_t(unit)] >= step; });
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
    for (int64_t s : updated_step_)
      if (s != step_) return false;
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
}

void UpdateWorker::update_unit(int u, int64_t step, float lr, float clip) {
  HostUnit& h = *units_[size_t(u)];
  AdamWParams hp = hp_;
  hp.lr = lr;
  adamw_step(h.master, h.m, h.v, h.grad, grad_dtype_, h.layout.numel, step, hp, clip,
             static_cast<uint16_t*>(h.shadow));
}

void UpdateWorker::loop() {
  const bool clipping = max_grad_norm_ > 0;
  const int n = int(units_.size());
  for (;;) {
    int u;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stop_ || !arrived_.empty(); });
      if (arrived_.empty()) return;
      u = arrived_.front();
      arrived_.pop_front();
    }
    try {
      const HostUnit& h = *units_[size_t(u)];
      double ss = sum_squares(h.grad, grad_dtype_, h.layout.numel);
      bool all_in;
      int64_t step;
      float lr;
      {
        std::lock_guard<std::mutex> lk(mu_);
        sumsq_[size_t(u)] = ss;
        all_in = ++reduced_ == n;
        step = step_;
        lr = lr_;
      }
      if (!clipping) update_unit(u, step, lr, 1.0f);
      if (all_in) {
        // Summed in unit order, so the norm does not depend on the order gradients arrived in.
        double total = 0;
        for (double s : sumsq_) total += s;
        double norm = std::sqrt(total);
        float clip = clipping ? clip_factor(norm, max_grad_norm_) : 1.0f;
        {
          std::lock_guard<std::mutex> lk(mu_);
          norm_ = norm;
          norm_ready_ = true;
        }
        cv_.notify_all();
        if (clipping) {
          for (int k = 0; k < n; ++k) {
            update_unit(k, step, lr, clip);
            {
              std::lock_guard<std::mutex> lk(mu_);
              updated_step_[size_t(k)] = step;
            }
            cv_.notify_all();
          }
        }
      }
      if (!clipping) {
        std::lock_guard<std::mutex> lk(mu_);
        updated_step_[size_t(u)] = step;
      }
      cv_.notify_all();
    } catch (...) {
      std::lock_guard<std::mutex> lk(mu_);
      error_ = std::current_exception();
      cv_.notify_all();
    }
  }
}

}  // namespace sf
