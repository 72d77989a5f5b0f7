// replay_predict MODEL_DIR TOKENS WINDOW DEVICE_LAYERS HELD CLIP H2D D2H ADAM ADAM_COPY FWD BWD
// TFLOPS
//                [ADAM_MASTER ADAM_MOMENTS [COPY_BESIDE SPLIT]]
// The step time the current predictor (engine/predict.h) gives for a run logged earlier, from the
// plan's shape and the machine constants that run measured (its `plan` log): no GPU needed.
// DEVICE_LAYERS: -1 no GPU-resident share, -2 the embedding and the head, -3 the embedding alone,
// k >= 0: the embedding, the head and decoder layers 0..k-1, -10 - k: the embedding and decoder
// layers 0..k-1 with the head on the host (the plan's choice where the head does not fit); HELD:
// held units without clipping (the plan's count); CLIP: 0 or 1; H2D, D2H in GB/s; ADAM, ADAM_COPY
// in G params/s; FWD, BWD in µs per token of one layer; TFLOPS: the layer's rate (the fused
// head's); ADAM_MASTER, ADAM_MOMENTS (G params/s): the clipped update's two passes alone — given,
// with CLIP 1 the m and v written later are weighed (weigh_moments_later) and the plan it chooses
// predicted; COPY_BESIDE (GB/s): what the probe's copies moved beside the AdamW (0: unknown, then
// no host floor); SPLIT: the run's own count of host units with m and v written later, from the
// bottom up (-1: weigh them as above). Prints the predicted step and its breakdown.
// bench/e2e/replay_predictions.py drives it over the logs under bench/e2e.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "engine/machine.h"
#include "engine/plan.h"
#include "engine/predict.h"
#include "engine/unit_state.h"
#include "engine/weigh.h"
#include "model/spec.h"

int main(int argc, char** argv) {
  using namespace sf;
  if (argc != 14 && argc != 16 && argc != 18) {
    std::fprintf(stderr,
                 "usage: replay_predict MODEL_DIR TOKENS WINDOW DEVICE_LAYERS HELD CLIP H2D D2H "
                 "ADAM ADAM_COPY FWD BWD TFLOPS [ADAM_MASTER ADAM_MOMENTS [COPY_BESIDE SPLIT]]\n");
    return 2;
  }
  try {
    const ModelSpec spec = load_model_spec(argv[1]);
    const int64_t tokens = std::atoll(argv[2]);
    const int device_layers = std::atoi(argv[4]);
    PlanRequest r;
    r.spec = spec;
    r.dtype = DType::kBF16;
    r.window = std::atoi(argv[3]);
    r.max_tokens = tokens;
    r.max_sample_tokens = std::min<int64_t>(tokens, 1024);
    r.max_sequences = (tokens + r.max_sample_tokens - 1) / r.max_sample_tokens;
    r.clipping = std::atoi(argv[6]) != 0;
    r.held_units = r.clipping ? -1 : std::atoi(argv[5]);
    r.device_optimizer = DeviceOptimizer::kOff;
    if (device_layers != -1) {
      const bool head = device_layers >= -2;
      const int layers = device_layers <= -10 ? -10 - device_layers : std::max(device_layers, 0);
      r.on_device.assign(unit_layouts(spec).size(), false);
      r.on_device.front() = true;
      r.on_device.back() = head;
      for (int k = 0; k < layers; ++k) r.on_device[size_t(1 + k)] = true;
    }
    EnginePlan plan = make_plan(r);
    MachineConstants m;
    m.h2d_gbps = std::atof(argv[7]);
    m.d2h_gbps = std::atof(argv[8]);
    m.adam_params_per_s = std::atof(argv[9]) * 1e9;
    m.adam_copy_params_per_s = std::atof(argv[10]) * 1e9;
    m.layer_forward_s = std::atof(argv[11]) * 1e-6;
    m.layer_backward_s = std::atof(argv[12]) * 1e-6;
    m.layer_tflops = std::atof(argv[13]);
    if (argc >= 16) {
      m.adam_master_params_per_s = std::atof(argv[14]) * 1e9;
      m.adam_moments_params_per_s = std::atof(argv[15]) * 1e9;
      const int split = argc == 18 ? std::atoi(argv[17]) : -1;
      if (argc == 18) m.copy_beside_adam_gbps = std::atof(argv[16]);
      if (split >= 0) {
        plan.set_moments_later(unit_layouts(spec), split, r.clipping);
      } else {
        std::string note;
        plan = weigh_moments_later(r, plan, m, &note);
        if (!note.empty()) std::printf("%s\n", note.c_str());
      }
    }
    const StepPrediction p = predict_step(plan, spec, m, tokens, r.clipping);
    std::printf("held %s\n%s\n", plan.held_names().c_str(), p.describe(tokens).c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "replay_predict: %s\n", e.what());
    return 1;
  }
  return 0;
}
