// plan_layouts [--host-memory GiB] [--gpu-memory GiB] [--tokens T] [--bandwidth GB/s] MODEL_DIR...:
// the NVMe tier's split of each model (config.json alone) as `plan` makes it for a CUDA run
// (bf16 compute, a host limit, NVMe on), next to the layout of whole layers on disk (m, v and
// master: nvme_masters = the model's layers), with each one's disk bytes a step and their time at
// the given bandwidth (reads and writes one after the other). No GPU needed: the device side is
// planned without the backend's scratch and with 1.4 GiB outside the engine (the H100/H200
// context and libraries), which moves M, not the host side that decides the split.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/host_check.h"
#include "engine/plan.h"
#include "model/spec.h"

int main(int argc, char** argv) {
  double host_gib = 256, gpu_gib = 24, gbps = 7;
  int64_t tokens = 16384;
  std::vector<std::string> models;
  for (int i = 1; i < argc; ++i) {
    const bool value = i + 1 < argc;
    if (std::strcmp(argv[i], "--host-memory") == 0 && value) {
      host_gib = std::atof(argv[++i]);
    } else if (std::strcmp(argv[i], "--gpu-memory") == 0 && value) {
      gpu_gib = std::atof(argv[++i]);
    } else if (std::strcmp(argv[i], "--tokens") == 0 && value) {
      tokens = std::atoll(argv[++i]);
    } else if (std::strcmp(argv[i], "--bandwidth") == 0 && value) {
      gbps = std::atof(argv[++i]);
    } else {
      models.push_back(argv[i]);
    }
  }
  if (models.empty() || host_gib <= 0 || gpu_gib <= 0 || tokens <= 0 || gbps <= 0) {
    std::fprintf(stderr,
                 "usage: plan_layouts [--host-memory GiB] [--gpu-memory GiB] [--tokens T] "
                 "[--bandwidth GB/s] MODEL_DIR...\n");
    return 2;
  }
  try {
    for (const std::string& dir : models) {
      sf::PlanRequest r;
      r.spec = sf::load_model_spec(dir);
      r.dtype = sf::DType::kBF16;
      r.max_tokens = tokens;
      r.max_sequences = tokens / 1024;
      r.max_sample_tokens = 1024;
      r.gpu_budget = uint64_t(gpu_gib * double(1ull << 30));
      r.device_outside = uint64_t(1.4 * double(1ull << 30));
      r.nvme = true;
      r.host_limit = sf::host_limit_for_plan(uint64_t(host_gib * double(1ull << 30)), false);
      for (bool whole : {false, true}) {
        sf::PlanRequest q = r;
        if (whole) q.nvme_masters = int(r.spec.layers);
        const sf::EnginePlan p = sf::make_plan(q);
        std::cout << dir << (whole ? ", whole layers on disk" : ", the plan's layout") << ": "
                  << p.describe()
                  << "\n  disk: " << (p.nvme_read_bytes + p.nvme_write_bytes) / (gbps * 1e9)
                  << " s a step at " << gbps << " GB/s\n";
      }
    }
  } catch (const sf::Error& e) {
    std::fprintf(stderr, "plan_layouts: %s\n", e.what());
    return 1;
  }
  return 0;
}
