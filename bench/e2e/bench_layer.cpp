// bench_layer MODEL_DIR [M] [S] [HOT_SECONDS...]: the machine probe's layer timing
// (engine/machine.h, time_layer) of the model's decoder layer on M tokens (default 16384) in
// samples of S (default 1024), after the layer ran back to back for each of the given seconds
// (default 0 0.5 1 2 4 8), in that order: whether a GPU hot from seconds of sustained work runs
// the layer slower than a cold one, and after how long the time settles. Run `nvidia-smi
// --query-gpu=clocks.sm,power.draw -lms 100` beside it to see the clocks. Needs a CUDA GPU.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <vector>

#include "engine/machine.h"
#include "model/spec.h"
#include "train/run_setup.h"

int main(int argc, char** argv) {
  using namespace sf;
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_layer MODEL_DIR [M] [S] [HOT_SECONDS...]\n");
    return 2;
  }
  try {
    const ModelSpec spec = load_model_spec(argv[1]);
    const int64_t M = argc > 2 ? std::atoll(argv[2]) : 16384;
    const int64_t S = argc > 3 ? std::atoll(argv[3]) : 1024;
    std::vector<double> hot;
    for (int i = 4; i < argc; ++i) hot.push_back(std::atof(argv[i]));
    if (hot.empty()) hot = {0, 0.5, 1, 2, 4, 8};
    if (M < 1 || S < 1 || S > M) {
      std::fprintf(stderr, "bench_layer: need 1 <= S <= M\n");
      return 2;
    }
    auto be = make_backend("cuda", spec, M);
    std::printf("layer of %s on %lld tokens in samples of %lld, %s\n", argv[1], (long long)M,
                (long long)S, be->name().c_str());
    for (double h : hot) {
      const LayerTimes t = time_layer(*be, spec, M, S, h);
      std::printf(
          "after %4.1f s back to back: forward %7.3f ms (%.3f µs/token), recompute + "
          "backward %7.3f ms (%.3f µs/token), %.1f TFLOP/s\n",
          h, t.forward * 1e3, t.forward / double(M) * 1e6, t.backward * 1e3,
          t.backward / double(M) * 1e6, t.flops / (t.forward + t.backward) * 1e-12);
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_layer: %s\n", e.what());
    return 1;
  }
  return 0;
}
