// defines: sf::weigh_held_share, sf::weigh_micro_batch, sf::weigh_moments_later — the plan's own
// choices that only a step's predicted time can settle (engine/predict.h), weighed with the
// machine's constants: each returns the plan it keeps or the better one, and says what it weighed.
#pragma once

#include <string>

#include "engine/machine.h"
#include "engine/plan.h"

namespace sf {

// Below this gain of the step the plan's own held share is not worth its host memory...
constexpr double kHeldMinGain = 0.03;
// ... provided the CPU AdamW of every host unit (at its rate under copies) takes at most this
// share of the backward: the prediction alone said 0 % at 32k tokens on the GPU machine, where the
// share measured 1.25× (its AdamW took ~0.95 of the backward); at 64k it took ~0.5 and the share
// measured 1.00× (docs/perf.md, "Held gradients without clipping").
constexpr double kHeldAdamShare = 0.75;

// Where `plan` took its own held share (request.held_units -1, no clipping): the plan for
// `request` without it when, by the prediction, the share shortens the step by less than
// kHeldMinGain and the AdamW has room in the backward (kHeldAdamShare) — its 2 B/param of host
// buy nothing there. Else `plan` as it is. `note` (not null) gets what was weighed, or stays
// empty where nothing was.
EnginePlan weigh_held_share(const PlanRequest& request, const EnginePlan& plan,
                            const MachineConstants& m, std::string* note);

// Where the budget alone stopped the plan's GPU-resident share short of the layers and the plan
// chose M itself (request.micro_tokens 0, the share kAuto and not given, one device, no NVMe
// tier): the plan's own M, and M halved below it, down to the longest sample, where that takes
// more units onto the device, each with the held share (no clipping, request.held_units -1) of
// every size whose host total stays within what `plan` would hold with its decoder layers' state
// on the host, and with its margin within request.host_limit — the host bytes a layer on the
// device frees go to held gradients, which keep the CPU AdamW busy through the forward. The
// fastest of them by the prediction (its layers slower by micro_batch_cost) where it shortens the
// step by at least kHeldMinGain; else `plan`. At small batch the CPU AdamW is the step and the GPU
// has room for slower micro-batches: for 8B at 8k tokens under 24 GiB, M 2048 takes layers 0-1
// onto the device. `note` as above (empty where nothing but the plan was weighed).
EnginePlan weigh_micro_batch(const PlanRequest& request, const EnginePlan& plan,
                             const MachineConstants& m, std::string* note);

// With clipping and request.moments_later_units -1: `plan` with the number of moments_later
// units (from the bottom up) the prediction finds fastest, where that shortens the step by at
// least kHeldMinGain (the m and v written later cost no memory, but an order the prediction
// gains little from is not worth the risk of its error); else `plan` as it is. `note` as above.
EnginePlan weigh_moments_later(const PlanRequest& request, const EnginePlan& plan,
                               const MachineConstants& m, std::string* note);

}  // namespace sf
