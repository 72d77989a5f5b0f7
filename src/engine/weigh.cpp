#include "engine/weigh.h"

#include <algorithm>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "core/host_memory.h"
#include "engine/host_check.h"
#include "engine/predict.h"
#include "engine/unit_state.h"

namespace sf {

EnginePlan weigh_held_share(const PlanRequest& request, const EnginePlan& plan,
                            const MachineConstants& m, std::string* note) {
  note->clear();
  if (request.held_units >= 0 || request.clipping || plan.held_params == 0) return plan;
  PlanRequest without = request;
  without.held_units = 0;
  EnginePlan ring = make_plan(without);
  const double held_s = predict_step(plan, request.spec, m, request.max_tokens, false).step_s;
  const StepPrediction r = predict_step(ring, request.spec, m, request.max_tokens, false);
  const double ring_s = r.step_s, gain = ring_s / held_s - 1;
  const double adam_share = r.adam_s / r.backward_s;
  std::ostringstream o;
  o.setf(std::ios::fixed);
  o.precision(3);
  o << "held gradients (" << plan.held_names() << ", " << gib(plan.host.grads - ring.host.grads)
    << " of host): predicted step " << held_s << " s with them, " << ring_s << " s without (";
  o.precision(1);
  o << 100 * gain << " % gain), the CPU AdamW " << 100 * adam_share << " % of the backward; ";
  if (gain >= kHeldMinGain || adam_share > kHeldAdamShare) {
    *note = o.str() + "taken";
    return plan;
  }
  o << "not taken: the gain below " << 100 * kHeldMinGain << " % and the AdamW within "
    << 100 * kHeldAdamShare << " % of the backward";
  *note = o.str();
  return ring;
}

EnginePlan weigh_micro_batch(const PlanRequest& request, const EnginePlan& plan,
                             const MachineConstants& m, std::string* note) {
  note->clear();
  if (request.micro_tokens > 0 || request.mlp_tokens > 0 || !request.on_device.empty() ||
      request.device_optimizer != DeviceOptimizer::kAuto || request.gpu_budget == 0 ||
      request.devices != 1 || plan.next_layer_bytes == 0 || plan.nvme_disk > 0)
    return plan;
  const int64_t T = request.max_tokens;
  const int64_t longest =
      request.max_sample_tokens > 0 ? std::min(request.max_sample_tokens, T) : T;
  const bool weigh_held = !request.clipping && request.held_units < 0;
  auto predict = [&](const EnginePlan& p) {
    return predict_step(p, request.spec, m, T, request.clipping).step_s;
  };
  // The host the held share may fill: what the plan would hold with every decoder layer's state on
  // the host (its held share by the plan's own rule), or the plan's own where more — a layer on
  // the device frees 12 B/param of host, and held gradients turn them into CPU AdamW work done
  // through the forward.
  PlanRequest apart = request;
  apart.micro_tokens = plan.micro_tokens;
  apart.on_device = plan.on_device;
  for (size_t k = 1; k + 1 < apart.on_device.size(); ++k) apart.on_device[k] = false;
  const uint64_t host_cap = std::max(plan.host.total(), make_plan(apart).host.total());
  // ... and within the host limit with its margin, as the plan itself (a held share asked for is
  // not dropped to fit it: the engine would refuse instead).
  const auto fits_host = [&](const EnginePlan& c) {
    const uint64_t h = c.host.total();
    return h <= host_cap && (request.host_limit == 0 || h + host_margin(h) <= request.host_limit);
  };
  const double plan_s = predict(plan);
  EnginePlan best = plan;
  double best_s = plan_s;
  bool weighed = false;  // a candidate other than the plan
  for (int64_t M = plan.micro_tokens;; M = std::max(longest, M / 2)) {
    const bool own = M == plan.micro_tokens;
    // At the plan's M its held share alone (nothing to weigh where that is fixed); below it, only
    // where more is on the device.
    if (!own || weigh_held) {
      PlanRequest q = request;
      q.micro_tokens = M;
      if (own) q.on_device = plan.on_device;
      if (weigh_held) q.held_units = 0;
      EnginePlan c = make_plan(q);
      const bool candidate = own || c.device_params > plan.device_params;
      // Held shares from none up while the host stays within the cap.
      for (int held = 0; candidate && fits_host(c); ++held) {
        weighed = true;
        // faster by more than the prediction's rounding to be worth its bytes
        if (const double t = predict(c); t < best_s * (1 - 1e-3)) best = c, best_s = t;
        if (!weigh_held) break;
        q.held_units = held + 1;
        const int64_t before = c.held_params;
        c = make_plan(q);
        if (c.held_params == before) break;  // every host unit held
      }
    }
    if (M <= longest) break;
  }
  const double gain = plan_s / best_s - 1;
  if (!weighed) return plan;
  if (best_s == plan_s) {
    *note = str_cat("micro-batches weighed: none from ", plan.micro_tokens,
                    " tokens down, with the held gradients the host allows, is faster by the "
                    "prediction");
    return plan;
  }
  std::ostringstream o;
  o.setf(std::ios::fixed);
  o.precision(3);
  o << "micro-batches weighed: M " << best.micro_tokens;
  if (best.micro_tokens == plan.micro_tokens)
    o << " as planned";
  else
    o << " (" << plan.micro_tokens << " planned) with " << best.device_params - plan.device_params
      << " more parameters updated on the device";
  if (weigh_held)
    o << " and the gradients of " << (best.held_params ? best.held_names() : "no unit")
      << " held (host " << gib(best.host.total()) << "; the plan's " << gib(plan.host.total())
      << ", with its layers' state on the host " << gib(host_cap) << ")";
  o << ": predicted step " << best_s << " s against " << plan_s << " s (";
  o.precision(1);
  o << 100 * gain << " % gain); ";
  if (gain >= kHeldMinGain) {
    *note = o.str() + "taken";
    return best;
  }
  *note = o.str() + "not taken: below " + std::to_string(int(100 * kHeldMinGain)) + " %";
  return plan;
}

EnginePlan weigh_moments_later(const PlanRequest& request, const EnginePlan& plan,
                               const MachineConstants& m, std::string* note) {
  note->clear();
  if (!request.clipping || request.moments_later_units >= 0 || m.adam_master_params_per_s <= 0 ||
      m.adam_moments_params_per_s <= 0)
    return plan;
  const std::vector<UnitLayout> units = unit_layouts(request.spec);
  EnginePlan p = plan;
  p.set_moments_later(units, int(units.size()), true);  // every unit that can be: the candidates
  const int candidates = int(std::count(p.moments_later.begin(), p.moments_later.end(), true));
  EnginePlan best = plan;
  best.set_moments_later(units, 0, true);
  const double none_s = predict_step(best, request.spec, m, request.max_tokens, true).step_s;
  double best_s = none_s;
  for (int k = 1; k <= candidates; ++k) {
    p.set_moments_later(units, k, true);
    const double s = predict_step(p, request.spec, m, request.max_tokens, true).step_s;
    if (s < best_s) best_s = s, best = p;
  }
  std::ostringstream o;
  o.setf(std::ios::fixed);
  o.precision(3);
  const double gain = none_s / best_s - 1;
  if (best.moments_later_params == 0) {
    *note = "m and v written later: no unit gains by the prediction; none";
    return best;
  }
  o << "m and v written later (" << best.moments_later_names() << "): predicted step " << best_s
    << " s with them, " << none_s << " s without (";
  o.precision(1);
  o << 100 * gain << " % gain); ";
  if (gain >= kHeldMinGain) {
    *note = o.str() + "taken";
    return best;
  }
  *note = o.str() + "not taken: below " + std::to_string(int(100 * kHeldMinGain)) + " %";
  best.set_moments_later(units, 0, true);
  return best;
}

}  // namespace sf
