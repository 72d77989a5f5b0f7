// defines: sf::StepPrediction, sf::predict_step, sf::micro_batch_cost — a step's time from the
// plan and the machine's constants (engine/machine.h), by playing the engine's schedule
// (engine.cpp) on three resources: the compute stream, the PCIe copies (H2D and D2H each at their
// measured rate) and the CPU optimizer, each event starting when what it waits for in the engine is
// done:
//   forward:  layer i computes once its weights are up; the upload of layer i+1 overlaps it
//             (the window's slots), the checkpoint offload of x_i runs on the D2H stream;
//   head:     its upload (GPU-resident: a cast), then the fused head on the step's tokens;
//   backward: layer j waits for its weights (the last W layers of the forward are still in their
//             slots) and for x_j's restore; its gradient then goes D2H and to the CPU AdamW, which
//             takes pieces in arrival order at its rate while copies run (alone after the GPU is
//             done); with exact clipping the updates wait for the norm and run in forward order,
//             into the next step's forward, whose uploads wait for them; the moments_later
//             units' m and v after every master, from the top down, beside the next step's
//             copies, and their next gradient's D2H waits for them.
// The prediction is for the steady state (the second and later steps of a run).
#pragma once

#include <string>

#include "engine/machine.h"
#include "engine/plan.h"
#include "model/spec.h"

namespace sf {

struct StepPrediction {
  double step_s = 0;                                 // the whole step
  double forward_s = 0, head_s = 0, backward_s = 0;  // phases on the compute stream's clock
  double tail_s = 0;  // after the GPU's last work: the CPU AdamW still running (no clipping)
  // Resource totals per step, whether overlapped or not.
  double compute_s = 0, h2d_s = 0, d2h_s = 0, adam_s = 0;
  double h2d_bytes = 0, d2h_bytes = 0;
  // The NVMe tier: bytes read and written per step, and their time at the disk's rates (one
  // disk: reads and writes one after the other, or together at its mixed rate where that was
  // measured and is faster: disk_seconds). The step is at least that: the disk floor.
  double disk_read_bytes = 0, disk_write_bytes = 0, disk_s = 0;
  double host_params = 0;  // updated by the CPU AdamW
  // Bytes through the host's memory (the AdamW's, both DMA
  // directions) and their time at the most the machine probe saw the host carry (0 where the
  // probe did not measure the copies beside the AdamW): the step is at least that.
  double host_bytes = 0, host_s = 0;
  std::string bound;       // what the step waits on most
  std::string describe(int64_t tokens) const;
};

// `tokens`: the step's T (the machine's layer constants were measured at a micro-batch of
// m.micro_tokens and the sample length; the layer's time scales with the tokens, micro-batch by
// micro-batch, and by micro_batch_cost where the plan's M is smaller).
StepPrediction predict_step(const EnginePlan& plan, const ModelSpec& spec,
                            const MachineConstants& m, int64_t tokens, bool clipping);

// A micro-batch of M tokens below the saturating size (kSaturatingTokens, engine/plan.h) and below
// the M the layer was measured at runs the layer this much slower per halving of M: the 8B layer
// measured 660 TFLOP/s at M = 2048 against 709-724 at 8192 (H200, bench/e2e/h200_2026-12-04_*),
// 4 % a halving; 5 % is what the prediction charges.
constexpr double kSmallMicroBatchCost = 0.05;

// The layer's time per token at M over the time `m` measured (m.micro_tokens): (1 +
// kSmallMicroBatchCost) per halving of M below the smaller of m.micro_tokens and kSaturatingTokens;
// 1 where M is not below it or m.micro_tokens is 0 (not known).
double micro_batch_cost(const MachineConstants& m, int64_t micro_tokens);

}  // namespace sf
